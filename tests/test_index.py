"""The per-layout index tables (cubsparse._index), on the host: no GPU needed."""

from __future__ import annotations

import numpy as np
import pytest

import cubsparse as cs


def _structure(layout):
    w = cs.BlockSparseMatrix.from_layout(layout, 8, dtype="float32", seed=0)
    return w._structure


LAYOUTS = {
    "random": cs.layouts.random(9, 11, 0.3, seed=4),
    "hubs": cs.layouts.barabasi_albert(13, 2, seed=3),
    "empty": np.zeros((5, 6), dtype=bool),
    "one column": np.eye(1, 7, 3, dtype=bool).repeat(4, axis=0),
}


@pytest.mark.parametrize("name", LAYOUTS)
@pytest.mark.parametrize("trans", [False, True])
@pytest.mark.parametrize("group", [1, 2, 4, 8])
def test_grouped_lists_hold_each_product_once_in_order(name, trans, group):
    s = _structure(LAYOUTS[name])
    ptr, blk, gidx = s.work_lists(trans)
    gptr, gblk, ggidx = s.grouped_lists(trans, group) if group > 1 else (ptr, blk, gidx)
    n_out = ptr.shape[0] - 1
    assert gptr.shape == (-(-n_out // group) + 1,)
    table = gblk.reshape(-1, group)
    assert table.shape[0] == ggidx.shape[0] == gptr[-1]
    for g in range(gptr.shape[0] - 1):
        keys = ggidx[gptr[g]:gptr[g + 1]]
        assert np.all(np.diff(keys) > 0), "entries ascend in the input block, no repeats"
        rows = table[gptr[g]:gptr[g + 1]]
        assert np.all((rows >= 0).any(axis=1)), "every entry multiplies at least one block"
        for i in range(group):
            j = g * group + i
            want = {} if j >= n_out else dict(zip(gidx[ptr[j]:ptr[j + 1]],
                                                       blk[ptr[j]:ptr[j + 1]], strict=True))
            got = {int(k): int(p) for k, p in zip(keys, rows[:, i], strict=True) if p >= 0}
            assert got == {int(k): int(p) for k, p in want.items()}


def test_grouped_lists_are_cached_per_orientation_and_group():
    s = _structure(LAYOUTS["random"])
    assert s.grouped_lists(False, 4) is s.grouped_lists(False, 4)
    assert s.grouped_lists(True, 4) is not s.grouped_lists(False, 4)
