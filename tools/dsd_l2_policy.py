"""L2 eviction hints on the tall TMA dsd tile's copies (b = 64 and 128, X's rows as wgmma's N):
the same launch with Y's TMA stores marked evict-first (Y is never read back, and at
d = 0.25 a row tile's 4 MB of Y shares L2 with the 34 MB of W's blocks that the next row
tile reads again), W's block loads marked evict-last (the clustered tile's multicast loads
too: at 8d3e27e they were left unhinted), both, or, as a bound, without Y's
TMA store at all. Timed as eager calls back to back beside dense cuBLAS; each hinted
result is checked bit for bit against the kernel as shipped (a hint changes no value).
The kernel source is patched in this process only.

    PYTHONPATH=.:tools python3 tools/dsd_l2_policy.py [--layout random] [--cases 128:0.25,...]
"""

from __future__ import annotations

from dsd_time_split import probe_parser, time_variants

from cubsparse._cuda import compile as cc

ANCHOR = """struct alignas(64) TmaMap {
  unsigned long long v[16];
};
"""
HELPERS = """
// (probe) an L2 policy for every line a copy touches: evict-last (1) or evict-first (0)
__device__ __forceinline__ unsigned long long probe_l2_policy(int last) {
  unsigned long long p;
  if (last)
    asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;\\n" : "=l"(p));
  else
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\\n" : "=l"(p));
  return p;
}
__device__ __forceinline__ void probe_load_hint(unsigned dst, const TmaMap* map, int c0, int c1,
                                                unsigned long long* bar, unsigned long long pol) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      ".L2::cache_hint [%0], [%1, {%2, %3}], [%4], %5;\\n" ::"r"(dst),
      "l"(map), "r"(c0), "r"(c1), "r"(smem_addr(bar)), "l"(pol)
      : "memory");
}
__device__ __forceinline__ void probe_load_mc_hint(unsigned dst, const TmaMap* map, int c0,
                                                   int c1, unsigned long long* bar,
                                                   unsigned short mask, unsigned long long pol) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      ".multicast::cluster.L2::cache_hint [%0], [%1, {%2, %3}], [%4], %5, %6;\\n" ::"r"(dst),
      "l"(map), "r"(c0), "r"(c1), "r"(smem_addr(bar)), "h"(mask), "l"(pol)
      : "memory");
}
__device__ __forceinline__ void probe_store_hint(const TmaMap* map, unsigned src, int c0, int c1,
                                                 unsigned long long pol) {
  asm volatile(
      "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group.L2::cache_hint [%0, {%1, %2}], "
      "[%3], %4;\\n" ::"l"(map), "r"(c0), "r"(c1), "r"(src), "l"(pol)
      : "memory");
}
"""
STORE = "      tma_store_2d(ymap, buf, col0, row0 + part * EPI);"
STORE_FIRST = "      probe_store_hint(ymap, buf, col0, row0 + part * EPI, probe_l2_policy(0));"
NO_STORE = "      (void)ymap;"
WLOAD = """            if constexpr (CLUSTER == 1)
              tma_load_2d(dst, wmap, c0, c1, &full[s]);"""
WLOAD_LAST = """            if constexpr (CLUSTER == 1)
              probe_load_hint(dst, wmap, c0, c1, &full[s], probe_l2_policy(1));"""
WLOAD_MC = """              tma_load_2d_multicast(dst + rank * WPART * WROW_BYTES, wmap, c0,
                                    c1 + rank * WPART, &full[s], (1u << CLUSTER) - 1);"""
WLOAD_MC_LAST = """              probe_load_mc_hint(dst + rank * WPART * WROW_BYTES, wmap, c0,
                                 c1 + rank * WPART, &full[s], (1u << CLUSTER) - 1,
                                 probe_l2_policy(1));"""
MODES = ("none", "y_first", "w_last", "y_first+w_last", "no_ystore")
_SOURCE = cc.source.__wrapped__


def patched_source(mode: str):
    """``compile.source`` with dsd_wgmma_tma.cu's copies hinted as ``mode`` says."""

    def source(family: str) -> str:
        text = _SOURCE(family)
        if family != "dsd_wgmma_tma" or mode == "none":
            return text
        for old in (ANCHOR, STORE, WLOAD, WLOAD_MC):
            if text.count(old) != 1:
                raise RuntimeError(f"dsd_wgmma_tma.cu changed: {old.strip()[:40]!r} not found once")
        text = text.replace(ANCHOR, ANCHOR + HELPERS)
        if "y_first" in mode:
            text = text.replace(STORE, STORE_FIRST)
        if "w_last" in mode:  # the single-CTA tile's loads and the clusters' multicasts
            text = text.replace(WLOAD, WLOAD_LAST).replace(WLOAD_MC, WLOAD_MC_LAST)
        if mode == "no_ystore":
            text = text.replace(STORE, NO_STORE)
        return text

    return source


def main():
    args = probe_parser(__doc__, "128:0.1,128:0.25,128:0.5", "fwd").parse_args()
    # a hint changes no value; without Y's store the output is not written
    time_variants(args, MODES, patched_source, lambda mode: mode != "no_ystore", width=14)


if __name__ == "__main__":
    main()
