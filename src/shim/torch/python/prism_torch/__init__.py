"""PrismLLM's torch.distributed backend "prism" (docs/torch-backend.md).

Under ``prism emulate``, the sitecustomize module next to this package
installs it while torch loads, so that an unmodified program runs on it:

- ``install_distributed`` registers the backend and maps the backends a
  program asks for ("gloo", "nccl", ...) to it;
- ``install_optimizer`` makes every optimizer step send iteration markers.

``install()`` does both into an already imported torch, for programs that
want to opt in explicitly. Nothing here imports torch at import time.
"""

from ._distributed import install_distributed
from ._markers import install_optimizer

__all__ = ["install", "install_distributed", "install_optimizer"]


def install():
    """Installs the backend and the iteration markers into torch."""
    import torch.distributed.distributed_c10d as c10d
    import torch.optim.optimizer as optimizer

    install_distributed(c10d)
    install_optimizer(optimizer)
