"""The small-N dsd's launches (``dsd_stream``): X in shared memory, W's blocks streamed
once, and the partial products of several CTAs per group added in order.
"""

from __future__ import annotations

import dataclasses

from . import device, worklists
from .compile import get_kernel
from .configs import stream_finish_config
from .dsd_configs import stream_tile
from .launch import Launch, LaunchError
from .run import _output_writes, _set_output, _SplitScratch, _stride_grid


class StreamLaunches:
    """The stream kernel's part of a dsd runner (:class:`.run_dsd._DsdRunner`): its launch,
    and where CTAs leave partial products, their sum."""

    def _init_stream(self, s, dev, n, trans, dtype, shared=None):
        """The small-N dsd with X in shared memory. A grid of one CTA per group of output
        blocks writes Y itself; otherwise each run of chunks writes its float32 partial
        product to the workspace (kept per stream in the layout's cache, as a split
        product's is), and they are added in order into Y: by the group's own CTAs in the
        same launch (``plan.shared_sum``: a cooperative launch, since those CTAs wait for
        each other), else by stream_finish in a second launch."""
        p, b = self.plan, self.b
        cfg, (groups, runs) = p.kernel, p.grid
        t = stream_tile(b, n)
        blk, kcol, starts = worklists.stream_tables(s, dev, trans, t.chunk, t.group)
        nk = s.block_shape[1] if trans else s.block_shape[0]
        nchunks = worklists.stream_chunks(s, trans, t.chunk)
        kernel = get_kernel(cfg)
        if shared is None:
            # The driver's occupancy must agree with the plan's count of resident CTAs,
            # else the cooperative launch would be refused: then the second launch adds the
            # partials, and the plan says so.
            shared = p.shared_sum and groups * runs <= device.sm_count(
                dev) * device.resident_ctas(kernel, cfg.threads, cfg.smem)
        if p.shared_sum and not shared:
            self.plan = p = dataclasses.replace(p, shared_sum=False)
        self._stream_args = (s, dev, n, trans, dtype)
        #   x ldx nrows kcols w blk kcol starts nout nchunks run ws counts y ldy alpha beta
        self.main = Launch(kernel, p.grid, (cfg.threads,), cfg.smem, "pliippppiiippplff",
                           [None, None, n, nk * b, None, blk, kcol, starts, self.width // b,
                            nchunks, p.split, None, 0, None, None, None, None],
                           cooperative=shared)
        self.i_w, self.streamed = 4, True
        self.finish = self.split = self._split_stream = None
        if runs > 1:
            rows = cfg.rows_per_cta
            # the shared sum's two counters per group (in, out), which each launch leaves
            # at zero
            self.split = _SplitScratch(s, dev, (runs, rows, self.width),
                                       2 * groups if shared else 0)
            if not shared:
                pairs = n * self.width // 2
                #   ws nruns rows nrows width y ldy alpha beta
                self.finish = Launch(get_kernel(stream_finish_config(dtype)),
                                     (_stride_grid(pairs),), (256,), 0, "piiiiplff",
                                     [None, runs, rows, n, self.width, None, None, None,
                                      None])

    def _call_stream(self, x, wdata, y, alpha, beta, stream):
        v, it = self.main.v, self.it
        v[0].value = x.data.ptr
        v[1].value = x.strides[0] // it
        v[4].value = wdata.data.ptr
        _set_output(v, 13, y, it, alpha, beta)
        if self.split is None:  # the CTAs write Y
            self.main(stream)
            return
        ws, counts = self.split(stream)
        v[11].value = ws.data.ptr
        self._split_stream = stream if self.split.kept(stream) else None
        if self.finish is None:  # the group's CTAs add the partials
            v[12].value = counts.data.ptr
            try:
                self.main(stream)
            except LaunchError:
                # The driver refused the cooperative launch (fewer SMs to be had than the
                # device has, as under MPS): from now on a second launch adds them.
                self._init_stream(*self._stream_args, shared=False)
                self._call_stream(x, wdata, y, alpha, beta, stream)
            return
        self.finish.v[0].value = ws.data.ptr
        _set_output(self.finish.v, 5, y, it, alpha, beta)
        self.main(stream)
        self.finish(stream)

    def _stream_spec(self):
        """:meth:`~.run_dsd._DsdRunner.fast_spec` of the stream kernel."""
        names, writes = ("main",), [("main", 0, "a"), ("main", 1, "lda"), ("main", 4, "w")]
        writes += _output_writes("main", 13)
        if self.finish is not None:
            names += ("finish",)
            writes += _output_writes("finish", 5)
        return names, writes, False, False, self.split is not None, False
