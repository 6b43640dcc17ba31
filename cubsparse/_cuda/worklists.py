"""Work lists: what each CTA of a kernel reduces, built once per layout from its
:class:`~cubsparse._index.Structure` and cached there (host tables) or uploaded once per
device (device tables)."""

from __future__ import annotations

import numpy as np


def device_tables(structure, device: int, key, build) -> tuple:
    """``build()``'s host arrays on ``device``, made once per layout and device."""
    import cupy

    def upload():
        with cupy.cuda.Device(device):
            return tuple(cupy.asarray(t) for t in build())

    return structure.cached(("cuda", device, *key), upload)


def lists(structure, trans: bool, group: int, pad: int = 1):
    """(ptr, blk, gidx) per output block (``group`` 1) or per group of output blocks;
    ``pad`` > 1 pads every group's list to a multiple of ``pad`` entries with entries that
    read X's block column -1 (out of bounds for a TMA box: zeros) and no block."""
    if group == 1:
        if pad != 1:
            raise ValueError(f"only the lists of groups are padded, got pad = {pad} for one "
                             "output block per list")
        return structure.work_lists(trans)
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


def list_lengths(structure, trans: bool, group: int) -> np.ndarray:
    return structure.cached(("dsd_lens", trans, group),
                            lambda: np.diff(lists(structure, trans, group)[0]))


