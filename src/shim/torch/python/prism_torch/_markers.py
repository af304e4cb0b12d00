"""Iteration markers from optimizer steps.

The coordinator measures iterations from markers (prism_marker: 0 iteration
begin, 1 iteration end). A training step ends with an optimizer step, so when
a step returns this sends "end" for the iteration it closes, if one is open,
then "begin" for the next: N steps make N - 1 complete iterations, and the
first step, with the program's start-up in it, is not one of them.

Markers go through the rank's one connection: prism_torch's own backend, or,
with PRISM_NCCL_DROPIN=1, the NCCL drop-in's (its prismNcclMarker export,
found through ctypes in the preloaded libnccl.so.2).
"""

import ctypes
import functools
import os
import sys
import threading

_state = threading.local()
_iteration = [0]  # iterations begun; 0 while none is open


_dropin_marker = []  # [function or None], looked up once


def _marker_function():
    """How to send a marker now, or None when the rank is not connected."""
    if os.environ.get("PRISM_NCCL_DROPIN") == "1":
        if not _dropin_marker:
            fn = getattr(ctypes.CDLL(None), "prismNcclMarker", None)
            if fn is None:
                print("prism: PRISM_NCCL_DROPIN=1 but libnccl.so.2 is not PrismLLM's drop-in "
                      "(LD_PRELOAD it): no iteration markers", file=sys.stderr, flush=True)
            else:
                fn.argtypes, fn.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
            _dropin_marker.append(fn)
        fn = _dropin_marker[0]
        if fn is None:
            return None

        def send(code, value):
            if fn(code, value) != 0:
                raise RuntimeError(f"prism: prismNcclMarker({code}, {value}) failed")

        return send
    c10d = sys.modules.get("prism_torch._c10d")
    if c10d is None or not c10d.connected():
        return None  # no process group yet: nothing to mark
    return c10d.marker


def _after_step():
    marker = _marker_function()
    if marker is None:
        return
    if _iteration[0] > 0:
        marker(1, _iteration[0])
    _iteration[0] += 1
    marker(0, _iteration[0])


def _mark_steps(cls):
    """Wraps cls.step once. Only the outermost step of nested calls (a
    subclass whose step calls super().step()) counts."""
    step = cls.step
    if getattr(step, "_prism_marked", False):
        return

    @functools.wraps(step)
    def marked_step(*args, **kwargs):
        depth = getattr(_state, "depth", 0)
        _state.depth = depth + 1
        try:
            out = step(*args, **kwargs)
        finally:
            _state.depth = depth
        if depth == 0:
            _after_step()
        return out

    # functools.wraps copied step's attributes, torch's own "hooked" flag
    # among them, so torch does not wrap it again.
    marked_step._prism_marked = True
    cls.step = marked_step


def _post_hook(optimizer, args, kwargs):
    _after_step()


def install_optimizer(optimizer_module):
    """Patches torch.optim.optimizer (the module object) once."""
    Optimizer = optimizer_module.Optimizer
    if getattr(Optimizer, "_prism_markers", False):
        return
    Optimizer._prism_markers = True
    register = getattr(optimizer_module, "register_optimizer_step_post_hook", None)
    if register is not None:  # torch >= 2.0
        register(_post_hook)
        return
    # torch 1.x: the way Optimizer._hook_for_profile wraps step, per class,
    # at the first instance's construction.
    init = Optimizer.__init__

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        init(self, *args, **kwargs)
        _mark_steps(type(self))

    Optimizer.__init__ = __init__
