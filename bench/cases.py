"""Benchmark cases: the sweeps, their filters, layouts, and memory estimates.

A *case* is one (N, C, K, b, density, dtype, layout) point. Every case is measured for
each selected op, all on the same data, so a case becomes up to three result rows:

``xw``
    ``Y = X @ W`` with X dense (N, C) and W block-sparse (C, K) -- the layer forward.
``dywt``
    ``dX = dY @ W.T`` with dY dense (N, K) -- the gradient of the input.
``sdd``
    ``dW = (X.T @ dY)`` sampled on W's blocks -- the weight gradient (SDDMM).

Every op does the same useful work, ``2 * N * C * K * density`` flops, and must move at
least the non-zero blocks of W plus both dense operands once.
"""

from __future__ import annotations

import itertools
import math
import zlib
from dataclasses import dataclass, field

import numpy as np

#: Op id -> human label. The ids are what ``--ops`` takes and what rows record.
OPS = {
    "xw": "X @ W",
    "dywt": "dY @ W.T",
    "sdd": "sampled X.T @ dY",
}
OP_ALIASES = {
    "fwd": "xw", "forward": "xw", "matmul": "xw",
    "dx": "dywt", "bwd-data": "dywt", "bwd_data": "dywt",
    "dw": "sdd", "bwd-weight": "sdd", "bwd_weight": "sdd", "sddmm": "sdd",
    "sampled": "sdd", "sampled_matmul": "sdd",
}

#: Canonical dtype names and the short forms used in tables and on the command line.
DTYPES = ("float16", "bfloat16", "float32", "float64")
DTYPE_SHORT = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32", "float64": "fp64"}
DTYPE_ALIASES = {v: k for k, v in DTYPE_SHORT.items()} | {
    "half": "float16", "f16": "float16", "f32": "float32", "f64": "float64",
    "single": "float32", "double": "float64", "bfloat": "bfloat16",
}
ITEMSIZE = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}

LAYOUTS = ("random", "ba", "ws", "banded")
#: Three-letter names of the layouts for the tables.
LAYOUT_SHORT = {"random": "rnd", "ba": "ba", "ws": "ws", "banded": "bnd"}
LAYOUT_ALIASES = {"uniform": "random", "barabasi_albert": "ba", "barabasi-albert": "ba",
                  "powerlaw": "ba", "power-law": "ba", "watts_strogatz": "ws",
                  "watts-strogatz": "ws", "small_world": "ws", "small-world": "ws",
                  "band": "banded"}
WS_REWIRE = 0.1  #: rewiring probability of the Watts-Strogatz layouts (small-world regime)
_SQUARE = {"ba": "Barabasi-Albert", "ws": "Watts-Strogatz", "banded": "banded"}

BLOCK_SIZES = (8, 16, 32, 64, 128)


