"""Runs one dsd product three times for ncu (scratch)."""
import sys
import cupy as cp
import cubsparse as cs
from bench.cases import Case, make_layout
from cubsparse._cuda import plans
lay_name, b, d = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
lay, _ = make_layout(Case(8192, 8192, 8192, b, d, "float16", layout=lay_name))
w = cs.BlockSparseMatrix.from_layout(lay, b, dtype="float16", seed=2, backend="cuda")
x = cp.random.standard_normal((8192, 8192), dtype=cp.float32).astype("float16")
with plans.override(dense=False, panel=True):
    print(cs.matmul_plan(x, w))
    for _ in range(3):
        cs.matmul(x, w)
cp.cuda.Device().synchronize()
