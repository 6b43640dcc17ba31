"""Where the persistent TMA weight gradient's time goes (``sdd_wgmma_tma``: b = 128, and the
dense panels of b <= 32): the same launch with its blocks' stores removed, its MMAs
removed, or both, timed as eager calls back to back beside dense cuBLAS, as
``tools/dsd_time_split.py`` does for the products. The kernel source is patched in this
process only; the patched launches' results are wrong by design (a probe, not a test).

    PYTHONPATH=.:tools python3 tools/sdd_time_split.py [--layout random] [--cases 128:0.1,...]

"none" is the kernel as shipped; "store" drops the blocks' stores (a never-true guard
keeps the accumulators live); "mma" replaces each slice's wgmmas with one register add,
so the ring still turns at the copies' pace; "store+mma" leaves the copies alone; "loads"
drops the copies (the producer only arrives on each stage's `full` barrier, so the MMAs
read whatever the stage holds) and leaves the MMAs, their ring and the stores. A
reduction cut into pieces (the last round's groups) still writes and adds its partials.
"""

from __future__ import annotations

from dsd_time_split import patch_parts, probe_parser, time_variants

MMA = "      sdd_wgmma_slice<Tag, TA, TB, MT, NW, BK>(acc, sA, sA + TA::BYTES, wm, wn);"
NO_MMA = "      acc[0][0] += 1.0f;"
STORE = ("    sdd_wgmma_store_blocks<Tag, B, false, MT, NW, ROWS>(acc, wm, wn, tid, "
         "Groups(groups, grp),")
NO_STORE = "    if (acc[0][0] == 1.2345e-30f)\n" + STORE
EXPECT = "        mbar_arrive_expect_tx(&full[s], STAGE_BYTES);"
LOAD_X = "          tma_load_2d(sA + p * TA::PANEL, &xmap,"
LOAD_DY = "          tma_load_2d(sB + p * TB::PANEL, &dmap,"
MODES = ("none", "store", "mma", "store+mma", "loads")
#: ``compile.source`` with the parts a mode names removed from sdd_wgmma_tma.cu
patched_source = patch_parts("sdd_wgmma_tma", (
    ("store", STORE, NO_STORE), ("mma", MMA, NO_MMA),
    ("loads", EXPECT, "        mbar_arrive(&full[s]);"),
    ("loads", LOAD_X, "          if (kt < 0) " + LOAD_X.lstrip()),
    ("loads", LOAD_DY, "          if (kt < 0) " + LOAD_DY.lstrip())))


def main():
    args = probe_parser(__doc__, "128:0.05,128:0.1,128:0.25,128:0.5", "sdd").parse_args()
    time_variants(args, MODES, patched_source, lambda mode: False)


if __name__ == "__main__":
    main()
