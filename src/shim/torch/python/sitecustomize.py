"""PrismLLM's start-up hook for real ranks that run Python (docs/torch-backend.md).

``prism emulate`` puts this directory first on PYTHONPATH. When
PRISM_COORDINATOR is set, an import hook waits for torch to load its
torch.distributed and torch.optim modules and then installs PrismLLM's
backend into them (prism_torch). Torch itself is never imported here: a
program that does not use it pays nothing. Then the next sitecustomize on
sys.path (Debian ships one) runs too, so the user's environment is kept.
"""

import os
import sys


class _Loader:
    """Runs the real loader, then a callback on the loaded module."""

    def __init__(self, loader, callback):
        self._loader = loader
        self._callback = callback

    def __getattr__(self, name):
        return getattr(self._loader, name)

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        # The module keeps its real loader: only this one load is watched.
        module.__loader__ = self._loader
        if getattr(module, "__spec__", None) is not None:
            module.__spec__.loader = self._loader
        self._callback(module)


class _PrismFinder:
    """A sys.meta_path finder that watches a few module names."""

    def __init__(self, callbacks):
        self._callbacks = callbacks  # module name -> function(module)

    def find_spec(self, name, path=None, target=None):
        callback = self._callbacks.get(name)
        if callback is None:
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(name, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        del self._callbacks[name]
        spec.loader = _Loader(spec.loader, callback)
        return spec


def _on_distributed(module):
    import prism_torch

    prism_torch.install_distributed(module)


def _on_optimizer(module):
    import prism_torch

    prism_torch.install_optimizer(module)


def _install_hook():
    if not os.environ.get("PRISM_COORDINATOR"):
        return
    sys.meta_path.insert(0, _PrismFinder({
        "torch.distributed.distributed_c10d": _on_distributed,
        "torch.optim.optimizer": _on_optimizer,
    }))


def _chain():
    """Runs the sitecustomize this one hides: the next on sys.path."""
    import importlib.machinery
    import importlib.util

    me = os.path.realpath(__file__)
    here = os.path.dirname(me)
    entries = [p for p in sys.path if os.path.realpath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", entries)
    if spec is None or spec.loader is None:
        return
    if os.path.realpath(spec.origin or "") == me:
        return
    try:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except Exception as e:  # as site.py treats a failing sitecustomize
        print(f"prism: error in {spec.origin}: {type(e).__name__}: {e}", file=sys.stderr)


_install_hook()
_chain()