@dataclass(frozen=True)
class Case:
    """One point of a sweep. ``density`` is the target; rows record the actual one."""

    n: int
    c: int
    k: int
    b: int
    density: float
    dtype: str
    layout: str = "random"

    @property
    def key(self) -> str:
        """Stable identifier, used for seeds, ``--resume`` and skip records."""
        return (f"{DTYPE_SHORT[self.dtype]}-N{self.n}-C{self.c}-K{self.k}-b{self.b}"
                f"-d{self.density:g}-{self.layout}")

    @property
    def seed(self) -> int:
        """Per-case seed: fresh data for every case, yet reproducible run to run."""
        return zlib.crc32(self.key.encode())

    @property
    def regime(self) -> str:
        """Which performance target applies: compute-bound, memory-bound or neither."""
        if min(self.n, self.c, self.k) >= 2048:
            return "compute"
        if self.n <= 128:
            return "memory"
        return "other"

    @property
    def itemsize(self) -> int:
        return ITEMSIZE[self.dtype]

    def useful_flops(self, density: float | None = None) -> float:
        d = self.density if density is None else density
        return 2.0 * self.n * self.c * self.k * d

    def min_bytes(self, nnzb: int) -> int:
        """Fewest bytes any op must move: W's non-zero blocks and both dense operands once.

        The three ops touch the same three arrays (the result of ``sdd`` is the non-zero
        blocks of dW, the same size as W's), so one formula serves all of them.
        """
        s = self.itemsize
        return s * (nnzb * self.b * self.b + self.n * self.c + self.n * self.k)

    def skip_reason(self) -> str | None:
        """Why this case cannot be run at all (independent of the machine), or None."""
        if self.c % self.b or self.k % self.b:
            return f"C={self.c}, K={self.k} not multiples of the block size {self.b}"
        if self.layout in _SQUARE:
            name = _SQUARE[self.layout]
            if self.c != self.k:
                return f"{name} layouts are square: needs C == K"
            if self.density >= 1.0:
                return (f"{name} at density 1.0 is the full layout, identical to the "
                        "uniform layout at density 1.0")
        if not 0.0 < self.density <= 1.0:
            return f"density {self.density} outside (0, 1]"
        return None

    def footprint_bytes(self, with_peers: bool = True) -> int:
        """A generous estimate of the device memory one input set needs.

        Counts the fp32 master copies, the per-library operands, the dense W the dense
        and CSR peers need, the fp64 reference of the largest product and the outputs.
        Used only to skip cases that cannot fit; being generous costs nothing.
        """
        s = self.itemsize
        nc, nk, ck = self.n * self.c, self.n * self.k, self.c * self.k
        nnz = ck * self.density
        total = (nc + nk) * (4 + 2 * s)          # fp32 masters + cubsparse and torch copies
        total += nnz * (4 + s)                   # W master + cubsparse values
        if with_peers:
            total += ck * s                      # dense W
            total += nnz * (2 * s + 12)          # torch BSR (W and W.T), CSR values + indices
        ref = max(nc, nk, ck)
        total += 8 * (nc + nk + ck + 2 * ref)    # fp64 operands and reference, error temp
        total += 3 * s * max(nc, nk, ck)         # outputs alive at once
        return int(total)


@dataclass
class Sweep:
    """A rectangular block of cases: the product of its axes."""

    n: tuple[int, ...]
    ck: tuple[int, ...]
    b: tuple[int, ...]
    density: tuple[float, ...]
    dtype: tuple[str, ...]
    layout: tuple[str, ...] = ("random",)

    def cases(self) -> list[Case]:
        out = []
        for layout, dtype, n, ck, b, d in itertools.product(
                self.layout, self.dtype, self.n, self.ck, self.b, self.density):
            out.append(Case(n=n, c=ck, k=ck, b=b, density=d, dtype=dtype, layout=layout))
        return out


@dataclass
class Preset:
    """A named list of sweeps, with a note for the documentation and ``--list``.

    ``contenders`` names the contenders the preset times (None: all of them; the others
    are recorded in each row as not selected), and ``target_ms`` the device time one
    measurement aims for when ``--target-ms`` is not given (None: the policy default).
    """

    name: str
    sweeps: list[Sweep] = field(default_factory=list)
    note: str = ""
    contenders: tuple[str, ...] | None = None
    target_ms: float | None = None


