"""Every kernel instance the backend can launch: what ``warmup`` compiles ahead of the first
call and CI compiles for each target (``tools/check_kernels.py``)."""

from __future__ import annotations

from .. import _dtypes
from .configs import (
    KernelConfig,
    fill_config,
    gather_config,
    panel_copy_config,
    scatter_config,
    stream_finish_config,
    transpose_config,
)
from .dsd_configs import dsd_config, group_config, stream_config, wgmma_config
from .sdd_configs import sdd_config, sdd_stream_config, sdd_tile_config, sdd_wgmma_config
from .tiles import SDD_STREAM, WGMMA_DSD_TALL

#: Groups of kernels for :func:`all_configs` (what ``warmup`` compiles per op).
GROUPS = ("dsd", "sdd", "dsd_sm90", "sdd_sm90", "dense")


def all_configs(dtypes=None, blocksizes=None, groups=None) -> list[KernelConfig]:
    """Every instantiation the backend can launch (what ``warmup`` and CI compile), of the
    ``groups`` (default :data:`GROUPS`)."""
    names = [d if d == "bfloat16" else _dtypes.as_dtype(d).name
             for d in (dtypes or _dtypes.SUPPORTED_DTYPES)]
    if "bfloat16" not in names and dtypes is None:
        names.append("bfloat16")  # compiled even where ml_dtypes is missing
    out = []
    for group in groups or GROUPS:
        for dt in names:
            for b in blocksizes or _dtypes.BLOCK_SIZES:
                out += _family_configs(group, dt, b)
    return list(dict.fromkeys(out))


def _family_configs(fam: str, dt: str, b: int) -> list[KernelConfig]:
    tf32 = dt == "float32"  # float32 also has the opt-in TF32 kernels
    out = []
    if fam == "dsd":
        for n in (16, 32, 48, 64):
            if stream_config(dt, b, False, n) is not None:
                out += [stream_config(dt, b, t, n) for t in (False, True)]
                out += [stream_finish_config(dt)]
        if group_config(dt, b, False) is not None:
            out += [group_config(dt, b, t) for t in (False, True)]
        for small in (False, True):
            out += [dsd_config(dt, b, t, False, small) for t in (False, True)]
            out += [dsd_config(dt, b, True, True, small)] if tf32 else []
    elif fam == "dsd_sm90":
        pcfg = wgmma_config(dt, b, panel=True)
        if pcfg is not None:
            out += [pcfg, transpose_config(b)]
            if pcfg.tma:  # (and over whole slices of X)
                out += [wgmma_config(dt, b, panel=True, whole=True)]
                out += [panel_copy_config(b, t) for t in (False, True)]
        if wgmma_config(dt, b) is not None:
            for union in (True, False):  # the union kernel and its fallback
                wcfg = wgmma_config(dt, b, union=union)
                out += [wcfg, transpose_config(b), wgmma_config(dt, b, True, union)]
                if not union and WGMMA_DSD_TALL.get(b) is not None:
                    out += [wgmma_config(dt, b, kn, False, True) for kn in (False, True)]
                for kw in ({"cluster": True}, {"pair": True}, {"small": 32}, {"small": 64}):
                    if not union and wgmma_config(dt, b, False, False, **kw) is not None:
                        out += [wgmma_config(dt, b, kn, False, **kw) for kn in (False, True)]
    elif fam == "sdd_sm90":
        if sdd_wgmma_config(dt, b, panel=True) is not None:
            out.append(sdd_wgmma_config(dt, b, panel=True))
        if sdd_wgmma_config(dt, b) is not None:
            out.append(sdd_wgmma_config(dt, b))
            if sdd_wgmma_config(dt, b, rest=True) is not None:
                out.append(sdd_wgmma_config(dt, b, rest=True))
            for kw in ({"wide": True}, {"tma": True}, {"pair": True}):
                if sdd_wgmma_config(dt, b, **kw) is not None:
                    out.append(sdd_wgmma_config(dt, b, **kw))
            if sdd_wgmma_config(dt, b, True) is not None:
                out += [sdd_wgmma_config(dt, b, True), sdd_wgmma_config(dt, b, True, 32)]
    elif fam == "sdd":
        out += [sdd_config(dt, b, a, bn) for a in (True, False) for bn in (False, True)]
        out += [sdd_tile_config(dt, b)] if sdd_tile_config(dt, b) is not None else []
        stream = (sdd_stream_config(dt, b, rows) for bb, rows in SDD_STREAM if bb == b)
        out += [cfg for cfg in stream if cfg is not None]
        out += [sdd_config(dt, b, tf32=True)] if tf32 else []
    elif fam == "dense":
        out += [scatter_config(dt, b), fill_config(dt, b), gather_config(dt, b)]
    return out
