"""The kernel sources (``cubsparse/kernels``): rules every kernel keeps, checked without a GPU.

The compiled call path launches kernels with programmatic dependent launch on Hopper, so
a kernel may be launched before the kernel it depends on has flushed its writes. Each
kernel must therefore wait (``grid_dependency()``, ``griddepcontrol.wait``) before it
touches memory. A test of values cannot see a missing wait, because the GPU starts a
dependent's CTAs only once the kernel before has no CTA left, and its writes are usually
visible by then. So the rule is checked in the source.
"""

from __future__ import annotations

import re
from importlib import resources

import pytest

KERNELS = resources.files("cubsparse") / "kernels"
SOURCES = sorted(p.name for p in KERNELS.iterdir() if p.name.endswith(".cu"))


def _kernels(text: str):
    """``(name, first statement)`` of every ``__global__`` function in ``text``."""
    for m in re.finditer(r"__global__", text):
        body = text.index("{", m.end())
        name = re.findall(r"(\w+)\s*\(", text[m.end():body])[-1]
        first = text[body + 1:].lstrip().split(";", 1)[0]
        yield name, first


@pytest.mark.parametrize("source", SOURCES)
def test_every_kernel_waits_for_the_kernel_before_first(source):
    kernels = list(_kernels((KERNELS / source).read_text()))
    assert kernels, f"{source} defines no kernel"
    late = [name for name, first in kernels if first != "grid_dependency()"]
    assert not late, f"{source}: {late} do not open with grid_dependency()"


def test_the_wait_is_griddepcontrol_and_no_kernel_triggers_early():
    common = (KERNELS / "common.cuh").read_text()
    body = common[common.index("void grid_dependency()"):]
    body = body[:body.index("\n}\n")]
    assert "griddepcontrol.wait" in body
    for p in KERNELS.iterdir():
        if p.name.endswith((".cu", ".cuh")):
            # a trigger would let the next kernel's CTAs hold SMs beside this one
            assert "launch_dependents" not in p.read_text(), p.name


def _check_kernels():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "tools" / "check_kernels.py"
    spec = importlib.util.spec_from_file_location("check_kernels", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_compile_check_counts_the_ctas_registers_hold():
    # What the driver reported on an H200 (116 registers: 2 CTAs of 256 threads), and
    # what ptxas gave the short weight gradient's other tiles.
    ck = _check_kernels()
    assert ck.resident_by_registers(116, 256) == 2
    assert ck.resident_by_registers(122, 128) == 4
    assert ck.resident_by_registers(64, 256) == 4
    assert ck.resident_by_registers(71, 256) == 3
    assert ck.resident_by_registers(32, 1024) == 2
    from cubsparse._cuda.configs import KernelConfig

    planned = KernelConfig("sdd_wgmma", "k<1>", 256, 50 << 10, 0, 1, "sm_90a", 4)
    fits = KernelConfig("sdd_wgmma", "k<2>", 256, 50 << 10, 0, 1, "sm_90a", 2)
    lines = ck.occupancy_report([planned, fits], {"_Z1": {"registers": 116},
                                                  "_Z2": {"registers": 116}},
                                {"_Z1": "k<1>", "_Z2": "k<2>"}.get)
    assert lines == ["  k<1>: planned 4/SM from shared memory, 116 registers x 256 threads "
                     "hold 2"]


def test_sass_diff_reads_cuobjdump_listings():
    import importlib.util
    import sys
    from pathlib import Path

    tools = Path(__file__).resolve().parents[1] / "tools"
    sys.path.insert(0, str(tools))  # (sass_diff imports check_kernels beside it)
    try:
        spec = importlib.util.spec_from_file_location("sass_diff", tools / "sass_diff.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(tools))
    listing = """
        Function : _Z1aPi
        /*0000*/                   LDC R1, c[0x0][0x28] ;       /* 0x00000a00ff017b82 */
                                                                /* 0x000fe20000000800 */
        /*0010*/                   S2R R0, SR_TID.X ;           /* 0x0000000000007919 */
        .......
        Function : _Z1bPi
        /*0000*/                   EXIT ;                       /* 0x000000000000794d */
    """
    got = module.sass_by_function(listing)
    assert got == {"_Z1aPi": ["LDC R1, c[0x0][0x28]", "S2R R0, SR_TID.X"], "_Z1bPi": ["EXIT"]}


def test_source_reads_another_revisions_kernels(tmp_path):
    import shutil

    from cubsparse._cuda import compile as _compile

    shutil.copytree(KERNELS, tmp_path / "kernels")
    assert _compile.source("sdd_wgmma", str(tmp_path / "kernels")) == _compile.source("sdd_wgmma")
    header = tmp_path / "kernels" / "sm90.cuh"
    header.write_text(header.read_text() + "\n// another revision\n")
    other = _compile.source("sdd_wgmma", str(tmp_path / "kernels"))
    assert other != _compile.source("sdd_wgmma")
    assert "// another revision" in other


def test_ab_summary_pairs_each_case_of_both_forms(tmp_path):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "tools" / "ab_summary.py"
    spec = importlib.util.spec_from_file_location("ab_summary", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    decision = ("GPU: NVIDIA H200, copy 4180 GB/s, eager calls: compiled\n"
                " sdd  float16    32  12288   64  0.50      {t:.1f}  0.71     82.9\n"
                "      dense=False: sampled A @ B, ...\n")
    short = ("b=64   C=K=12288  d=0.10 N=1      30.2 MB     {e:.1f}    {t:.1f} 0.62"
             "     20.0    19.0 0.40\n"
             "b=64 candidates: (2, 1, 1, 3, False, 64)  (2, 1, 1, 4, False, 32)\n")
    for form, rnd, t in (("old", 1, 54.6), ("new", 1, 51.6), ("new", 2, 51.5),
                         ("old", 2, 54.4)):
        text = decision.format(t=t) + short.format(e=t + 2, t=t - 1)
        (tmp_path / f"ab_{form}_{rnd}.txt").write_text(text)
    lines = module.summary(tmp_path)
    by_case = {line.split("  old ")[0].strip(): line for line in lines}
    assert set(by_case) == {"sdd float16 N=32 C=K=12288 b=64 d=0.50 value 0 graph",
                            "b=64 C=K=12288 d=0.10 N=1 candidate 0 eager",
                            "b=64 C=K=12288 d=0.10 N=1 candidate 0 graph",
                            "b=64 C=K=12288 d=0.10 N=1 candidate 1 eager",
                            "b=64 C=K=12288 d=0.10 N=1 candidate 1 graph"}
    line = by_case["sdd float16 N=32 C=K=12288 b=64 d=0.50 value 0 graph"]
    assert line.split()[-5:] == ["54.6/54.4", "new", "51.6/51.5", "old/new", "1.056"]
    assert line.endswith(f"old/new {54.4 / 51.5:.3f}")
    assert by_case["b=64 C=K=12288 d=0.10 N=1 candidate 1 graph"].endswith("old/new 1.000")
