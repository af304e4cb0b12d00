"""Constructs ProcessGroupGloo directly, which PrismLLM cannot interpose."""

import torch.distributed as dist

try:
    dist.ProcessGroupGloo(dist.HashStore(), 0, 1)
    print("CONSTRUCTED", flush=True)
except RuntimeError as e:
    print(f"REFUSED: {e}", flush=True)
