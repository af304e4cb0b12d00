"""torch.distributed on PrismLLM's backend.

install_distributed(c10d) works on the module torch.distributed.distributed_c10d
as soon as it has loaded (torch.distributed re-exports its names afterwards),
or later on an imported torch:

- registers the backend "prism" (extended API: the creator gets the group's
  global ranks);
- makes init_process_group and new_group map the backends a program asks
  for ("gloo", "nccl", "mpi", "ucc", "cpu:gloo,cuda:nccl", None) to "prism";
- carries the objects of send_object_list, recv_object_list and
  broadcast_object_list through the rendezvous store (_objects.py: the
  backend carries no data), and refuses split_group, naming the rank;
- replaces ProcessGroupGloo, ProcessGroupNCCL, ... with stand-ins that refuse
  to be constructed: a group built directly cannot be interposed;
- says goodbye to the coordinator at exit.

With PRISM_NCCL_DROPIN=1 the program's own backends stay: PrismLLM's NCCL
drop-in (libnccl.so.2, loaded with LD_PRELOAD) carries the communication of
ProcessGroupNCCL. Then only new_group is wrapped, to declare each group's
ranks to the emulated rendezvous store (`prism/group/<name>`), so that the
store can answer for the NCCL ids of groups whose root is virtual
(docs/rendezvous.md).
"""

import atexit
import functools
import inspect
import os
import sys

from . import _objects

BACKEND = "prism"
# The backends a program may ask for, all of which run on "prism".
_MAPPED = {"gloo", "nccl", "mpi", "ucc", "undefined"}
_told = set()
_failed = [False]


def _to_prism(backend):
    if backend is None:
        return BACKEND
    name = str(backend)
    lower = name.lower()
    if lower == BACKEND:
        return BACKEND
    if lower in _MAPPED or ":" in lower:
        if name not in _told:
            _told.add(name)
            print(f"prism: torch.distributed backend '{name}' runs on PrismLLM's emulated "
                  "backend", file=sys.stderr, flush=True)
        return BACKEND
    return backend  # a third-party backend the program registered itself


def _with_prism_backend(fn, position):
    """fn with its `backend` argument (keyword, or positional at `position`)
    mapped by _to_prism."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if "backend" in kwargs:
            kwargs["backend"] = _to_prism(kwargs["backend"])
        elif len(args) > position:
            args = list(args)
            args[position] = _to_prism(args[position])
        else:
            kwargs["backend"] = BACKEND
        return fn(*args, **kwargs)

    wrapper._prism_wrapped = True
    return wrapper


def _create(options, pg_options=None):
    """The backend's creator (Backend.register_backend, extended_api=True)."""
    from . import _c10d

    return _c10d.create_group(options.group_rank, options.group_size,
                              list(options.global_ranks_in_group))


class _RefusedMeta(type):
    """Class attributes (ProcessGroupNCCL.Options) and isinstance checks
    still go to the real class."""

    def __getattr__(cls, name):
        return getattr(cls._prism_real, name)

    def __instancecheck__(cls, obj):
        return isinstance(obj, cls._prism_real)


def _refused(real):
    name = real.__name__

    def __init__(self, *args, **kwargs):
        raise RuntimeError(
            f"prism: torch.distributed.{name} was constructed directly, so PrismLLM cannot "
            "run it on its emulated backend: create the group with "
            "dist.new_group(backend=...) instead (or init_process_group for the default group)")

    return _RefusedMeta(name, (), {"__init__": __init__, "_prism_real": real,
                                   "__module__": real.__module__, "__doc__": real.__doc__})


def _register(c10d):
    Backend = c10d.Backend
    if BACKEND.upper() in getattr(Backend, "_plugins", {}):
        return
    kwargs = {"extended_api": True}
    if "devices" in inspect.signature(Backend.register_backend).parameters:
        kwargs["devices"] = ["cpu", "cuda"]  # torch >= 2.1: one backend for both
    Backend.register_backend(BACKEND, _create, **kwargs)


def _goodbye():
    c10d = sys.modules.get("prism_torch._c10d")
    if c10d is not None:
        c10d.shutdown(1 if _failed[0] else 0)


