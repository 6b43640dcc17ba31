"""The plan records that :func:`.plans.plan_dsd` and :func:`.plans.plan_sdd` return (a
kernel, its grid and what runs beside it; ``str()`` is one readable line), and the grid
of a persistent kernel."""

from __future__ import annotations

import dataclasses

from .configs import KernelConfig
from .decisions import forced
from .dsd_configs import stream_tile


@dataclasses.dataclass(frozen=True)
class DsdPlan:
    """How ``Y = X @ op(W)`` runs for one layout, dtype and number of rows of X."""

    product: str  # "X @ W" or "X @ W.T"
    rows: int  # of X
    dtype: str
    blocksize: int
    path: str  # "sparse" or "dense"
    kernel: KernelConfig  # the sparse kernel (dense path: the scatter or the fill)
    reads_w_as_stored: bool  # else W's blocks are read transposed ([n][k])
    # per call: None, "transpose_blocks" (wgmma), "transpose" (TF32) or "panel_blocks" (the
    # TMA kernel's dense panels gathered, zeros for absent members)
    w_copy: str | None
    split: int  # longest list per CTA, 0: lists whole (dsd_stream: X's chunks per CTA)
    slots: int  # float32 workspace tiles of the split lists (dsd_stream: partial products)
    grid: tuple
    ratio: float | None  # the dense model's sparse / dense time, where it has one
    band: int = 1  # TMA kernels: row tiles per band of the tile order (dsd_rules.DSD_PANEL_BAND)
    pad: int = 1  # the union lists padded to a multiple of this many entries (TMA panels)
    # dsd_stream with partial products: the group's CTAs add them in the launch (a
    # cooperative launch, every CTA resident at once), else a second launch does
    shared_sum: bool = False
    # the lists cut into one run of equal entries per CTA (stream-K,
    # worklists.streamk_host), each CTA's run fixed: the small-N TMA tile
    runs: bool = False
    # the TMA kernel's tiles taken by deadline (worklists.tile_order), else in its own order
    order: bool = False

    @property
    def panel(self) -> bool:
        """Whether the sparse kernel multiplies dense panels of a group's blocks (absent
        ones as zeros)."""
        return self.path == "sparse" and self.kernel.panel

    def __str__(self) -> str:
        if self.path == "dense":
            how = ("W written whole" if self.kernel.kernel == "fill_dense"
                   else "W's blocks scattered")
            return (f"{self.product}, {self.rows} rows, {self.dtype}, b = {self.blocksize}: "
                    f"dense ({how}, then cuBLAS; model: sparse {self.ratio:.2f}x dense)")
        k = self.kernel
        parts = [f"{self.product}, {self.rows} rows, {self.dtype}, b = {self.blocksize}: "
                 f"{k.name}", f"{k.rows_per_cta} rows x {k.group} block(s) per tile",
                 f"grid {self.grid}" + (f" ({k.persistent}/SM, persistent)" if k.persistent
                                        else "")]
        if self.panel:
            parts.append(f"dense panels of {k.group} blocks (absent blocks multiplied as "
                         "zeros; set_options(dense_panels=False) forbids them)")
        if self.band > 1:
            parts.append(f"tiles taken in bands of {self.band} row tiles")
        if self.order:
            parts.append("long lists' tiles taken early (tile_order)")
        if self.w_copy == "panel_blocks":
            parts.append("W's blocks gathered into the panels per call (panel_blocks)")
        elif self.w_copy:
            parts.append(f"W's blocks transposed per call ({self.w_copy})")
        if k.kernel == "dsd_stream":
            chunk = stream_tile(self.blocksize, self.rows).chunk
            parts.append(f"X staged {chunk} block columns at a time, {self.split} chunk(s) "
                         "per CTA"
                         + (f", {self.slots} partial products added in order "
                            + ("by the group's CTAs (one cooperative launch)" if self.shared_sum
                               else "by a second launch") if self.slots
                            else ", Y written by the CTA"))
        elif self.runs:
            parts.append(f"lists cut into {self.grid[0]} runs of equal entries, one a CTA "
                         "(stream-K" + (f"; {self.slots} partial tiles, added by each list's "
                                        "last CTA)" if self.slots else ")"))
        elif self.split:
            parts.append(f"lists split at {self.split} ({self.slots} partial tiles, added "
                         "by each list's last CTA)")
        return ", ".join(parts)