def dsd_host(structure, trans: bool, split: int = 0, group: int = 1, pad: int = 1):
    """(work, blk, gidx, segs, n_slots) on the host, built once per layout, split, group
    and list padding (:func:`lists`).

    ``work`` rows are (output tile, first list entry, list length, slot), longest first;
    an output tile is one block, or ``group`` adjacent ones. With ``split`` > 0, lists
    longer than ``split`` are cut into near-equal segments whose partial sums go to
    ``n_slots`` workspace slots, a list's segments to consecutive slots; ``segs`` row s is
    (first slot, segment count) of slot s's list, which tells the CTA that stores a list's
    last segment which partials to add up, in slot order.
    """

    def build():
        ptr, blk, gidx = lists(structure, trans, group, pad)
        lens = np.diff(ptr).astype(np.int64)
        nseg = np.ones_like(lens) if split <= 0 else np.maximum(1, -(-lens // split))
        out = np.repeat(np.arange(lens.shape[0]), nseg)
        k = np.arange(out.shape[0]) - np.repeat(np.cumsum(nseg) - nseg, nseg)  # segment no.
        first = ptr[out] + (lens[out] * k) // nseg[out]
        length = ptr[out] + (lens[out] * (k + 1)) // nseg[out] - first
        split_blocks = np.flatnonzero(nseg > 1)
        slot0 = np.full(lens.shape[0], -1, dtype=np.int64)
        slot0[split_blocks] = np.cumsum(nseg[split_blocks]) - nseg[split_blocks]
        slot = np.where(nseg[out] > 1, slot0[out] + k, -1)
        order = np.argsort(-length, kind="stable")
        work = np.stack([out, first, length, slot], axis=1)[order].astype(np.int32)
        n_slots = int(nseg[split_blocks].sum())
        segs = np.stack([np.repeat(slot0[split_blocks], nseg[split_blocks]),
                         np.repeat(nseg[split_blocks], nseg[split_blocks])], axis=1)
        return work, blk, gidx, segs.astype(np.int32).reshape(n_slots, 2), n_slots

    return structure.cached(("dsd", trans, split, group, pad), build)


def dsd_tables(structure, device: int, trans: bool, split: int = 0, group: int = 1,
               pad: int = 1):
    """:func:`dsd_host`'s (work, blk, gidx, segs) on ``device``."""
    return device_tables(structure, device, ("dsd", trans, split, group, pad),
                         lambda: dsd_host(structure, trans, split, group, pad)[:4])


def sdd_groups_host(structure, group: int) -> np.ndarray:
    """(ngroups, 3) int32 rows (block row, first block, count): runs of <= group blocks of
    one block row, on the host."""

    def build():
        indptr = structure.host_indptr.astype(np.int64)
        counts = np.diff(indptr)
        per_row = (counts + group - 1) // group
        row = np.repeat(np.arange(counts.shape[0]), per_row)
        first_group = np.repeat(np.cumsum(per_row) - per_row, per_row)
        k = np.arange(row.shape[0]) - first_group  # group number within its row
        start = indptr[row] + k * group
        cnt = np.minimum(group, indptr[row + 1] - start)
        return np.stack([row, start, cnt], axis=1).astype(np.int32)

    return structure.cached(("sdd_groups", group), build)


#: Most block rows whose pairs are matched by shared columns (an overlap matrix of the
#: rows is built, 16 MiB at this size); past it, block rows 2i and 2i + 1 are paired.
PAIR_MATCH_MAX_ROWS = 2048


def sdd_row_pairs(structure) -> np.ndarray:
    """(npairs, 2) block rows paired for the paired weight gradient, the second -1 where a
    row is left alone; every block row holding a block in exactly one pair (an empty row
    has nothing to compute). Greedy: the two rows sharing the most block columns first
    (ties to the lower rows), then the next among the rows left; rows that share nothing
    with any row left pair in row order. A banded layout pairs neighbours and a random one
    finds the rows that happen to overlap most."""

    def build():
        indptr = structure.host_indptr.astype(np.int64)
        nbr = indptr.shape[0] - 1
        rows = np.flatnonzero(np.diff(indptr) > 0)
        if nbr > PAIR_MATCH_MAX_ROWS:
            first = rows[0::2]
            second = np.full(first.shape[0], -1, np.int64)
            second[:rows[1::2].shape[0]] = rows[1::2]
            return np.stack([first, second], axis=1).astype(np.int32).reshape(-1, 2)
        lay = np.zeros((nbr, structure.block_shape[1]), np.float32)
        lay[np.repeat(np.arange(nbr), np.diff(indptr)), structure.host_indices] = 1.0
        overlap = np.triu(lay @ lay.T, 1)
        iu, ju = np.nonzero(overlap)  # the pairs sharing a column
        order = np.lexsort((ju, iu, -overlap[iu, ju]))  # most shared first, then by rows
        free = np.zeros(nbr, bool)
        free[rows] = True
        left = rows.shape[0]
        pairs = []
        for i, j in zip(iu[order].tolist(), ju[order].tolist(), strict=True):
            if left < 2:
                break
            if free[i] and free[j]:
                free[i] = free[j] = False
                left -= 2
                pairs.append((i, j))
        rest = np.flatnonzero(free).tolist()  # in row order, as zero overlaps rank
        pairs += list(zip(rest[0::2], rest[1::2], strict=False))
        if len(rest) % 2:
            pairs.append((rest[-1], -1))
        return np.asarray(sorted(pairs), np.int32).reshape(len(pairs), 2)

    return structure.cached(("sdd_row_pairs",), build)


def sdd_pair_groups_host(structure, group: int) -> np.ndarray:
    """(ngroups, 3 + 3 * group) int32 rows for the paired weight gradient, on the host: the
    block rows of each pair of :func:`sdd_row_pairs` taken together, the union of their
    block columns in runs of <= ``group``. A row is (first block row, second block row or
    -1, count, the count's block columns, each column's block in the first row, in the
    second row); -1 marks an absent block, and every slot past the count."""

    def build():
        indptr = structure.host_indptr.astype(np.int64)
        indices = structure.host_indices.astype(np.int64)

        def blocks(r):  # (columns, blocks) of block row r; none for r = -1
            if r < 0:
                return np.zeros(0, np.int64), np.zeros(0, np.int64)
            return indices[indptr[r]:indptr[r + 1]], np.arange(indptr[r], indptr[r + 1])

        rows = []
        for r0, r1 in sdd_row_pairs(structure).tolist():
            (c0, p0), (c1, p1) = blocks(r0), blocks(r1)
            cols = np.union1d(c0, c1)
            ids = np.full((2, cols.shape[0]), -1, np.int64)
            ids[0, np.searchsorted(cols, c0)] = p0
            ids[1, np.searchsorted(cols, c1)] = p1
            for g0 in range(0, cols.shape[0], group):
                cnt = min(group, cols.shape[0] - g0)
                row = np.full(3 + 3 * group, -1, np.int64)
                row[0], row[1], row[2] = r0, r1, cnt
                row[3:3 + cnt] = cols[g0:g0 + cnt]
                row[3 + group:3 + group + cnt] = ids[0, g0:g0 + cnt]
                row[3 + 2 * group:3 + 2 * group + cnt] = ids[1, g0:g0 + cnt]
                rows.append(row)
        return np.asarray(rows, np.int32).reshape(len(rows), 3 + 3 * group)

    return structure.cached(("sdd_pairs", group), build)


def pair_group_count(structure, group: int) -> int:
    """Rows of :func:`sdd_pair_groups_host`'s table."""
    return sdd_pair_groups_host(structure, group).shape[0]


def group_count(structure, group: int) -> int:
    """Rows of :func:`sdd_groups_host`' table."""
    return sdd_groups_host(structure, group).shape[0]


def block_tiles(structure, tr: int, ts: int):
    """(tile_ids, inv, ntc) on the host: the ids (tile row * ntc + tile column) of the tiles
    of tr x ts blocks that hold a stored block, sorted, and each block's index into them."""

    def build():
        ntc = -(-structure.block_shape[1] // ts)
        rows = structure.rows.astype(np.int64)
        cols = structure.host_indices.astype(np.int64)
        tile_ids, inv = np.unique((rows // tr) * ntc + cols // ts, return_inverse=True)
        return tile_ids, inv, ntc

    return structure.cached(("block_tiles", tr, ts), build)


def sdd_tiles(structure, device: int, tr: int, ts: int):
    """(tiles, map) on the device for the tiled sdd: one (tile row, tile column, offset into
    map) row per tile of tr x ts blocks that holds a stored block; map gives each tile's
    blocks in row-major order, -1 where none is stored."""

    def build():
        tile_ids, inv, ntc = block_tiles(structure, tr, ts)
        rows, cols = structure.rows, structure.host_indices
        bmap = np.full((tile_ids.shape[0], tr * ts), -1, dtype=np.int32)
        bmap[inv, (rows % tr) * ts + cols % ts] = np.arange(rows.shape[0])
        tiles = np.zeros((tile_ids.shape[0], 4), dtype=np.int32)
        tiles[:, 0], tiles[:, 1] = tile_ids // ntc, tile_ids % ntc
        tiles[:, 2] = np.arange(tile_ids.shape[0]) * tr * ts
        return tiles, bmap.ravel()

    return device_tables(structure, device, ("sdd_tile", tr, ts), build)


def sdd_work_host(structure, group: int, block_rows: int = 1, panel: bool = False):
    """The table a wgmma sdd kernel walks, on the host: the dense panels' tiles
    (:func:`sdd_panel_tiles_host`), paired block rows' groups (:func:`sdd_pair_groups_host`,
    ``block_rows`` 2) or runs of one block row's blocks (:func:`sdd_groups_host`)."""
    if panel:
        return sdd_panel_tiles_host(structure, block_rows, group)
    if block_rows == 2:
        return sdd_pair_groups_host(structure, group)
    return sdd_groups_host(structure, group)


def sdd_work(structure, device: int, group: int, block_rows: int = 1, panel: bool = False):
    """:func:`sdd_work_host`'s table on ``device``."""
    return device_tables(structure, device, ("sdd_work", group, block_rows, panel),
                         lambda: (sdd_work_host(structure, group, block_rows, panel),))[0]


def sdd_panel_tiles_host(structure, rows: int, group: int) -> np.ndarray:
    """The TMA sdd's dense panels on the host: one row per tile of ``rows`` x ``group``
    blocks that holds a stored block, (first block row, first block column, then the
    block at each of its positions, row-major, -1 for none)."""

    def build():
        tile_ids, inv, ntc = block_tiles(structure, rows, group)
        r, c = structure.rows, structure.host_indices
        table = np.full((tile_ids.shape[0], 2 + rows * group), -1, dtype=np.int32)
        table[:, 0], table[:, 1] = tile_ids // ntc * rows, tile_ids % ntc * group
        table[inv, 2 + (r % rows) * group + c % group] = np.arange(r.shape[0])
        return table

    return structure.cached(("sdd_panels", rows, group), build)


def panel_fill(structure, rows: int, group: int) -> float:
    """Stored blocks over the positions of :func:`sdd_panel_tiles_host`'s tiles."""
    tiles = sdd_panel_tiles_host(structure, rows, group).shape[0]
    return structure.nnzb / (tiles * rows * group) if tiles else 0.0


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


def sdd_stream_starts_host(structure, chunk: int) -> np.ndarray:
    """Each block row's first entry in each chunk of ``chunk`` block columns, then the
    row's end (int32, block rows x (chunks + 1)): the short-reduction sdd's work, a row's
    blocks of one chunk being one contiguous run of W's blocks."""
    rows, cols = structure.block_shape
    nchunks = max(1, -(-cols // chunk))
    ptr = structure.host_indptr.astype(np.int64)
    owner = np.repeat(np.arange(rows, dtype=np.int64), np.diff(ptr))
    key = owner * nchunks + structure.host_indices.astype(np.int64) // chunk  # ascending
    want = np.arange(rows, dtype=np.int64)[:, None] * nchunks + np.arange(nchunks + 1)
    return np.searchsorted(key, want, side="left").astype(np.int32)


def sdd_stream_starts(structure, device: int, chunk: int):
    """:func:`sdd_stream_starts_host` on the device."""
    return device_tables(structure, device, ("sdd_stream", chunk),
                         lambda: (sdd_stream_starts_host(structure, chunk),))[0]


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


def union_entries(structure, trans: bool, group: int, pad: int = 1) -> int:
    """Entries of the union lists of ``group`` adjacent output blocks, all groups (each
    padded to a multiple of ``pad``)."""
    return structure.cached(("union_entries", trans, group, pad),
                            lambda: int(lists(structure, trans, group, pad)[0][-1]))


def sharing(structure, trans: bool, group: int) -> float:
    """Stored blocks per entry of the union lists of ``group`` adjacent output blocks: how
    many members an X slice of a grouped kernel feeds on average (inf for an empty layout,
    where any kernel will do)."""
    entries = union_entries(structure, trans, group)
    return structure.nnzb / entries if entries else float("inf")


def panel_cover(structure, trans: bool, group: int, pad: int = 1) -> float:
    """Fraction of W's block grid covered by the panels of the union lists of ``group``
    adjacent output blocks (each union entry a panel row of ``group`` blocks, present or
    not; the lists padded to a multiple of ``pad``): the panel kernel's MMAs against a
    dense product's."""
    rows, cols = structure.block_shape
    entries = union_entries(structure, trans, group, pad)
    return min(1.0, entries * group / (rows * cols)) if rows * cols else 0.0
