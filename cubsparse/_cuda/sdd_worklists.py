"""The weight gradient's work lists (sdd): groups of a block row's blocks, paired block rows,
tiles of the block grid, dense panels, and the short-reduction kernel's runs per chunk,
built once per layout and cached there, or uploaded once per device
(:func:`.worklists.device_tables`)."""

from __future__ import annotations

import numpy as np

from .worklists import device_tables


def _row_groups(indptr: np.ndarray, group: int) -> np.ndarray:
    """(ngroups, 3) int32 rows (row, first entry, count): each row's entries of the row
    pointer ``indptr`` in runs of at most ``group``, rows in order."""
    indptr = indptr.astype(np.int64)
    counts = np.diff(indptr)
    per_row = (counts + group - 1) // group
    row = np.repeat(np.arange(counts.shape[0]), per_row)
    first_group = np.repeat(np.cumsum(per_row) - per_row, per_row)
    k = np.arange(row.shape[0]) - first_group  # group number within its row
    start = indptr[row] + k * group
    cnt = np.minimum(group, indptr[row + 1] - start)
    return np.stack([row, start, cnt], axis=1).astype(np.int32).reshape(-1, 3)


def sdd_groups_host(structure, group: int) -> np.ndarray:
    """(ngroups, 3) int32 rows (block row, first block, count): runs of <= group blocks of
    one block row, on the host."""
    return structure.cached(("sdd_groups", group),
                            lambda: _row_groups(structure.host_indptr, group))


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


def sdd_hybrid_host(structure, rows: int, group: int, rest_group: int, min_fill: float):
    """(panels, groups, order) on the host for the weight gradient in two parts: ``panels``
    the rows of :func:`sdd_panel_tiles_host` whose stored blocks fill at least ``min_fill``
    of their positions; ``order`` the other blocks (int32, in W's order, so row by row);
    ``groups`` (block row, first entry of ``order``, count) rows over them, up to
    ``rest_group`` of one block row's blocks each, wherever they lie in the row. Every
    block is in exactly one of the two parts."""

    def build():
        table = sdd_panel_tiles_host(structure, rows, group)
        ids = table[:, 2:]
        dense = (ids >= 0).sum(axis=1) >= min_fill * rows * group
        panels = table[dense]
        taken = np.zeros(structure.nnzb, bool)
        taken[panels[:, 2:][panels[:, 2:] >= 0]] = True
        order = np.flatnonzero(~taken)  # in W's order: row by row
        per_row = np.bincount(structure.rows[order], minlength=structure.block_shape[0])
        groups = _row_groups(np.concatenate([[0], np.cumsum(per_row)]), rest_group)
        return panels, groups, order.astype(np.int32)

    return structure.cached(("sdd_hybrid", rows, group, rest_group, min_fill), build)


def sdd_hybrid(structure, device: int, rows: int, group: int, rest_group: int,
               min_fill: float):
    """:func:`sdd_hybrid_host`'s three tables on ``device``."""
    return device_tables(structure, device, ("sdd_hybrid", rows, group, rest_group, min_fill),
                         lambda: sdd_hybrid_host(structure, rows, group, rest_group, min_fill))


def panel_fill(structure, rows: int, group: int) -> float:
    """Stored blocks over the positions of :func:`sdd_panel_tiles_host`'s tiles."""
    tiles = sdd_panel_tiles_host(structure, rows, group).shape[0]
    return structure.nnzb / (tiles * rows * group) if tiles else 0.0


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
