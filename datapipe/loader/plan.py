"""Who reads which sequences of an epoch, and how a saved loader state maps onto a new layout.

Pure bookkeeping, no I/O: ``datapipe.loader`` calls it in the main process and in every DataLoader
worker, and both must get the same answer. An epoch's stream holds sequences ``0 .. N-1``; a
consumer (``rank * num_workers + worker``) reads an ordered list of half-open intervals of them.
"""
from __future__ import annotations

Intervals = list[tuple[int, int]]

STATE_FORMAT = "datapipe.loader_state/1"
# Fields that must match between the saved state and the resuming dataset: they change the stream.
STREAM_KEYS = ("seq_len", "seed", "shuffle", "drop_last", "total_tokens", "index_fingerprint")


def count(iv: Intervals) -> int:
    return sum(hi - lo for lo, hi in iv)


def take(iv: Intervals, start: int, stop: int) -> Intervals:
    """Positions ``[start, stop)`` of the sequence list ``iv`` (as if its intervals were concatenated)."""
    out, pos = [], 0
    for lo, hi in iv:
        a, b = max(start - pos, 0), min(stop - pos, hi - lo)
        if a < b:
            out.append((lo + a, lo + b))
        pos += hi - lo
        if pos >= stop:
            break
    return out


def drop(iv: Intervals, k: int) -> Intervals:
    """``iv`` without its first ``k`` sequences."""
    return take(iv, k, count(iv))


def merge(iv: Intervals) -> Intervals:
    """Sorted, adjacent intervals joined: reading order follows the stream (fewer row-group reads)."""
    out: Intervals = []
    for lo, hi in sorted(i for i in iv if i[1] > i[0]):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def split(iv: Intervals, world_size: int, num_workers: int, batch_size: int, drop_last: bool) -> list[Intervals]:
    """Cut the sequences of ``iv`` into ``world_size * num_workers`` contiguous parts, one per consumer.

    drop_last=True: every rank gets the same number of full batches (the last
    ``< world_size * batch_size`` sequences are dropped). drop_last=False: nothing is dropped, rank
    sizes differ by at most one sequence and each rank's final batch may be short. Within a rank the
    workers get whole batches; the rank's short batch (if any) goes to its last worker.
    """
    n, out = count(iv), []
    per = n // (world_size * batch_size) * batch_size
    for r in range(world_size):
        a, b = (r * per, (r + 1) * per) if drop_last else (n * r // world_size, n * (r + 1) // world_size)
        full = (b - a) // batch_size
        for w in range(num_workers):
            lo = a + batch_size * (full * w // num_workers)
            hi = b if w == num_workers - 1 else a + batch_size * (full * (w + 1) // num_workers)
            out.append(take(iv, lo, hi))
    return out


def check_stream(state: dict, expected: dict) -> None:
    """ValueError unless ``state`` was saved over the same stream (STREAM_KEYS) as ``expected``."""
    if state.get("format") != STATE_FORMAT:
        raise ValueError(f"not a loader state of format {STATE_FORMAT} (got format={state.get('format')!r})")
    for k in STREAM_KEYS:
        if state.get(k) != expected[k]:
            raise ValueError(f"loader state has {k}={state.get(k)!r}, this dataset has {expected[k]!r}: "
                             "it would resume a different stream")


def resume_plan(states: list[dict], rank: int, world_size: int, num_workers: int, worker: int,
                batch_size: int, drop_last: bool) -> Intervals:
    """Sequences left for consumer (rank, worker) of the new layout, from saved ``states``.

    Same layout (world_size, num_workers, batch_size) as saved: each consumer continues its own
    remainder, rotated by ``next_worker`` so a DataLoader's round robin resumes on the batch an
    uninterrupted run would have delivered next. Same world_size, other workers or batch size: this
    rank's remainder is re-split among its workers (needs this rank's state). Other world_size: the
    remainder of all ranks is re-split (needs every rank's state). Raises ValueError when the states
    do not cover what the new layout needs, or disagree with each other.
    """
    first = states[0]
    old = (first["world_size"], first["num_workers"], first["batch_size"])
    covered: dict[int, Intervals] = {}
    for s in states:
        if (s["world_size"], s["num_workers"], s["batch_size"]) != old or s["epoch"] != first["epoch"]:
            raise ValueError("the loader states disagree on epoch, world_size, num_workers or batch_size: "
                             "they come from different checkpoints")
        for c, iv in s["remaining"].items():
            if int(c) in covered:
                raise ValueError(f"two loader states both hold consumer {c} (the same rank saved twice?)")
            covered[int(c)] = [(int(lo), int(hi)) for lo, hi in iv]
    ws0, w0, _ = old
    if old == (world_size, num_workers, batch_size):
        rot = int(next((s.get("next_worker") or 0) for s in states if s["rank"] == rank)) \
            if any(s["rank"] == rank for s in states) else 0
        c = rank * num_workers + (worker + rot) % num_workers
        if c not in covered:
            raise ValueError(f"the loader state does not hold rank {rank} worker {(worker + rot) % num_workers}: "
                             f"pass the state saved by rank {rank} (or the list of all ranks' states)")
        return covered[c]
    if ws0 == world_size:
        need = range(rank * w0, (rank + 1) * w0)
        if any(c not in covered for c in need):
            raise ValueError(f"resuming rank {rank} with num_workers={num_workers}, batch_size={batch_size} "
                             f"(saved: num_workers={w0}, batch_size={old[2]}) needs the whole state saved by "
                             f"rank {rank}; the given state holds only consumers {sorted(covered)}")
        rest = merge([i for c in need for i in covered[c]])
        return split(rest, 1, num_workers, batch_size, drop_last)[worker]
    have = sorted({s["rank"] for s in states})
    if any(c not in covered for c in range(ws0 * w0)):
        raise ValueError(f"resuming with world_size={world_size} from a state saved with world_size={ws0} needs "
                         f"the states of all {ws0} ranks (got ranks {have}): gather them, e.g. with "
                         "torch.distributed.all_gather_object, and pass the list to load_state_dict")
    rest = merge([i for c in range(ws0 * w0) for i in covered[c]])
    return split(rest, world_size, num_workers, batch_size, drop_last)[rank * num_workers + worker]