# The quick preset was sized for ~4 minutes of H100 time including imports, the device
# ceilings and Triton compiles of the peers, before host, sync and graph timings of every
# call were added (up to ~3 x target_ms more per measurement). Compute-bound: the 4096^3
# shape of the targets table at three densities and four block sizes in fp16 and fp32.
# One bf16 and one Barabasi-Albert point so that every code path runs. Memory-bound: the
# small-N rows of the table (N=32, C=K=12288, b=32, d=0.02 and 0.1).
QUICK_CUDA = Preset("quick", [
    Sweep(n=(4096,), ck=(4096,), b=(16, 32, 64, 128), density=(0.05, 0.25, 1.0),
          dtype=("float16", "float32")),
    Sweep(n=(4096,), ck=(4096,), b=(64,), density=(0.25,), dtype=("bfloat16",)),
    Sweep(n=(4096,), ck=(4096,), b=(32,), density=(0.25,), dtype=("float16",),
          layout=("ba",)),
    Sweep(n=(32,), ck=(12288,), b=(32,), density=(0.02, 0.1), dtype=("float16", "float32")),
], note="30 cases x 3 ops: N=C=K=4096 b{16,32,64,128} d{0.05,0.25,1} fp16/fp32, "
        "one bf16 and one Barabasi-Albert point, N=32 C=K=12288 b32 d{0.02,0.1} fp16/fp32")

FULL_CUDA = Preset("full", [
    Sweep(n=(32, 128, 4096, 16384), ck=(4096, 8192, 12288), b=BLOCK_SIZES,
          density=(0.02, 0.05, 0.1, 0.25, 0.5, 1.0),
          dtype=("float16", "bfloat16", "float32"), layout=("random", "ba")),
], note="the targets' sweep: N{32,128,4096,16384} x C=K{4096,8192,12288} x "
        "b{8..128} x d{0.02..1} x fp16/bf16/fp32 x uniform/Barabasi-Albert")

# The eager preset answers "how fast is one call from a Python loop": small N, where the
# host's cost of issuing a call is of the order of the device time, at three weight sizes.
# Only the peers a user would call instead (dense cuBLAS through CuPy and torch, torch's
# BSR) are timed, and each measurement aims for 20 ms rather than 50, so that 48 cases x
# 3 ops with four timings per contender stay near three minutes of H100 time.
EAGER_CONTENDERS = ("cubsparse", "dense_cupy", "dense_torch", "torch_bsr")
EAGER_CUDA = Preset("eager", [
    Sweep(n=(1, 32, 128), ck=(1024, 4096, 12288), b=(32, 64), density=(0.1,),
          dtype=("float16", "float32")),
    Sweep(n=(1, 32, 128), ck=(12288,), b=(32, 64), density=(0.02,),
          dtype=("float16", "float32")),
], note="48 cases x 3 ops, eager timings first: N{1,32,128} x C=K{1024,4096,12288} x "
        "b{32,64} x fp16/fp32, d=0.1 (and d=0.02 at C=K=12288); cubsparse, dense cuBLAS "
        "(CuPy, torch) and torch BSR only", contenders=EAGER_CONTENDERS, target_ms=20.0)

# CPU presets: smoke tests of the harness with NumPy timings; sizes stay tiny.
QUICK_CPU = Preset("quick", [
    Sweep(n=(128,), ck=(128,), b=(16, 32), density=(0.25, 1.0), dtype=("float32", "float16")),
    Sweep(n=(8,), ck=(256,), b=(16,), density=(0.1,), dtype=("float32",)),
    Sweep(n=(64,), ck=(256,), b=(16,), density=(0.25,), dtype=("float32",), layout=("ba",)),
], note="10 tiny cases for a smoke test of the harness on the CPU backend")

FULL_CPU = Preset("full", [
    Sweep(n=(8, 256), ck=(256, 512), b=(8, 16, 32), density=(0.1, 0.5, 1.0),
          dtype=("float32", "float16", "bfloat16"), layout=("random", "ba")),
], note="small CPU sweep; still only a harness test, not a performance measurement")

EAGER_CPU = Preset("eager", [
    Sweep(n=(1, 32), ck=(128, 256), b=(32,), density=(0.25,), dtype=("float32", "float16")),
], note="8 tiny cases of the eager preset's shape (N=1 and 32) for a harness test",
    target_ms=5.0)

SMOKE_CPU = Preset("smoke", [
    Sweep(n=(16,), ck=(64,), b=(16,), density=(0.5,), dtype=("float32",)),
    Sweep(n=(8,), ck=(64,), b=(8,), density=(0.25,), dtype=("float16",), layout=("ba",)),
], note="two cases for bench.smoke()")


