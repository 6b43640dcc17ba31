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
