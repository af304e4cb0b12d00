"""Objects between ranks: send_object_list, recv_object_list,
broadcast_object_list, all_gather_object and gather_object on PrismLLM's
emulated backend (docs/torch-backend.md, "Objects").

The backend carries no data, so the objects travel through the rendezvous
store instead, beside the ops, which run as torch issues them (sizes, then
bytes) and complete in emulated time:

- the sender (send_object_list; broadcast_object_list at its source) pickles
  the objects as torch does and SETs them at
  prism/object/<src>/to/<dst>/<n> or prism/object/<src>/group/<ranks>/<n>
  (slicing/object_keys.h: <n> counts the sender's objects to that receiver
  or group), then runs torch's own call;
- the receiver GETs that key before it enters its ops: from a real sender
  the store has it (or waits for it); for a virtual sender PrismLLM's store
  answers with what the capture recorded for the sender's role, or with an
  error that this raises as a RuntimeError naming the call and the ranks.
  It then enters the same ops as torch, with the sizes the objects have,
  fills the received tensors when they complete and unpickles them into
  the object list in place;
- all_gather_object and gather_object: every rank of the group SETs its
  object at prism/object/<rank>/all_gather/<ranks>/<n> (or gather), and the
  gatherer GETs every other rank's. An object the store cannot know yet
  (its rank's role is captured later, or the graph holds no objects) comes
  back marked so, and that slot holds this rank's own object, with one
  warning on stderr per call and group.
"""

import collections
import functools
import inspect
import io
import struct

_MAGIC = b"PRISMOBJ"
_ERROR = b"PRISMERR"
_UNKNOWN = b"PRISMUNK"
_sent = collections.Counter()
_received = collections.Counter()
_warned = set()


def _ranks_text(ranks):
    """A group's global ranks as slicing/object_keys.h writes them."""
    ranks = list(ranks)
    if len(ranks) == 1:
        return f"{ranks[0]}:1:1"
    step = ranks[1] - ranks[0]
    if step > 0 and all(b - a == step for a, b in zip(ranks, ranks[1:])):
        return f"{ranks[0]}:{step}:{len(ranks)}"
    return ",".join(map(str, ranks))


def _key(counter, channel):
    n = counter[channel]
    counter[channel] += 1
    return f"prism/object/{channel}/{n}"


def _pickled(c10d, obj):
    f = io.BytesIO()
    c10d._pickler(f).dump(obj)
    return f.getvalue()


def _encode(c10d, object_list, chunks=None):
    """The store's value for `object_list`, or for the pickles `chunks`."""
    if chunks is None:
        chunks = [_pickled(c10d, obj) for obj in object_list]
    sizes = [len(c) for c in chunks]
    return _MAGIC + struct.pack(f"<I{len(sizes)}q", len(sizes), *sizes) + b"".join(chunks)


def _decode(value, where):
    value = bytes(value)
    if value.startswith(_ERROR):
        raise RuntimeError(f"prism: {where}: {value[len(_ERROR):].decode(errors='replace')}")
    at = len(_MAGIC) + 4
    count = struct.unpack_from("<I", value, len(_MAGIC))[0] if len(value) >= at else -1
    if not value.startswith(_MAGIC) or count < 0 or len(value) < at + 8 * count:
        raise RuntimeError(f"prism: {where}: the store holds no objects PrismLLM wrote")
    sizes = list(struct.unpack_from(f"<{count}q", value, at))
    data = value[at + 8 * count:]
    if any(size < 0 for size in sizes) or sum(sizes) != len(data):
        raise RuntimeError(f"prism: {where}: the store holds no objects PrismLLM wrote")
    return sizes, data


def _store(c10d):
    return c10d._get_default_store()


def _fetch(c10d, channel, where, count):
    sizes, data = _decode(_store(c10d).get(_key(_received, channel)), where)
    if len(sizes) != count:
        raise RuntimeError(
            f"prism: {where}: the sender sent {len(sizes)} objects, the receiver's list holds "
            f"{count}: give the receiver a list of the sender's length")
    return sizes, data


