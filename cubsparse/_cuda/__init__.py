"""CUDA backend: the ``dsd`` and ``sdd`` primitives on CuPy arrays.

======================  ==================================================================
module                  job
======================  ==================================================================
:mod:`.tiles`           tile configurations, as named records kept as data
:mod:`.configs`         what kernel instances share; the copy kernels; ``set_tiles``
:mod:`.dsd_configs`     the dsd kernels' instances made from tiles (name, launch shape)
:mod:`.sdd_configs`     the sdd kernels' instances
:mod:`.instances`       every instance the backend can launch (warm-up, CI)
:mod:`.compile`         compiling the ``kernels/*.cu`` sources, cached per device
:mod:`.device`          device queries, TMA tensor maps, persistent kernels' tile counters
:mod:`.worklists`       the dsd's work lists and index tables, once per layout
:mod:`.sdd_worklists`   the sdd's work lists
:mod:`.plans`           kernel choice as a pure function returning a named plan
:mod:`.dsd_plans`       the dsd's ladder of kernels (``plan_dsd``)
:mod:`.sdd_plans`       the sdd's (``plan_sdd``)
:mod:`.plan_records`    the plan records (``DsdPlan``, ``SddPlan``)
:mod:`.dsd_rules`       when each dsd kernel pays (the rules a plan reads)
:mod:`.sdd_rules`       when each sdd kernel pays
:mod:`.decisions`       decisions forced by tools and tests (``plans.override``)
:mod:`.dense_model`     when the dense path (cuBLAS on the densified matrix) wins
:mod:`.launch`          kernel launches with parameters packed once
:mod:`.run`             what the runners share: their cache, alignment, stream, scratch
:mod:`.run_dsd`         running dsd plans: the general and the eager path of a call
:mod:`.run_dsd_stream`  the small-N dsd stream kernel's launches
:mod:`.run_dsd_dense`   the dsd's dense path
:mod:`.run_sdd`         running sdd plans
======================  ==================================================================

No op synchronizes with the host; launches go to CuPy's current stream.
"""

from __future__ import annotations

from .instances import all_configs
from .run_dsd import dsd, dsd_eager, dsd_plan
from .run_sdd import sdd, sdd_eager, sdd_plan


def warmup(dtypes=None, blocksizes=None, ops=None, verbose: bool = False) -> list[str]:
    """Compile every kernel instance of the families ``ops`` selects (see
    :func:`cubsparse.warmup`); Hopper-only kernels only on Hopper."""
    from . import device
    from .compile import get_kernel
    from .instances import GROUPS

    aliases = {"matmul": ("dsd", "dsd_sm90", "dense"),
               "sampled_matmul": ("sdd", "sdd_sm90", "dense")}
    groups = [g for o in (ops or GROUPS) for g in aliases.get(o, (o,))]
    hopper = device.arch(device.current()) == 90
    names = []
    for cfg in all_configs(dtypes, blocksizes, groups):
        if cfg.arch == "sm_90a" and not hopper:
            continue
        if verbose:
            print(f"compiling {cfg.name}", flush=True)
        get_kernel(cfg)
        names.append(cfg.name)
    return names


__all__ = ["all_configs", "dsd", "dsd_eager", "dsd_plan", "sdd", "sdd_eager", "sdd_plan",
           "warmup"]
