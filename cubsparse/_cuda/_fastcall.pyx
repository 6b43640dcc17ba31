# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The eager call path in C: a repeated call of a runner already built, in one C function.

A repeated ``x @ W`` in Python walks five frames before the driver's launch (the matrix's
``__rmatmul__``, the ops' checks, the backend's eager path, the runner, the launch), and
each reads attributes and builds tuples: 5-10 µs of host time on top of the driver's 3-5.
Here the same call is a few attribute reads and integer tests, the writes of the
parameters that change (operand and output addresses, row strides, alpha and beta) into
the runner's packed parameters, and ``cuLaunchKernel`` called directly.

Only the steady state of a call runs here. Everything a call can find changed (the device,
the thread, the plans' generation or options, TF32, an operand's tensor map, the stream of
a kernel's counters or workspace, an operand this path does not take) makes it return
None, and the caller runs the Python path, which handles it and rebuilds what it must.
The state the Python path keeps (the runner's mapped addresses, its launches) is read
from the runner on every call, never copied, so the two paths cannot disagree.

:class:`Outputs` is the output cache of :mod:`.outputs` with its reference counts read
in C; both paths take their results from it.
"""

from libc.stdint cimport int32_t, int64_t, uint64_t
from libc.stdlib cimport getenv

cdef extern from "Python.h":
    Py_ssize_t Py_REFCNT(object o)
    unsigned long PyThread_get_thread_ident()

ctypedef int (*launch_fn)(void*, unsigned int, unsigned int, unsigned int, unsigned int,
                          unsigned int, unsigned int, unsigned int, void*, void**,
                          void**) noexcept nogil
ctypedef int (*coop_fn)(void*, unsigned int, unsigned int, unsigned int, unsigned int,
                        unsigned int, unsigned int, unsigned int, void*,
                        void**) noexcept nogil

#: The interface of this module that :mod:`.fastcall` was written for: a build of another
#: (an in-place build older than its sources) is not used.
API = 8

# cuLaunchKernelEx's configuration, as cuda.h lays it out (the extension is built without
# the CUDA headers): a launch attribute is an id, padding to 8 bytes and a 64-byte value.
cdef struct LaunchAttribute:
    int id
    int pad
    char value[64]

cdef struct LaunchConfig:
    unsigned int grid_x, grid_y, grid_z, block_x, block_y, block_z, smem
    void* stream
    LaunchAttribute* attrs
    unsigned int n_attrs

ctypedef int (*launch_ex_fn)(const LaunchConfig*, void*, void**, void**) noexcept nogil
# cuEventRecord(event, stream) and cuStreamWaitEvent(stream, event, flags)
ctypedef int (*event_record_fn)(void*, void*) noexcept nogil
ctypedef int (*wait_event_fn)(void*, void*, unsigned int) noexcept nogil
# cuStreamIsCapturing(stream, &status)
ctypedef int (*is_capturing_fn)(void*, int*) noexcept nogil

cdef enum:
    PROGRAMMATIC_STREAM_SERIALIZATION = 6  # CU_LAUNCH_ATTRIBUTE_..., CUDA 11.8 and newer

# What the path needs from CuPy, the driver and the package, set once by bind().
cdef launch_fn _launch = NULL
cdef coop_fn _coop = NULL
cdef launch_ex_fn _launch_ex = NULL
cdef event_record_fn _event_record = NULL
cdef wait_event_fn _wait_event = NULL
cdef is_capturing_fn _is_capturing = NULL
cdef LaunchAttribute _pdl_attr
cdef bint _pdl = False  # launch with programmatic dependent launch where an entry may
cdef object _ndarray = None
cdef object _get_device = None
cdef object _get_stream = None
cdef list _generation = None
cdef object _options = None


def bind(ndarray, get_device, get_stream, size_t launch, size_t coop, size_t launch_ex,
         list generation, options, size_t event_record, size_t wait_event,
         size_t is_capturing):
    """Set CuPy's array type, its current device and stream queries, the driver's
    ``cuLaunchKernel``, ``cuLaunchCooperativeKernel`` and ``cuLaunchKernelEx`` (addresses;
    0 where the driver has no ``cuLaunchKernelEx``), the plans' generation (a one-item list),
    the options module (its ``KEY``), and the driver's ``cuEventRecord``,
    ``cuStreamWaitEvent`` and ``cuStreamIsCapturing``."""
    global _launch, _coop, _launch_ex, _ndarray, _get_device, _get_stream, _generation
    global _options, _event_record, _wait_event, _is_capturing
    _ndarray, _get_device, _get_stream = ndarray, get_device, get_stream
    _launch, _coop, _launch_ex = <launch_fn>launch, <coop_fn>coop, <launch_ex_fn>launch_ex
    _event_record, _wait_event = <event_record_fn>event_record, <wait_event_fn>wait_event
    _is_capturing = <is_capturing_fn>is_capturing
    _generation, _options = generation, options
    _pdl_attr.id = PROGRAMMATIC_STREAM_SERIALIZATION
    (<int*>_pdl_attr.value)[0] = 1


def set_pdl(bint on):
    """Launch the entries that allow it (Hopper and newer) with programmatic dependent
    launch: the GPU takes in each launch while the kernel before it on the stream runs,
    and every kernel waits for that one (``griddepcontrol.wait``, its first statement)
    before it reads or writes memory. Takes effect after :func:`bind` (which sets it from
    ``fastcall.PDL``). Returns the setting before."""
    global _pdl
    before = _pdl
    _pdl = on and _launch_ex != NULL
    return before


# -- output arrays -------------------------------------------------------------------------

cdef enum:
    MAX_KEEP = 8


cdef inline int _counts(list arrays, Py_ssize_t i, Py_ssize_t* c) except -1:
    """References to array ``i``, to its memory pointer and to its memory, each counted
    with the one this function holds."""
    cdef object a = arrays[i]
    cdef object d = a.data
    cdef object m = d.mem
    c[0] = Py_REFCNT(a)
    c[1] = Py_REFCNT(d)
    c[2] = Py_REFCNT(m)
    return 0


cdef class Outputs:
    """Arrays of one shape and dtype for a runner's results, each handed out again once
    nothing outside this cache holds it (see :mod:`.outputs`)."""

    cdef readonly tuple shape
    cdef readonly object dtype
    cdef readonly bint keep
    cdef object _alloc
    cdef int _max, _n, _next
    cdef list _arrays
    cdef Py_ssize_t _streams[MAX_KEEP]
    cdef Py_ssize_t _free[MAX_KEEP][3]

    def __init__(self, tuple shape, dtype, int keep, Py_ssize_t keep_bytes, alloc):
        """``keep`` arrays at most, each of at most ``keep_bytes``; ``alloc(shape, dtype)``
        makes one (``cupy.ndarray``)."""
        cdef Py_ssize_t size = 1
        for s in shape:
            size *= s
        self.shape, self.dtype, self._alloc = shape, dtype, alloc
        self._max = min(max(keep, 0), MAX_KEEP)
        self.keep = self._max > 0 and 0 < size * dtype.itemsize <= keep_bytes
        self._arrays = []
        self._n = self._next = 0

    cpdef take(self, Py_ssize_t stream):
        """An array that no one else holds, allocated or reused; reused only on the stream
        it was last handed out on."""
        cdef Py_ssize_t c[3]
        cdef Py_ssize_t i
        for i in range(self._n):
            if self._streams[i] != stream:
                continue
            _counts(self._arrays, i, c)
            if c[0] == self._free[i][0] and c[1] == self._free[i][1] and (
                    c[2] == self._free[i][2]):
                if self._arrays[i].shape != self.shape:  # reshaped in place by its owner
                    self._fresh(i, stream)
                return self._arrays[i]
        if not self.keep:
            return self._alloc(self.shape, self.dtype)
        if self._n < self._max:
            i = self._n
            self._arrays.append(None)
            self._n += 1
        else:  # every kept array is in use: replace one, round robin
            i = self._next
            self._next = (i + 1) % self._max
        self._fresh(i, stream)
        return self._arrays[i]

    cdef void _fresh(self, Py_ssize_t i, Py_ssize_t stream) except *:
        self._arrays[i] = self._alloc(self.shape, self.dtype)
        self._streams[i] = stream
        _counts(self._arrays, i, self._free[i])

    def __len__(self):
        return self._n


# -- calls ---------------------------------------------------------------------------------

# Where a written parameter's value comes from.
cdef enum:
    SRC_A_PTR = 0  # X (dsd) or A (sdd): address
    SRC_A_LD       # its row stride, in elements
    SRC_B_PTR      # B (sdd): address
    SRC_B_LD
    SRC_Y_PTR      # the output: address
    SRC_Y_LD
    SRC_ONE        # alpha
    SRC_ZERO       # beta
    SRC_W_PTR      # W's blocks (dsd): address
    N_SRC

SOURCES = {"a": SRC_A_PTR, "lda": SRC_A_LD, "b": SRC_B_PTR, "ldb": SRC_B_LD,
           "y": SRC_Y_PTR, "ldy": SRC_Y_LD, "one": SRC_ONE, "zero": SRC_ZERO,
           "w": SRC_W_PTR}

# The parameter's C type, the launch's signature letters.
cdef enum:
    K_U64 = 0
    K_I32
    K_I64
    K_F32
    K_F64

KINDS = {"p": K_U64, "i": K_I32, "l": K_I64, "f": K_F32, "d": K_F64}

cdef enum:
    MAX_WRITES = 16
    MAX_LAUNCHES = 2

cdef struct Write:
    char* addr
    int src
    int kind

cdef struct LaunchRec:
    void* fn
    unsigned int grid[3]
    unsigned int block[3]
    unsigned int smem
    void** params
    bint coop


cdef inline bint _same(object key, Py_ssize_t a, Py_ssize_t b):
    """``key == (a, b)`` for the runner's kept (address, row stride) keys."""
    if type(key) is not tuple or len(<tuple>key) != 2:
        return False
    return (<tuple>key)[0] == a and (<tuple>key)[1] == b


cdef inline int _launch_rec(LaunchRec* r, Py_ssize_t stream, bint pdl) noexcept nogil:
    """Launch ``r`` on ``stream`` (with programmatic dependent launch where ``pdl``): the
    driver's result."""
    cdef LaunchConfig cfg
    if r.coop:
        return _coop(r.fn, r.grid[0], r.grid[1], r.grid[2], r.block[0], r.block[1],
                     r.block[2], r.smem, <void*>stream, r.params)
    if pdl:
        cfg.grid_x, cfg.grid_y, cfg.grid_z = r.grid[0], r.grid[1], r.grid[2]
        cfg.block_x, cfg.block_y = r.block[0], r.block[1]
        cfg.block_z, cfg.smem = r.block[2], r.smem
        cfg.stream, cfg.attrs, cfg.n_attrs = <void*>stream, &_pdl_attr, 1
        return _launch_ex(&cfg, r.fn, r.params, NULL)
    return _launch(r.fn, r.grid[0], r.grid[1], r.grid[2], r.block[0], r.block[1],
                   r.block[2], r.smem, <void*>stream, r.params, NULL)


cdef inline bint _same3(object key, Py_ssize_t a, Py_ssize_t b, Py_ssize_t c):
    """``key == (a, b, c)`` for the sdd runner's kept (address, row stride, rows) keys."""
    if type(key) is not tuple or len(<tuple>key) != 3:
        return False
    return (<tuple>key)[0] == a and (<tuple>key)[1] == b and (<tuple>key)[2] == c


cdef inline bint _overlap(Py_ssize_t a, Py_ssize_t a0, Py_ssize_t a_rows, Py_ssize_t a_bytes,
                          Py_ssize_t b, Py_ssize_t b0, Py_ssize_t b_rows, Py_ssize_t b_bytes):
    """Whether two arrays (at ``a`` and ``b``: ``a_rows`` rows ``a0`` bytes apart of
    ``a_bytes`` each, and likewise for ``b``) may overlap: their bounds meet
    (:func:`cubsparse._arrays.may_share_memory`)."""
    cdef Py_ssize_t alo = a, ahi = a, blo = b, bhi = b
    if a0 < 0:
        alo += (a_rows - 1) * a0
    else:
        ahi += (a_rows - 1) * a0
    if b0 < 0:
        blo += (b_rows - 1) * b0
    else:
        bhi += (b_rows - 1) * b0
    return alo < bhi + b_bytes and blo < ahi + a_bytes


cdef inline Py_ssize_t _map_rows(Py_ssize_t rows, Py_ssize_t cols, Py_ssize_t row_bytes,
                                 Py_ssize_t it):
    """:func:`.run._map_rows` (-1 for None)."""
    if rows <= 1:
        return max(16, (cols * it + 15) // 16 * 16)  # (C division: no negative operands)
    return row_bytes if row_bytes >= cols * it else -1


cdef class Entry:
    """One runner's steady-state call: its guards, the parameters a call writes and its
    launches. Made by :func:`.fastcall.arm_dsd` and :func:`.fastcall.arm_sdd`."""

    cdef object runner
    cdef tuple launches  # the runner's Launch objects: a call checks they are still its own
                         # (and they keep what the raw addresses point into alive)
    cdef tuple names     # the runner's attributes holding them
    cdef Outputs outputs
    cdef object dtype
    cdef object structure  # the matrix's layout the runner was planned for
    cdef Py_ssize_t it, dev, cols, b_cols, inner
    cdef Py_ssize_t width, out_align  # dsd: Y's columns, the alignment an `out` needs
    cdef Py_ssize_t w_bytes          # dsd: W's blocks, which an `out` must not overlap
    cdef unsigned long thread
    cdef object generation, options
    cdef int tf32        # -1: not float32; else the TF32 setting the plan was made for
    cdef bint tma        # the X map, and the tile counter's stream, read from the runner
    cdef bint ymap       # the output's map too
    cdef bint split      # a workspace and counters of the runner's split stream
    cdef bint wcopy      # dsd: W's blocks copied (transposed or into panels) by the first
                         # launch into the layout's buffer for the runner's `_wt_stream`
    cdef object sides    # sdd in two parts beside each other: the side streams by (device,
                         # thread, caller stream) (`run._SIDE_STREAMS`), else None
    cdef void* fork      # and the runner's events that order the side launch and join it
    cdef void* join
    cdef bint pdl        # the device takes programmatic dependent launch
    cdef int nw, nl
    cdef Write writes[MAX_WRITES]
    cdef LaunchRec rec[MAX_LAUNCHES]

    def __init__(self, runner, tuple names, list writes, outputs, dtype, structure,
                 Py_ssize_t dev, Py_ssize_t cols, Py_ssize_t b_cols, Py_ssize_t inner,
                 int tf32, bint tma, bint ymap, bint split, Py_ssize_t width=0,
                 Py_ssize_t out_align=0, Py_ssize_t w_bytes=0, bint pdl=False,
                 bint wcopy=False, beside=None):
        """``names``: the runner's attributes holding its launches (:class:`.launch.Launch`);
        ``writes``: ``(address, kind letter, source name)``; ``beside``: ``(side streams,
        fork event, join event)`` where the second launch runs on a side stream
        (:class:`.run._Beside`)."""
        if len(writes) > MAX_WRITES or len(names) > MAX_LAUNCHES or not names:
            raise ValueError(f"{len(writes)} writes and {len(names)} launches: at most "
                             f"{MAX_WRITES} and 1-{MAX_LAUNCHES}")
        self.runner, self.names = runner, names
        self.launches = tuple(getattr(runner, n) for n in names)
        self.outputs, self.dtype, self.structure = outputs, dtype, structure
        self.it, self.dev = dtype.itemsize, dev
        self.cols, self.b_cols, self.inner = cols, b_cols, inner
        # (an `out` is taken only where its alignment is known: none without it)
        self.width, self.out_align, self.w_bytes = width, out_align, w_bytes
        self.thread = PyThread_get_thread_ident()
        self.generation = _generation[0]
        self.options = _options.KEY
        self.tf32, self.tma, self.ymap, self.split = tf32, tma, ymap, split
        self.pdl, self.wcopy = pdl, wcopy
        self.sides = None
        if beside is not None:
            if len(names) != 2 or _event_record == NULL or _wait_event == NULL:
                raise ValueError("a launch beside another needs two launches and the "
                                 "driver's event calls")
            self.sides = beside[0]
            self.fork, self.join = <void*><size_t>beside[1], <void*><size_t>beside[2]
        self.nw = len(writes)
        for i, (addr, kind, src) in enumerate(writes):
            self.writes[i].addr = <char*><size_t>addr
            self.writes[i].kind = KINDS[kind]
            self.writes[i].src = SOURCES[src]
        self.nl = len(names)
        for i, launch in enumerate(self.launches):
            fn, grid, block, smem, params, coop = launch.native()
            self.rec[i].fn = <void*><size_t>fn
            for j in range(3):
                self.rec[i].grid[j] = grid[j]
                self.rec[i].block[j] = block[j]
            self.rec[i].smem = smem
            self.rec[i].params = <void**><size_t>params
            self.rec[i].coop = coop

    def current(self, runner):
        """Whether this entry is ``runner``'s and still in force (:meth:`_unchanged`)."""
        return runner is self.runner and self._unchanged()

    cdef inline bint _unchanged(self):
        """The plans' generation and the options key are those the entry was made under
        (by identity: an entry made under an equal, earlier options key is made again),
        and the runner's launches are still the entry's."""
        if _generation[0] != self.generation or _options.KEY is not self.options:
            return False
        cdef Py_ssize_t i
        r = self.runner
        for i in range(len(self.names)):
            if getattr(r, self.names[i]) is not self.launches[i]:
                return False
        return True

    cdef inline bint _valid(self, Py_ssize_t dev):
        """The guards a call shares: device, thread, TF32, and :meth:`_unchanged`."""
        cdef const char* env
        if dev != self.dev or PyThread_get_thread_ident() != self.thread:
            return False
        if self.tf32 >= 0:
            env = getenv("CUPY_TF32")
            if (env != NULL and env[0] == b"1" and env[1] == 0) != self.tf32:
                return False
        return self._unchanged()

    cdef object _run(self, Py_ssize_t* vals, Py_ssize_t stream, Py_ssize_t side=0):
        """Write the parameters from ``vals`` and launch (the second launch on ``side``
        where the entry runs it beside the first); False where the driver refused (the
        Python path then repeats the call and reports or recovers)."""
        cdef int i
        cdef Write* w
        cdef int res = 0
        cdef int nl = self.nl
        cdef LaunchRec* recs = self.rec
        cdef bint pdl = _pdl and self.pdl
        for i in range(self.nw):
            w = &self.writes[i]
            if w.kind == K_U64:
                (<uint64_t*>w.addr)[0] = <uint64_t>vals[w.src]
            elif w.kind == K_I32:
                (<int32_t*>w.addr)[0] = <int32_t>vals[w.src]
            elif w.kind == K_I64:
                (<int64_t*>w.addr)[0] = <int64_t>vals[w.src]
            elif w.kind == K_F32:
                (<float*>w.addr)[0] = <float>vals[w.src]
            else:
                (<double*>w.addr)[0] = <double>vals[w.src]
        # without the GIL, as CuPy's launches: a full launch queue blocks only this thread
        with nogil:
            if side:  # as run._Beside: fork, the first launch, the side one, join
                res = _event_record(self.fork, <void*>stream)
                if res == 0:
                    res = _launch_rec(&recs[0], stream, pdl)
                if res == 0:
                    res = _wait_event(<void*>side, self.fork, 0)
                if res == 0:  # (after an event wait: no dependent launch)
                    res = _launch_rec(&recs[1], side, False)
                if res == 0:
                    res = _event_record(self.join, <void*>side)
                if res == 0:
                    res = _wait_event(<void*>stream, self.join, 0)
            else:
                for i in range(nl):
                    res = _launch_rec(&recs[i], stream, pdl)
                    if res != 0:
                        break
        return res == 0

    cdef object dsd(self, x, tuple shape, w, out):
        """``x @ op(W)`` with ``w`` the matrix (the base of a transposed view), into
        ``out`` where given (a CuPy array), or None."""
        cdef Py_ssize_t vals[N_SRC]
        cdef Py_ssize_t n = shape[0], cols = shape[1], it = self.it
        cdef Py_ssize_t ptr, s0, s1, xrow, stream, ys0, wptr, yptr
        if cols != self.cols or x.dtype is not self.dtype:
            return None
        # W's values may have been rebound to other storage (`_init` of a reused matrix):
        # its address is written on every call, as the Python path does, and its device
        # and layout checked
        wdata = w._data
        if w._structure is not self.structure or type(wdata) is not _ndarray or (
                wdata.dtype is not self.dtype):
            return None
        wmem = wdata.data
        data = x.data
        if not self._valid(_get_device()) or data.device_id != self.dev or (
                wmem.device_id != self.dev):
            return None
        wptr = wmem.ptr
        ptr = data.ptr
        st = x.strides
        s0, s1 = st[0], st[1]
        if (ptr | s0) & 15 or (s1 != it and cols > 1):
            return None
        stream = _get_stream().ptr
        r = self.runner
        # A copy of W's blocks goes to the layout's buffer for one stream, which the runner's
        # launches (and W's map) point at: this call's stream, or the Python path; and a
        # call being captured copies into a buffer of its graph's own (the Python path)
        cdef int capturing = 1
        if self.wcopy and (r._wt_stream != stream or _is_capturing == NULL or _is_capturing(
                <void*>stream, &capturing) != 0 or capturing != 0):
            return None
        if self.tma:  # the maps of X and W kept by the runner must be these arrays'
            xrow = _map_rows(n, cols, s0, it)
            if xrow < 0 or not _same(r._xkey, ptr, xrow) or r._ctr_stream != stream or (
                    not self.wcopy and r._wptr != wptr):
                return None
        if self.split and r._split_stream != stream:
            return None
        if out is None:
            y = self.outputs.take(stream)
            yptr, ys0 = y.data.ptr, y.strides[0]
        else:  # the checks of the Python path (`run_dsd.dsd_eager`)
            y = out
            if self.out_align <= 0 or y.dtype is not self.dtype or (
                    y.shape != (n, self.width)):
                return None
            ymem = y.data
            yptr, st = ymem.ptr, y.strides
            ys0 = st[0]
            if ymem.device_id != self.dev or st[1] != it or yptr % self.out_align or (
                    ys0 % self.out_align):
                return None
            # rows apart (n > 1: a row stride of at least a row), clear of X and of W
            if n > 1 and -self.width * it < ys0 < self.width * it:
                return None
            if _overlap(ptr, s0, n, cols * it, yptr, ys0, n, self.width * it) or _overlap(
                    wptr, 0, 1, self.w_bytes, yptr, ys0, n, self.width * it):
                return None
        vals[SRC_Y_PTR] = yptr
        vals[SRC_Y_LD] = ys0 // it
        if self.ymap and not _same(r._ykey, yptr, ys0):  # the map the TMA store writes by
            return None
        vals[SRC_A_PTR], vals[SRC_A_LD] = ptr, s0 // it
        vals[SRC_B_PTR] = vals[SRC_B_LD] = 0
        vals[SRC_ONE], vals[SRC_ZERO], vals[SRC_W_PTR] = 1, 0, wptr
        return y if self._run(vals, stream) else None

    cdef object sdd(self, a, b, tuple sa, tuple sb, like, out):
        """``a @ b`` on W's blocks for ``a = x.T`` and ``b = dy`` (the layer gradient,
        both read in place), into ``out`` (a CuPy array of W's blocks) where given, or
        None."""
        cdef Py_ssize_t vals[N_SRC]
        cdef Py_ssize_t it = self.it, stream, ap, bp, a0, a1, b0, b1, xrow, drow, side
        if sa[0] != self.cols or sb[1] != self.b_cols or sb[0] != self.inner:
            return None
        if a.dtype is not self.dtype or b.dtype is not self.dtype or (
                like._structure is not self.structure):
            return None
        ad, bd = a.data, b.data
        if not self._valid(_get_device()) or ad.device_id != self.dev or (
                bd.device_id != self.dev):
            return None
        ap, bp = ad.ptr, bd.ptr
        st = a.strides
        a0, a1 = st[0], st[1]
        st = b.strides
        b0, b1 = st[0], st[1]
        if a0 != it or b1 != it or (a1 | b0 | ap | bp) & 15:
            return None
        stream = _get_stream().ptr
        r = self.runner
        if self.tma:  # the maps of X and dY kept by the runner must be these arrays'
            xrow = _map_rows(self.inner, self.cols, a1, it)
            drow = _map_rows(self.inner, self.b_cols, b0, it)
            if xrow < 0 or drow < 0:
                return None
            maps = r._maps
            if not (_same3(maps[0], ap, xrow, self.inner) and
                    _same3(maps[1], bp, drow, self.inner)):
                return None
        if self.split and r._split_stream != stream:
            return None
        side = 0
        if self.sides is not None:  # the caller stream's side stream, where made already
            s = self.sides.get((self.dev, self.thread, stream))
            if s is None:
                return None
            side = s
        if out is None:
            y = self.outputs.take(stream)
        else:  # W's blocks as the matrix holds them: contiguous, 16-byte aligned
            y = out
            if y.dtype is not self.dtype or y.shape != self.outputs.shape:
                return None
            ymem = y.data
            st = y.strides
            if ymem.device_id != self.dev or ymem.ptr & 15 or st[2] != it or (
                    st[1] != y.shape[2] * it or st[0] != y.shape[1] * st[1]):
                return None
        vals[SRC_A_PTR], vals[SRC_A_LD], vals[SRC_B_PTR], vals[SRC_B_LD] = (
            ap, a1 // it, bp, b0 // it)
        vals[SRC_Y_PTR], vals[SRC_Y_LD] = y.data.ptr, 0
        vals[SRC_ONE], vals[SRC_ZERO], vals[SRC_W_PTR] = 1, 0, 0
        return y if self._run(vals, stream, side) else None


cdef class Table:
    """A matrix's entries: ``dsd`` ones keyed by (rows of X, transposed), ``sdd`` ones by
    the inner dimension. Kept on the matrix (its transposed view uses its base's)."""

    cdef dict _dsd, _sdd
    cdef readonly int limit
    cdef readonly Py_ssize_t hits  # calls made here (tests, tools)

    def __init__(self, int limit):
        self._dsd, self._sdd, self.limit = {}, {}, limit
        self.hits = 0

    def get(self, str op, Py_ssize_t key):
        return (self._dsd if op == "dsd" else self._sdd).get(key)

    def set(self, str op, Py_ssize_t key, Entry entry):
        d = self._dsd if op == "dsd" else self._sdd
        if key not in d and len(d) >= self.limit:
            d.clear()
        d[key] = entry

    def clear(self):
        self._dsd.clear()
        self._sdd.clear()

    def __len__(self):
        return len(self._dsd) + len(self._sdd)

    def dsd(self, x, w, bint trans, out=None):
        """``x @ W`` (``x @ W.T`` for ``trans``) through an entry, into ``out`` where given,
        or None; ``w`` is the matrix that holds this table (the base of a transposed
        view)."""
        if _launch == NULL or type(x) is not _ndarray or (
                out is not None and type(out) is not _ndarray):
            return None
        shape = x.shape
        if len(<tuple>shape) != 2:
            return None
        e = self._dsd.get(((<Py_ssize_t>shape[0]) << 1) | trans)
        if e is None:
            return None
        y = (<Entry>e).dsd(x, shape, w, out)
        if y is not None:
            self.hits += 1
        return y

    def sdd(self, a, b, like, out=None):
        """``a @ b`` on the blocks of ``like`` (the matrix that holds this table; the layer
        gradient ``x.T @ dy``) through an entry, into ``out`` (a CuPy array of ``like``'s
        blocks) where given: the result's blocks, or None."""
        if _launch == NULL or type(a) is not _ndarray or type(b) is not _ndarray or (
                out is not None and type(out) is not _ndarray):
            return None
        sa, sb = a.shape, b.shape
        if len(<tuple>sa) != 2 or len(<tuple>sb) != 2 or sa[1] != sb[0]:
            return None
        e = self._sdd.get(sa[1])
        if e is None:
            return None
        y = (<Entry>e).sdd(a, b, sa, sb, like, out)
        if y is not None:
            self.hits += 1
        return y