def preset(name: str, backend: str) -> Preset:
    """The preset ``name`` ("quick", "full", "eager", "smoke") for ``backend`` ("cuda", "cpu").

    Raises
    ------
    ValueError
        If there is no such preset for that backend.
    """
    table = {("quick", "cuda"): QUICK_CUDA, ("full", "cuda"): FULL_CUDA,
             ("eager", "cuda"): EAGER_CUDA, ("eager", "cpu"): EAGER_CPU,
             ("quick", "cpu"): QUICK_CPU, ("full", "cpu"): FULL_CPU,
             ("smoke", "cpu"): SMOKE_CPU, ("smoke", "cuda"): QUICK_CUDA}
    try:
        return table[(name, backend)]
    except KeyError:
        raise ValueError(f"no preset {name!r} for backend {backend!r}") from None


def build_cases(base: Preset, *, n=None, ck=None, b=None, density=None, dtype=None,
                layout=None) -> list[Case]:
    """Expand a preset, replacing each axis given (non-None) in every sweep.

    Overrides replace rather than intersect so that ``--quick --n 128`` measures the
    quick shapes at N=128. Duplicates created by the replacement are dropped, keeping
    the first occurrence's order.
    """
    seen: dict[str, Case] = {}
    for sw in base.sweeps:
        sw2 = Sweep(
            n=tuple(n) if n else sw.n, ck=tuple(ck) if ck else sw.ck,
            b=tuple(b) if b else sw.b, density=tuple(density) if density else sw.density,
            dtype=tuple(dtype) if dtype else sw.dtype,
            layout=tuple(layout) if layout else sw.layout)
        for case in sw2.cases():
            seen.setdefault(case.key, case)
    return list(seen.values())


# -- layouts -----------------------------------------------------------------------------

def ba_m_for_density(n: int, density: float) -> int:
    """The attachment count m whose Barabasi-Albert layout (with self loops) has ``density``.

    cubsparse's generator starts from a complete graph on m + 1 nodes and adds m edges
    per further node, so nnz = n + 2 * (m n - m (m + 1) / 2); solving that quadratic
    for m gives the value below (m = n - 1 is the complete graph, density 1).
    """
    if n < 2:
        return 1
    a = 2 * n - 1
    disc = max(a * a - 4.0 * (density * n * n - n), 0.0)
    m = round((a - math.sqrt(disc)) / 2)
    return int(min(max(m, 1), n - 1))


def ws_k_for_density(n: int, density: float) -> int:
    """The even lattice degree k whose Watts-Strogatz layout (with self loops, n (k + 1)
    blocks) comes nearest ``density``."""
    k = 2 * round((density * n - 1) / 2)
    top = n - 1 if (n - 1) % 2 == 0 else n - 2
    return int(min(max(k, 0), max(top, 0)))


def band_width_for_density(n: int, density: float) -> int:
    """The width w (off-diagonals each side) whose band layout, n (2 w + 1) - w (w + 1)
    blocks, comes nearest ``density``."""
    target = density * n * n
    return min(range(n), key=lambda w: abs(n * (2 * w + 1) - w * (w + 1) - target))


def _uniform_fallback(rows: int, cols: int, density: float, seed: int) -> np.ndarray:
    """Exact-count uniform layout, used only when cubsparse.layouts cannot be imported."""
    rng = np.random.default_rng(seed)
    total = rows * cols
    count = max(1, min(total, round(density * total)))
    flat = np.zeros(total, dtype=bool)
    flat[rng.choice(total, size=count, replace=False)] = True
    return flat.reshape(rows, cols)


