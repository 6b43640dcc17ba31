"""SASS instructions and registers of every kernel instance of some families at a git
revision against the working tree, without a GPU: what a kernel change does to the code
ptxas emits, before any device time is spent on it.

    python tools/sass_diff.py [--ref HEAD] [--family sdd_wgmma ...] [--dtype float16]
        [--arch sm_90a] [--all]

Compiles each family's instances (``cubsparse._cuda.instances``, one dtype) with nvcc
(``-cubin``, ptxas ``-v``) from the kernels at ``--ref`` and from the working tree's, and
prints per instance the static SASS instruction count and the registers of both, the
spills of either, and whether the two SASS listings are the same instruction for
instruction. Without ``--family`` it takes the families whose source (headers inlined)
differs between the two; ``--all`` lists unchanged instances too. Needs nvcc, and
``cuobjdump`` with ``nvdisasm`` on the PATH or from the wheels
(``pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm``). Counts are static: an
instruction in a loop counts once.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from check_kernels import compile_nvcc, demangler, parse_report  # noqa: E402

from cubsparse._cuda import compile as _compile  # noqa: E402
from cubsparse._cuda import configs as _configs  # noqa: E402
from cubsparse._cuda import instances  # noqa: E402

_FUNCTION = re.compile(r"^\s*Function : (\S+)", re.M)
_INSTR = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(.+?);", re.M)


def sass_by_function(text: str) -> dict[str, list[str]]:
    """Per mangled kernel name, its instructions from ``cuobjdump -sass`` output (the
    addresses and encodings dropped, so two listings compare instruction for
    instruction)."""
    heads = list(_FUNCTION.finditer(text))
    out = {}
    for i, m in enumerate(heads):
        body = text[m.end():heads[i + 1].start() if i + 1 < len(heads) else len(text)]
        out[m.group(1)] = [re.sub(r"\s+", " ", ins).strip() for ins in _INSTR.findall(body)]
    return out


def _tool_path() -> str:
    """PATH with the cuobjdump and nvdisasm of the nvidia wheels, where installed."""
    dirs = []
    try:
        import nvidia

        for root in nvidia.__path__:
            dirs += sorted({str(p.parent) for p in Path(root).glob("*/bin/cuobjdump")})
            dirs += sorted({str(p.parent) for p in Path(root).glob("*/bin/nvdisasm")})
    except ImportError:
        pass
    return os.pathsep.join([*dict.fromkeys(dirs), os.environ.get("PATH", "")])


def kernels_at(ref: str, dest: Path) -> Path:
    """The ``cubsparse/kernels`` folder of revision ``ref``, extracted under ``dest``."""
    tar = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "cubsparse/kernels"],
                         capture_output=True, check=True).stdout
    with tarfile.open(fileobj=BytesIO(tar)) as t:
        if hasattr(tarfile, "data_filter"):  # (Python 3.10.12 and newer)
            t.extractall(dest, filter="data")
        else:
            t.extractall(dest)
    return dest / "cubsparse" / "kernels"


def compile_family(family: str, kernels: str | None, names: list[str], arch: str,
                   env: dict) -> tuple[dict[str, list[str]], dict[str, dict]]:
    """(SASS per mangled name, ptxas report per mangled name) of ``names``."""
    with tempfile.TemporaryDirectory() as tmp:
        cubin = Path(tmp) / "out.cubin"
        ok, log = compile_nvcc("nvcc", family, names, arch, kernels, cubin)
        if not ok:
            raise SystemExit(f"{family} ({kernels or 'working tree'}) does not compile:\n"
                             + log[-3000:])
        sass = subprocess.run(["cuobjdump", "-sass", str(cubin)], capture_output=True,
                              text=True, env=env)
        if sass.returncode or "Function :" not in sass.stdout:
            raise SystemExit("cuobjdump failed (is nvdisasm on the PATH?):\n" + sass.stderr)
    return sass_by_function(sass.stdout), parse_report(log)


def _regs(report: dict, name: str) -> str:
    r = report.get(name, {})
    spill = r.get("spill_st", 0) + r.get("spill_ld", 0)
    return f"{r.get('registers', '?')}" + (f" (spill {r['spill_st']}+{r['spill_ld']} B)"
                                          if spill else "")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ref", default="HEAD")
    ap.add_argument("--family", nargs="*", default=None)
    ap.add_argument("--dtype", default="float16")
    ap.add_argument("--arch", default="sm_90a")
    ap.add_argument("--all", action="store_true", help="list unchanged instances too")
    args = ap.parse_args(argv)
    if shutil.which("nvcc") is None:
        print("no nvcc on the PATH")
        return 1
    env = dict(os.environ, PATH=_tool_path())
    if shutil.which("cuobjdump", path=env["PATH"]) is None:
        print("no cuobjdump: pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm")
        return 1
    demangle = demangler()
    configs = [c for c in instances.all_configs([args.dtype])
               if c.arch in (None, args.arch)]
    with tempfile.TemporaryDirectory() as tmp:
        old_dir = str(kernels_at(args.ref, Path(tmp)))
        families = args.family or [
            f for f in _configs.FAMILIES
            if any(c.family == f for c in configs)
            and _compile.source(f, old_dir) != _compile.source(f)]
        if not families:
            print(f"no family's source differs from {args.ref}'s")
            return 0
        changed = same = 0
        for fam in families:
            names = sorted({c.name for c in configs if c.family == fam})
            old, old_rep = compile_family(fam, old_dir, names, args.arch, env)
            new, new_rep = compile_family(fam, None, names, args.arch, env)
            print(f"{fam}: {len(names)} instance(s), {args.dtype}, {args.arch}, "
                  f"{args.ref} -> working tree")
            for mangled in sorted(set(old) | set(new), key=lambda m: demangle(m) or m):
                a, b = old.get(mangled), new.get(mangled)
                if a == b:
                    same += 1
                    if not args.all:
                        continue
                else:
                    changed += 1
                na = "-" if a is None else len(a)
                nb = "-" if b is None else len(b)
                ratio = f" ({nb / na:.2f}x)" if a and b else ""
                print(f"  {'same   ' if a == b else 'changed'} {na:>6} -> {nb:<6}{ratio:9} "
                      f"regs {_regs(old_rep, mangled)} -> {_regs(new_rep, mangled)}  "
                      f"{(demangle(mangled) or mangled)[:90]}")
        print(f"{changed} instance(s) changed, {same} the same")
    return 0


if __name__ == "__main__":
    sys.exit(main())