def _fill(c10d, object_list, sizes_tensor, object_tensor, sizes, data, group):
    """The received tensors as a backend that carries data leaves them, and
    the objects unpickled from them into the list, as torch does."""
    import torch

    sizes_tensor.copy_(torch.tensor(sizes, dtype=torch.long))
    if data:
        object_tensor.copy_(torch.frombuffer(bytearray(data), dtype=torch.uint8))
    offset = 0
    for i, size in enumerate(sizes):
        view = object_tensor[offset:offset + size]
        offset += size
        object_list[i] = c10d._tensor_to_object(view, size, group)


def _global_peer(c10d, group, peer, group_peer):
    if peer is not None:
        return peer
    return c10d.get_global_rank(group, group_peer)


def _group_and_source(c10d, a):
    """A rooted object call's group and its source's global rank (src, or
    group_src, or the group's first rank, as torch defaults it), from its
    bound arguments `a`; (None, None) when this rank is not in the group."""
    group = a.get("group") or c10d._get_default_group()
    if c10d._rank_not_in_group(group):
        return None, None
    src, group_src = a.get("src"), a.get("group_src")
    if src is None and group_src is None:
        src = 0
    return group, _global_peer(c10d, group, src, group_src)


def sending(c10d, send_object_list):
    """send_object_list that publishes the objects, then sends as torch does."""
    signature = inspect.signature(send_object_list)

    @functools.wraps(send_object_list)
    def wrapper(*args, **kwargs):
        a = signature.bind(*args, **kwargs).arguments
        group = a.get("group") or c10d._get_default_group()
        if not c10d._rank_not_in_group(group) and (
                a.get("dst") is not None or a.get("group_dst") is not None):
            dst = _global_peer(c10d, group, a.get("dst"), a.get("group_dst"))
            if dst != c10d.get_rank():
                channel = f"{c10d.get_rank()}/to/{dst}"
                _store(c10d).set(_key(_sent, channel), _encode(c10d, a["object_list"]))
        return send_object_list(*args, **kwargs)

    return wrapper


def receiving(c10d, recv_object_list):
    """recv_object_list that gets the objects from the store and enters the
    ops torch would."""
    signature = inspect.signature(recv_object_list)

    @functools.wraps(recv_object_list)
    def wrapper(*args, **kwargs):
        a = signature.bind(*args, **kwargs).arguments
        group = a.get("group") or c10d._get_default_group()
        src, group_src = a.get("src"), a.get("group_src")
        me = c10d.get_rank()
        if c10d._rank_not_in_group(group) or (src is None and group_src is None):
            return recv_object_list(*args, **kwargs)  # torch's own answer or refusal
        src = _global_peer(c10d, group, src, group_src)
        if src == me:
            return recv_object_list(*args, **kwargs)  # torch's own refusal
        import torch

        where = f"torch.distributed.recv_object_list on rank {me} from rank {src}"
        object_list = a["object_list"]
        sizes, data = _fetch(c10d, f"{src}/to/{me}", where, len(object_list))
        device = a.get("device") or c10d._get_object_coll_device(group)

        def receive(tensor):
            if a.get("use_batch", False):
                op = c10d.P2POp(c10d.irecv, tensor, src, group)
                c10d.batch_isend_irecv([op]).pop().wait()
            else:
                c10d.recv(tensor, src=src, group=group)

        sizes_tensor = torch.empty(len(object_list), dtype=torch.long, device=device)
        receive(sizes_tensor)
        object_tensor = torch.empty(sum(sizes), dtype=torch.uint8, device=device)
        receive(object_tensor)
        _fill(c10d, object_list, sizes_tensor, object_tensor, sizes, data, group)
        return src

    return wrapper


