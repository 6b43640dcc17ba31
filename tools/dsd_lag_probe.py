"""The tall TMA dsd tile of b = 128 with its second consumer warpgroup held back (b = 64's
tall tile has one consumer warpgroup, which the patch leaves alone: a control):
both warpgroups own half of each block's columns over the tile's rows and share every
stage, but nothing else ties them, so a lag given at the start could carry from tile to
tile, one warpgroup's epilogue then running beside the other's MMAs instead of both at
once while the tensor cores idle (bench/NOTES.md 255-260). ``start:NS`` sleeps warpgroup 1
NS nanoseconds once, before its first tile; ``tile:NS`` before each of its tiles. Timed as
eager calls back to back beside dense cuBLAS; each result is checked bit for bit against
the kernel as shipped (a lag changes no value). The kernel source is patched in this
process only.

    PYTHONPATH=.:tools python3 tools/dsd_lag_probe.py [--cases 128:0.1,...] [--lags ...]
"""

from __future__ import annotations

from dsd_time_split import probe_parser, time_variants

from cubsparse._cuda import compile as cc

CONSUMER = "    const int wg = tid / 128;  // consumer warpgroup\n"
TILE = "      const int j = item.x, len = item.z, slot = item.w;\n"
_SOURCE = cc.source.__wrapped__


def lagged_source(lag: str):
    """``compile.source`` with warpgroup 1 of the TMA dsd held back as ``lag`` says."""
    where, ns = lag.split(":") if ":" in lag else ("none", "0")

    def source(family: str) -> str:
        text = _SOURCE(family)
        if family != "dsd_wgmma_tma" or where == "none":
            return text
        anchor = CONSUMER if where == "start" else TILE
        if text.count(anchor) != 1:
            raise RuntimeError("dsd_wgmma_tma.cu changed: no consumer start to patch")
        sleep = f"    if (XN > 0 && tid / 128 == 1) __nanosleep({int(ns)});\n"
        return text.replace(anchor, anchor + sleep)

    return source


def main():
    parser = probe_parser(__doc__, "128:0.05,128:0.1,128:0.25,128:0.5", "fwd")
    parser.add_argument("--lags", default="start:500,start:1000,start:2000,start:4000,tile:500")
    args = parser.parse_args()
    # the shipped kernel first and last; a lag changes no value
    time_variants(args, ["none", *args.lags.split(","), "none"], lagged_source,
                  lambda lag: True, "; shipped timed first and last", width=11)


if __name__ == "__main__":
    main()