@dataclasses.dataclass(frozen=True)
class SddPlan:
    """How ``(A @ B)`` sampled on a layout runs for one dtype and operand layout."""

    dtype: str
    blocksize: int
    path: str  # "sparse" or "dense"
    kernel: KernelConfig  # dense path: the block gather
    tiled: bool  # the tiled small-block kernel (a CTA per tile of the block grid)
    a_km: bool  # A read as [k][m] rows (x.T in place), else [m][k]
    b_nk: bool  # B read as [n][k] rows, else [k][n]
    tf32: bool
    ratio: float | None
    grid: int = 0  # CTAs of a persistent grid (0: one per tile or group); sdd_stream: per chunk
    chunks: int = 0  # sdd_stream: chunks of dY's block columns (the grid's other dimension)
    chunk: int = 0  # sdd_stream: block columns per chunk (at most its tile's)
    # the weight gradient in two parts: sdd_wgmma_rest over the blocks the dense panels
    # (``kernel``) leave, in a second launch, ``rest_splits`` CTAs per group of them
    rest: KernelConfig | None = None
    rest_splits: int = 1  # CTAs sharing each of its groups' reduction
    rest_beside: bool = False  # run on a side stream beside the panels
    # the persistent TMA kernel alone: groups [0, tail_whole) reduced whole, each later one
    # (the last round's) in ``tail_splits`` pieces, their float32 partials added in order
    tail_splits: int = 1
    tail_whole: int = 0

    def __str__(self) -> str:
        head = f"sampled A @ B, {self.dtype}, b = {self.blocksize}: "
        if self.path == "dense":
            return head + (f"dense (cuBLAS product, then W's blocks gathered; model: sparse "
                           f"{self.ratio:.2f}x dense)")
        k = self.kernel
        if k.kernel == "sdd_stream":
            return head + (f"{k.name}, dY staged {self.chunk} block columns at a time, "
                           f"block rows walked by warps, grid ({self.chunks}, {self.grid}), A "
                           "as [k][m], B as [k][n]")
        per = (f"dense panels of {k.block_rows} x {k.group} blocks per tile (stored where W "
               "has them)" if k.panel else
               f"{k.group} block columns of a pair of block rows per group"
               if k.block_rows == 2 else
               f"{k.group} block(s) of a block row per " + ("group" if self.grid else "CTA"))
        per += f", grid ({self.grid},) ({k.persistent}/SM, persistent)" if self.grid else ""
        if self.rest is not None:
            per += (f"; the tiles the blocks fill, then the other blocks on {self.rest.name}, "
                    f"up to {self.rest.group} of a block row per group, "
                    f"{self.rest_splits} CTA(s) per group"
                    + (", beside the panels" if self.rest_beside else ""))
        if self.tail_splits > 1:
            per += (f"; groups {self.tail_whole}.. (the last round) each reduced in "
                    f"{self.tail_splits} pieces")
        return head + (f"{self.kernel.name}, " + ("tiles of the block grid" if self.tiled
                       else per)
                       + f", A as {'[k][m]' if self.a_km else '[m][k]'}"
                       + f", B as {'[n][k]' if self.b_nk else '[k][n]'}")


def persistent_ctas(cfg: KernelConfig, sms: int) -> int:
    """Grid of a persistent kernel: ``cfg.persistent`` CTAs per SM (or the forced cap), in
    whole clusters."""
    ctas = sms * cfg.persistent
    limit = forced("grid_limit")
    ctas = min(ctas, limit) if limit else ctas
    return max(ctas - ctas % cfg.cluster, cfg.cluster)