def broadcasting(c10d, broadcast_object_list):
    """broadcast_object_list: at the source, publishes the objects and runs
    torch's call; elsewhere, gets them from the store and enters the
    broadcasts torch would."""
    signature = inspect.signature(broadcast_object_list)

    @functools.wraps(broadcast_object_list)
    def wrapper(*args, **kwargs):
        a = signature.bind(*args, **kwargs).arguments
        group, src = _group_and_source(c10d, a)
        if group is None:
            return broadcast_object_list(*args, **kwargs)
        me = c10d.get_rank()
        object_list = a["object_list"]
        channel = f"{src}/group/{_ranks_text(c10d.get_process_group_ranks(group))}"
        if src == me:
            _store(c10d).set(_key(_sent, channel), _encode(c10d, object_list))
            return broadcast_object_list(*args, **kwargs)
        import torch

        where = f"torch.distributed.broadcast_object_list on rank {me} from rank {src}"
        sizes, data = _fetch(c10d, channel, where, len(object_list))
        device = a.get("device") or c10d._get_object_coll_device(group)
        sizes_tensor = torch.empty(len(object_list), dtype=torch.long, device=device)
        c10d.broadcast(sizes_tensor, src=src, group=group)
        object_tensor = torch.empty(sum(sizes), dtype=torch.uint8, device=device)
        c10d.broadcast(object_tensor, src=src, group=group)
        _fill(c10d, object_list, sizes_tensor, object_tensor, sizes, data, group)

    return wrapper


def _gathered(c10d, call, ranks, obj, where, fetch):
    """Publishes this rank's object for the n-th `call` over `ranks` and,
    when `fetch`, gets every other rank's: the pickles in group order (this
    rank's own where another's is not known yet)."""
    me = c10d.get_rank()
    text = _ranks_text(ranks)
    mine = _pickled(c10d, obj)
    _store(c10d).set(_key(_sent, f"{me}/{call}/{text}"), _encode(c10d, None, [mine]))
    pickles, unknown = [], []
    for rank in ranks:
        key = _key(_received, f"{rank}/{call}/{text}") if rank != me else None
        if rank == me or not fetch:
            pickles.append(mine)
            continue
        value = bytes(_store(c10d).get(key))
        if value.startswith(_UNKNOWN):
            unknown.append((rank, value[len(_UNKNOWN):].decode(errors="replace")))
            pickles.append(mine)
            continue
        sizes, data = _decode(value, where)
        if len(sizes) != 1:
            raise RuntimeError(f"prism: {where}: rank {rank} sent {len(sizes)} objects, not one")
        pickles.append(data)
    if unknown and (call, text) not in _warned:
        _warned.add((call, text))
        import sys

        print(f"prism: warning: {where} over ranks {text}: the objects of {len(unknown)} "
              f"rank(s) are not known, and their slots hold this rank's own (said once per call "
              f"and group): {unknown[0][1]}", file=sys.stderr, flush=True)
    return pickles


def _gather_ops(c10d, group, pickles, own, gather, object_list):
    """Enters the ops torch's object gathers enter (an all-gather of the
    sizes, then `gather(slots, padded)` of the pickles padded to the
    largest), writes the gathered pickles into the tensors as a backend that
    carries data would, and unpickles them into the list, as torch does."""
    import torch

    device = c10d._get_object_coll_device(group)
    n = len(pickles)
    most = max(len(p) for p in pickles)
    sizes = torch.zeros(n, dtype=torch.long, device=device)
    c10d.all_gather([sizes[i].unsqueeze(dim=0) for i in range(n)],
                    torch.tensor([len(own)], dtype=torch.long, device=device), group=group)
    slots = torch.empty(most * n, dtype=torch.uint8, device=device)
    slots = [slots[most * i:most * (i + 1)] for i in range(n)]
    padded = torch.zeros(most, dtype=torch.uint8, device=device)
    if own:
        padded[:len(own)].copy_(torch.frombuffer(bytearray(own), dtype=torch.uint8))
    gather(slots, padded)
    sizes.copy_(torch.tensor([len(p) for p in pickles], dtype=torch.long))
    for i, p in enumerate(pickles):
        if p:
            slots[i][:len(p)].copy_(torch.frombuffer(bytearray(p), dtype=torch.uint8))
        object_list[i] = c10d._tensor_to_object(slots[i], len(p), group)