def make_layout(case: Case) -> tuple[np.ndarray, str]:
    """The block layout of ``case`` and a description of the generator that made it.

    Uses ``cubsparse.layouts`` (so the benchmark measures the layouts users get); falls
    back to a local uniform generator only where cubsparse does not import, so that the
    peers can still be measured. Every layout has at least one block.
    """
    rows, cols = case.c // case.b, case.k // case.b
    try:
        from cubsparse import layouts as cl
    except Exception as exc:  # any import failure means "use the fallback"
        cl = None
        why = f"{type(exc).__name__}: {exc}"
    if case.layout == "random":
        if cl is not None and hasattr(cl, "random"):
            lay = np.asarray(cl.random(rows, cols, case.density, seed=case.seed), dtype=bool)
            gen = "cubsparse.layouts.random"
        else:
            lay = _uniform_fallback(rows, cols, case.density, case.seed)
            gen = "bench fallback uniform (cubsparse.layouts unavailable)"
        if not lay.any():  # tiny grids at low density can round to zero blocks
            lay = lay.copy()
            lay[0, 0] = True
            gen += " (+1 block: rounding gave none)"
        return lay, gen
    if case.layout == "ba":
        if cl is None or not hasattr(cl, "barabasi_albert"):
            raise RuntimeError("cubsparse.layouts.barabasi_albert unavailable"
                               + ("" if cl is not None else f" ({why})"))
        m = ba_m_for_density(rows, case.density)
        lay = np.asarray(cl.barabasi_albert(rows, m, seed=case.seed), dtype=bool)
        return lay, f"cubsparse.layouts.barabasi_albert(n={rows}, m={m})"
    if case.layout in ("ws", "banded"):
        if cl is None:
            raise RuntimeError(f"cubsparse.layouts unavailable ({why})")
        if case.layout == "ws":
            k = ws_k_for_density(rows, case.density)
            lay = np.asarray(cl.watts_strogatz(rows, k, WS_REWIRE, seed=case.seed), dtype=bool)
            return lay, f"cubsparse.layouts.watts_strogatz(n={rows}, k={k}, p={WS_REWIRE})"
        w = band_width_for_density(rows, case.density)
        lay = np.asarray(cl.banded(rows, w), dtype=bool)
        return lay, f"cubsparse.layouts.banded(n={rows}, width={w})"
    raise ValueError(f"unknown layout {case.layout!r}; choose from {LAYOUTS}")


def csr_of_layout(layout: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(indptr, indices, rows)`` of a bool layout in row-major (SciPy BSR) order."""
    rows, cols = np.nonzero(layout)
    indptr = np.zeros(layout.shape[0] + 1, dtype=np.int64)
    np.cumsum(np.count_nonzero(layout, axis=1), out=indptr[1:])
    return indptr, cols.astype(np.int64), rows.astype(np.int64)


def transpose_permutation(layout: np.ndarray) -> np.ndarray:
    """For the blocks of ``layout.T`` in row-major order, their index in ``layout``'s order.

    ``data_t = data[perm].transpose(0, 2, 1)`` then holds the blocks of ``W.T``.
    """
    ids = np.full(layout.shape, -1, dtype=np.int64)
    r, c = np.nonzero(layout)
    ids[r, c] = np.arange(r.size)
    return ids.T[np.nonzero(layout.T)]


# -- parsing helpers for the command line ---------------------------------------------

def parse_list(text: str | None, kind, aliases: dict | None = None,
               allowed=None) -> list | None:
    """Parse ``"a,b c"`` into a list, mapping aliases and checking against ``allowed``."""
    if text is None:
        return None
    items = [t for t in text.replace(",", " ").split() if t]
    out = []
    for t in items:
        key = t.lower() if isinstance(t, str) else t
        if aliases and key in aliases:
            key = aliases[key]
        try:
            v = kind(key)
        except ValueError:
            raise ValueError(f"cannot parse {t!r}") from None
        if allowed is not None and v not in allowed:
            raise ValueError(f"{t!r} is not one of {', '.join(map(str, allowed))}")
        out.append(v)
    return out