def _note_failure(hook):
    @functools.wraps(hook)
    def excepthook(*args):
        _failed[0] = True
        return hook(*args)

    return excepthook


def dropin():
    """Whether the NCCL drop-in carries the program's communication."""
    return os.environ.get("PRISM_NCCL_DROPIN") == "1"


def _group_name(c10d, pg):
    """The name torch gave group `pg` (the prefix of its store keys), or None
    on a rank that is not a member."""
    if pg is None or pg is getattr(c10d.GroupMember, "NON_GROUP_MEMBER", object()):
        return None
    name = getattr(pg, "group_name", None)  # torch >= 2.2
    if name:
        return str(name)
    names = getattr(getattr(c10d, "_world", None), "pg_names", None)  # torch 2.0, 2.1
    if names is None:
        names = getattr(c10d, "_pg_names", {})  # torch 1.13
    return names.get(pg)


def _declaring(c10d, new_group):
    """new_group that declares the group's ranks to the store once made."""

    @functools.wraps(new_group)
    def wrapper(ranks=None, *args, **kwargs):
        pg = new_group(ranks, *args, **kwargs)
        name = _group_name(c10d, pg)
        if name is not None:
            members = sorted(ranks) if ranks else range(c10d.get_world_size())
            c10d._get_default_store().set(f"prism/group/{name}", ",".join(map(str, members)))
        return pg

    wrapper._prism_wrapped = True
    return wrapper


def _no_split(c10d, fn):
    """split_group, refused with one RuntimeError naming the call and the
    rank: the backend does not split communicators (torch would say only
    "its backend does not support splitting")."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        raise RuntimeError(
            f"prism: torch.distributed.split_group on rank {c10d.get_rank()} is not supported: "
            "PrismLLM's emulated backend does not split communicators; create the groups with "
            "dist.new_group (init_device_mesh does when the default group is not bound to a "
            "device: no device_id in init_process_group)")

    return wrapper


def _set(c10d, patched):
    """Replaces names in c10d. torch.distributed copies them from c10d once
    it has loaded; when it already has, its copies are replaced as well."""
    dist = sys.modules.get("torch.distributed")
    for name, value in patched.items():
        original = getattr(c10d, name)
        setattr(c10d, name, value)
        if dist is not None and getattr(dist, name, None) is original:
            setattr(dist, name, value)


def install_distributed(c10d):
    """Installs the backend into torch.distributed.distributed_c10d, once."""
    if getattr(c10d, "_prism_installed", False):
        return
    c10d._prism_installed = True
    if dropin():
        _set(c10d, {"new_group": _declaring(c10d, c10d.new_group)})
        return
    # torch 1.13's env:// rendezvous with TORCHELASTIC_USE_AGENT_STORE reads
    # TORCHELASTIC_RESTART_COUNT, which torchrun sets and prism emulate need not.
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True":
        os.environ.setdefault("TORCHELASTIC_RESTART_COUNT", "0")
    _register(c10d)
    patched = {
        "init_process_group": _with_prism_backend(c10d.init_process_group, 0),
        "new_group": _with_prism_backend(c10d.new_group, 2),
    }
    if hasattr(c10d, "split_group"):
        patched["split_group"] = _no_split(c10d, c10d.split_group)
    for name, wrap in (("send_object_list", _objects.sending),
                       ("recv_object_list", _objects.receiving),
                       ("broadcast_object_list", _objects.broadcasting),
                       ("all_gather_object", _objects.all_gathering),
                       ("gather_object", _objects.gathering)):
        if hasattr(c10d, name):
            patched[name] = wrap(c10d, getattr(c10d, name))
    if hasattr(c10d, "scatter_object_list"):
        patched["scatter_object_list"] = _objects.scattering(c10d, c10d.scatter_object_list)
    for name in ("ProcessGroupGloo", "ProcessGroupNCCL", "ProcessGroupMPI", "ProcessGroupUCC"):
        real = getattr(c10d, name, None)
        if isinstance(real, type):
            patched[name] = _refused(real)
    _set(c10d, patched)
    atexit.register(_goodbye)
    sys.excepthook = _note_failure(sys.excepthook)