def all_gathering(c10d, all_gather_object):
    """all_gather_object that publishes this rank's object, gets the others'
    from the store, and enters the all-gathers torch would."""
    signature = inspect.signature(all_gather_object)

    @functools.wraps(all_gather_object)
    def wrapper(*args, **kwargs):
        a = signature.bind(*args, **kwargs).arguments
        group = a.get("group") or c10d._get_default_group()
        if c10d._rank_not_in_group(group):
            return all_gather_object(*args, **kwargs)
        me = c10d.get_rank()
        ranks = c10d.get_process_group_ranks(group)
        where = f"torch.distributed.all_gather_object on rank {me}"
        pickles = _gathered(c10d, "all_gather", ranks, a["obj"], where, fetch=True)
        _gather_ops(c10d, group, pickles, pickles[ranks.index(me)],
                    lambda slots, padded: c10d.all_gather(slots, padded, group=group),
                    a["object_list"])

    return wrapper


def gathering(c10d, gather_object):
    """gather_object: every rank publishes its object and runs torch's call,
    except the destination, which gets the others' from the store and enters
    the ops torch would."""
    signature = inspect.signature(gather_object)

    @functools.wraps(gather_object)
    def wrapper(*args, **kwargs):
        a = signature.bind(*args, **kwargs).arguments
        group = a.get("group") or c10d._get_default_group()
        if c10d._rank_not_in_group(group):
            return gather_object(*args, **kwargs)
        dst, group_dst = a.get("dst"), a.get("group_dst")
        if dst is None and group_dst is None:
            dst = 0
        dst = _global_peer(c10d, group, dst, group_dst)
        me = c10d.get_rank()
        object_list = a.get("object_gather_list")
        if me == dst and object_list is None:
            return gather_object(*args, **kwargs)  # torch's own refusal
        ranks = c10d.get_process_group_ranks(group)
        where = f"torch.distributed.gather_object on rank {me} to rank {dst}"
        pickles = _gathered(c10d, "gather", ranks, a["obj"], where, fetch=me == dst)
        if me != dst:
            return gather_object(*args, **kwargs)
        _gather_ops(c10d, group, pickles, pickles[ranks.index(me)],
                    lambda slots, padded: c10d.gather(padded, gather_list=slots, dst=dst,
                                                      group=group),
                    object_list)

    return wrapper


def scattering(c10d, scatter_object_list):
    """scatter_object_list away from its source: the backend's scatter leaves
    a non-root's output as it was (docs/torch-backend.md), so torch would
    unpickle an uninitialised buffer; one RuntimeError naming the call and
    the ranks instead, before any op is entered. At the source, torch's call.
    (all_gather_object and gather_object need no such guard: the backend's
    all-gather and gather fill every slot with this rank's own object.)"""
    signature = inspect.signature(scatter_object_list)

    @functools.wraps(scatter_object_list)
    def wrapper(*args, **kwargs):
        a = signature.bind(*args, **kwargs).arguments
        group, src = _group_and_source(c10d, a)
        if group is None:
            return scatter_object_list(*args, **kwargs)
        me = c10d.get_rank()
        if src == me:
            return scatter_object_list(*args, **kwargs)
        raise RuntimeError(
            f"prism: torch.distributed.scatter_object_list on rank {me} from rank {src} is not "
            "supported: on PrismLLM's emulated backend objects from other ranks travel only by "
            "send_object_list / recv_object_list and broadcast_object_list (answered for virtual "
            "ranks from the capture); broadcast the list instead and take this rank's item")

    return wrapper
