"""Work lists: what each CTA of a kernel reduces, built once per layout from its
:class:`~cubsparse._index.Structure` and cached there (host tables) or uploaded once per
device (device tables). This module holds the dsd's lists and what both primitives use
(:func:`device_tables`, the blocks' coordinates); the sdd's are in :mod:`.sdd_worklists`."""

from __future__ import annotations

import numpy as np


def device_tables(structure, device: int, key, build) -> tuple:
    """``build()``'s host arrays on ``device``, made once per layout and device."""
    import cupy

    def upload():
        with cupy.cuda.Device(device):
            return tuple(cupy.asarray(t) for t in build())

    return structure.cached(("cuda", device, *key), upload)


def lists(structure, trans: bool, group: int, pad: int = 1, whole: bool = False):
    """(ptr, blk, gidx) per output block (``group`` 1) or per group of output blocks;
    ``pad`` > 1 pads every group's list to a multiple of ``pad`` entries with entries that
    read X's block column -1 (out of bounds for a TMA box: zeros) and no block.

    ``whole`` (with ``pad`` > 1) lists whole slices of ``pad`` adjacent block columns of X
    instead: every block column of each slice that the group's union list touches, in
    order, with its members' blocks where the union has them and -1 elsewhere (also past
    X's last block column). Entry ``q`` of a slice then reads block column
    ``gidx[q - q % pad] + q % pad``, so a kernel copies the slice as one run of columns."""
    if group == 1:
        if pad != 1 or whole:
            raise ValueError(f"only the lists of groups are padded, got pad = {pad}, "
                             f"whole = {whole} for one output block per list")
        return structure.work_lists(trans)
    if whole:
        if pad < 2:
            raise ValueError(f"whole slices span at least two block columns, got pad = {pad}")
        return structure.cached(("grouped_whole", trans, group, pad),
                                lambda: _whole_slices(structure, trans, group, pad))
    if pad == 1:
        return structure.grouped_lists(trans, group)

    def build():
        ptr, blk, gidx = structure.grouped_lists(trans, group)
        lens = np.diff(ptr).astype(np.int64)
        padded = -(-lens // pad) * pad
        new_ptr = np.zeros_like(ptr)
        np.cumsum(padded, out=new_ptr[1:])
        # entry i of group g moves to new_ptr[g] + i
        dest = np.repeat(new_ptr[:-1] - ptr[:-1], lens) + np.arange(ptr[-1])
        new_gidx = np.full(int(new_ptr[-1]), -1, dtype=np.int32)
        new_gidx[dest] = gidx
        new_blk = np.full((int(new_ptr[-1]), group), -1, dtype=np.int32)
        new_blk[dest] = blk.reshape(-1, group)
        return new_ptr, new_blk.ravel(), new_gidx

    return structure.cached(("grouped_padded", trans, group, pad), build)


def _whole_slices(structure, trans: bool, group: int, pad: int):
    """:func:`lists` with ``whole``: the union lists widened to whole slices of ``pad``."""
    ptr, blk, gidx = structure.grouped_lists(trans, group)
    nk = structure.block_shape[1] if trans else structure.block_shape[0]
    n_groups = ptr.shape[0] - 1
    nslices = -(-nk // pad)
    owner = np.repeat(np.arange(n_groups, dtype=np.int64), np.diff(ptr))
    key = owner * nslices + gidx.astype(np.int64) // pad  # (group, slice) of each entry
    slices = np.unique(key)  # sorted: by group, then slice
    new_ptr = np.zeros(n_groups + 1, dtype=np.int32)
    np.cumsum(np.bincount(slices // nslices, minlength=n_groups) * pad, out=new_ptr[1:])
    cols = ((slices % nslices) * pad)[:, None] + np.arange(pad)
    new_gidx = np.where(cols < nk, cols, -1).astype(np.int32).ravel()
    new_blk = np.full((new_gidx.shape[0], group), -1, dtype=np.int32)
    dest = np.searchsorted(slices, key) * pad + gidx % pad
    new_blk[dest] = blk.reshape(-1, group)
    return new_ptr, new_blk.ravel(), new_gidx


def list_lengths(structure, trans: bool, group: int) -> np.ndarray:
    return structure.cached(("dsd_lens", trans, group),
                            lambda: np.diff(lists(structure, trans, group)[0]))


def _piece_slots(pieces: np.ndarray):
    """(list, index in its list, slot, segs, n_slots) of every piece of lists cut into
    ``pieces[i]`` pieces each, the pieces in list order: a cut list's pieces take
    consecutive workspace slots, an uncut list's one piece slot -1, and ``segs`` row s is
    (first slot, piece count) of slot s's list, what ``split_finish`` reads."""
    owner = np.repeat(np.arange(pieces.shape[0]), pieces)
    k = np.arange(owner.shape[0]) - np.repeat(np.cumsum(pieces) - pieces, pieces)
    cut = pieces > 1
    slot0 = np.full(pieces.shape[0], -1, dtype=np.int64)
    slot0[cut] = np.cumsum(pieces[cut]) - pieces[cut]
    slot = np.where(cut[owner], slot0[owner] + k, -1)
    n_slots = int(pieces[cut].sum())
    segs = np.stack([np.repeat(slot0[cut], pieces[cut]), np.repeat(pieces[cut], pieces[cut])],
                    axis=1).astype(np.int32).reshape(n_slots, 2)
    return owner, k, slot, segs, n_slots


def dsd_host(structure, trans: bool, split: int = 0, group: int = 1, pad: int = 1,
             whole: bool = False):
    """(work, blk, gidx, segs, n_slots) on the host, built once per layout, split, group
    and list padding (:func:`lists`, whole slices or not).

    ``work`` rows are (output tile, first list entry, list length, slot), longest first;
    an output tile is one block, or ``group`` adjacent ones. With ``split`` > 0, lists
    longer than ``split`` are cut into near-equal segments whose partial sums go to
    ``n_slots`` workspace slots, a list's segments to consecutive slots; ``segs`` row s is
    (first slot, segment count) of slot s's list, which tells the CTA that stores a list's
    last segment which partials to add up, in slot order.
    """

    def build():
        ptr, blk, gidx = lists(structure, trans, group, pad, whole)
        lens = np.diff(ptr).astype(np.int64)
        nseg = np.ones_like(lens) if split <= 0 else np.maximum(1, -(-lens // split))
        out, k, slot, segs, n_slots = _piece_slots(nseg)
        first = ptr[out] + (lens[out] * k) // nseg[out]
        length = ptr[out] + (lens[out] * (k + 1)) // nseg[out] - first
        order = np.argsort(-length, kind="stable")
        work = np.stack([out, first, length, slot], axis=1)[order].astype(np.int32)
        return work, blk, gidx, segs, n_slots

    return structure.cached(("dsd", trans, split, group, pad, whole), build)


def dsd_tables(structure, device: int, trans: bool, split: int = 0, group: int = 1,
               pad: int = 1, whole: bool = False):
    """:func:`dsd_host`'s (work, blk, gidx, segs) on ``device``."""
    return device_tables(structure, device, ("dsd", trans, split, group, pad, whole),
                         lambda: dsd_host(structure, trans, split, group, pad, whole)[:4])


def streamk_host(structure, trans: bool, ctas: int):
    """(work, blk, gidx, segs, ranges, n_slots) on the host: the lists of single output
    blocks cut into ``ctas`` runs of (near) equal entries, one run a CTA (stream-K).

    The lists, concatenated in output order, are cut at ``ctas + 1`` points; a run's
    pieces of lists are its work items, in order, as :func:`dsd_host`'s rows (output
    block, first entry, length, slot). A list wholly inside a run keeps slot -1 (the CTA
    stores its block); a list cut between runs gives each piece a slot, a list's pieces
    consecutive slots in run order, and ``segs`` row s is (first slot, piece count) of
    slot s's list, so the CTA that finishes the list's last piece to be stored (whichever
    piece it holds) adds the partials in slot order.
    An empty list is one item of length 0 (the CTA writes its zeros) in the run where its
    place in the concatenation falls. ``ranges[c] .. ranges[c + 1] - 1`` are run ``c``'s
    items; a run holds at most two cut lists, its first and its last.
    """
    if ctas < 1:
        raise ValueError(f"stream-K runs need at least one CTA, got ctas = {ctas}")

    def build():
        ptr, blk, gidx = lists(structure, trans, 1)
        ptr = ptr.astype(np.int64)
        lo, hi = ptr[:-1], ptr[1:]
        n_out = lo.shape[0]
        cuts = np.arange(ctas + 1, dtype=np.int64) * int(ptr[-1]) // ctas
        # the runs holding each list's first and last entry (an empty list: its place)
        first_run = np.minimum(np.searchsorted(cuts, lo, side="right") - 1, ctas - 1)
        last_run = np.where(hi > lo, np.minimum(
            np.searchsorted(cuts, hi - 1, side="right") - 1, ctas - 1), first_run)
        nrun = last_run - first_run + 1
        out = np.repeat(np.arange(n_out, dtype=np.int64), nrun)
        run = np.repeat(first_run, nrun) + (np.arange(int(nrun.sum()))
                                            - np.repeat(np.cumsum(nrun) - nrun, nrun))
        start = np.maximum(lo[out], cuts[run])
        end = np.minimum(hi[out], cuts[run + 1])
        keep = (end > start) | (hi[out] == lo[out])  # (empty runs give empty pieces)
        out, run, start, length = out[keep], run[keep], start[keep], (end - start)[keep]
        # (the pieces are in list order, so _piece_slots numbers them as they stand)
        _, _, slot, segs, n_slots = _piece_slots(np.bincount(out, minlength=n_out))
        work = np.stack([out, start, length, slot], axis=1).astype(np.int32)
        ranges = np.searchsorted(run, np.arange(ctas + 1)).astype(np.int32)
        return work, blk, gidx, segs, ranges, n_slots

    return structure.cached(("dsd_streamk", trans, ctas), build)


def streamk_tables(structure, device: int, trans: bool, ctas: int):
    """:func:`streamk_host`'s (work, blk, gidx, segs, ranges) on ``device``."""
    return device_tables(structure, device, ("dsd_streamk", trans, ctas),
                         lambda: streamk_host(structure, trans, ctas)[:5])


def tile_costs(lens: np.ndarray, takers: int, tile_cost: float) -> tuple[np.ndarray, float]:
    """(each tile's cost, one taker's share of a row tile) for lists of ``lens`` blocks
    over ``takers`` persistent CTAs (or clusters): a tile costs its list's blocks plus
    ``tile_cost`` for its epilogue, and a row tile's cost is shared among the takers."""
    cost = np.asarray(lens, dtype=np.float64) + tile_cost
    return cost, float(cost.sum()) / takers


def tile_order(structure, trans: bool, split: int, group: int, row_tiles: int, takers: int,
               slack: float, tile_cost: float) -> np.ndarray:
    """The persistent TMA dsd's tiles in the order its CTAs take them, by deadline: entry t
    is the t-th tile taken, as ``row tile x work items + work item`` (:func:`dsd_host`'s
    items, longest first). A tile's cost is its list's length plus ``tile_cost``; row tile
    r ends (r + 1) x one of ``takers``' share of a row tile into the launch, and its tiles
    are due ``slack`` x their cost before that. Sorting by due time keeps the tiles row
    tile by row tile, longest first, except that a list much longer than a taker's share
    of a row tile is taken that many row tiles early, rather than started last."""

    def build():
        cost, share = tile_costs(dsd_host(structure, trans, split, group)[0][:, 2], takers,
                                 tile_cost)
        due = np.arange(1, row_tiles + 1)[:, None] * share - slack * cost[None, :]
        return np.argsort(due.ravel(), kind="stable").astype(np.int32)

    return structure.cached(("tile_order", trans, split, group, row_tiles, takers, slack,
                             tile_cost), build)


def tile_order_table(structure, device: int, *key):
    """:func:`tile_order` (``key``: its arguments after the structure) on ``device``."""
    return device_tables(structure, device, ("tile_order", *key),
                         lambda: (tile_order(structure, *key),))[0]


def block_coordinates(structure, device: int):
    """(rows, cols) of every block on the device, for the dense path's scatter and
    gather."""
    return device_tables(structure, device, ("coords",),
                         lambda: (structure.rows, structure.host_indices))


def stream_chunks(structure, trans: bool, chunk: int) -> int:
    """Chunks of ``chunk`` block columns the small-N dsd cuts X's block columns into (at
    least one)."""
    nk = structure.block_shape[1] if trans else structure.block_shape[0]
    return max(1, -(-nk // chunk))


def stream_tables(structure, device: int, trans: bool, chunk: int, group: int):
    """(blk, kcol, starts) of the small-N dsd with X in shared memory, on the device.

    The output blocks' entries sorted by group of ``group`` output blocks, then chunk of
    ``chunk`` of X's block columns, then member, then X's block column: ``blk`` the block
    of W, ``kcol`` the block column of X within its chunk; ``starts`` the first entry of
    each (group, chunk, member), then the total (int32, groups x chunks x ``group`` + 1).
    A CTA's groups and chunks are then one contiguous range of entries.
    """
    def build():
        ptr, blk, gidx = structure.work_lists(trans)
        nout = ptr.shape[0] - 1
        nchunks = stream_chunks(structure, trans, chunk)
        ngroups = max(1, -(-nout // group))
        owner = np.repeat(np.arange(nout, dtype=np.int64), np.diff(ptr))
        col = gidx.astype(np.int64)
        key = ((owner // group) * nchunks + col // chunk) * group + owner % group
        order = np.lexsort((col, key))  # stable: X's block column ascending within a key
        counts = np.bincount(key, minlength=ngroups * nchunks * group)
        starts = np.zeros(counts.size + 1, np.int32)
        np.cumsum(counts, out=starts[1:])
        return (blk[order].astype(np.int32), (col[order] % chunk).astype(np.int32), starts)

    return device_tables(structure, device, ("stream", trans, chunk, group), build)


def block_map(structure, device: int):
    """Each block position's index into W's blocks, -1 where W has none (the layout's
    block rows x block columns, int32, on the device), for the dense path's fill."""
    def build():
        rows, cols = structure.block_shape
        m = np.full(rows * cols, -1, np.int32)
        m[structure.rows.astype(np.int64) * cols + structure.host_indices] = np.arange(
            structure.nnzb, dtype=np.int32)
        return (m,)

    return device_tables(structure, device, ("block_map",), build)[0]


def union_entries(structure, trans: bool, group: int, pad: int = 1,
                  whole: bool = False) -> int:
    """Entries of the union lists of ``group`` adjacent output blocks, all groups (each
    padded to a multiple of ``pad``, or widened to whole slices of it)."""
    return structure.cached(("union_entries", trans, group, pad, whole),
                            lambda: int(lists(structure, trans, group, pad, whole)[0][-1]))


def sharing(structure, trans: bool, group: int) -> float:
    """Stored blocks per entry of the union lists of ``group`` adjacent output blocks: how
    many members an X slice of a grouped kernel feeds on average (inf for an empty layout,
    where any kernel will do)."""
    entries = union_entries(structure, trans, group)
    return structure.nnzb / entries if entries else float("inf")


def panel_cover(structure, trans: bool, group: int, pad: int = 1, whole: bool = False) -> float:
    """Fraction of W's block grid covered by the panels of the union lists of ``group``
    adjacent output blocks (each union entry a panel row of ``group`` blocks, present or
    not; the lists padded to a multiple of ``pad``, or widened to whole slices of it): the
    panel kernel's MMAs against a dense product's."""
    rows, cols = structure.block_shape
    entries = union_entries(structure, trans, group, pad, whole)
    return min(1.0, entries * group / (rows * cols)) if rows * cols else 0.0
