"""The one-row TMA weight gradient alone and in clusters of two (``sdd_wgmma_tma_mc``), and
what the clusters' time is made of: eager calls back to back beside dense cuBLAS, as
``tools/sdd_time_split.py`` times them.

    PYTHONPATH=.:tools python3 tools/sdd_cluster_ab.py [--layout random] [--cases 128:0.1,...]

"one" is the tile alone (``sdd_cluster`` off), "mc" in clusters; "mc-solo" is the
clustered kernel with every pair taken as two block rows (each CTA copying X whole, the
two still in step), so that "mc-solo" against "one" is what the clusters' coupling costs
and "mc" against "mc-solo" what sharing X by multicast wins; "one-copies" and
"mc-copies" leave only the copies (stores and MMAs patched out as in sdd_time_split).
"""

from __future__ import annotations

from dsd_time_split import patch_parts, probe_parser, time_variants
from sdd_time_split import MMA, NO_MMA, NO_STORE, STORE

SHARED = "      const bool shared = CLUSTER > 1 && groups[3 * grp] >= 0 &&"
NO_SHARED = "      const bool shared = false && groups[3 * grp] >= 0 &&"
MODES = ("one", "mc", "mc-solo", "one-copies", "mc-copies")
_patch = patch_parts("sdd_wgmma_tma", (("solo", SHARED, NO_SHARED), ("copies", STORE, NO_STORE),
                                       ("copies", MMA, NO_MMA)))


def main():
    args = probe_parser(__doc__, "128:0.05,128:0.1,128:0.25,128:0.5", "sdd").parse_args()
    time_variants(args, MODES, _patch, lambda mode: False,
                  decisions=lambda mode: {"sdd_cluster": mode.startswith("mc"),
                                          "sdd_pair": False})


if __name__ == "__main__":
    main()
