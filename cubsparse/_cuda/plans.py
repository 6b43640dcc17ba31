"""Kernel choice: one pure function per primitive that returns a named plan.

:func:`plan_dsd` and :func:`plan_sdd` take the layout (through its cached statistics),
the dtype, the block size, the number of rows, which operand is transposed, TF32 and
the device's architecture and SM count, and return a :class:`DsdPlan` / :class:`SddPlan`
whose ``str()`` is a readable line. Each is a ladder of kernels, the first whose rule pays
taken: the rules, with the measurements behind them, are in :mod:`.dsd_rules` and
:mod:`.sdd_rules`, the tiles in :mod:`.tiles`, and :func:`override` (from
:mod:`.decisions`) forces any decision for tuning tools and tests. The ladders live in
:mod:`.dsd_plans` and :mod:`.sdd_plans`, the records in :mod:`.plan_records`; callers find
all of them here. Plans are cached by the caller (:mod:`.run`), keyed by
:data:`.configs.GENERATION`, which every :func:`override` and :func:`.configs.set_tiles`
bumps.
"""

from __future__ import annotations

from .decisions import DECISIONS, forced, override
from .dsd_plans import plan_dsd
from .plan_records import DsdPlan, SddPlan, persistent_ctas
from .sdd_plans import plan_sdd

#: The plans, their records and the plan-override API (:mod:`.decisions`), for callers.
__all__ = ["DECISIONS", "DsdPlan", "SddPlan", "forced", "override", "persistent_ctas",
           "plan_dsd", "plan_sdd"]
