"""Compile every cubsparse kernel instantiation without a GPU; fail on any error.

Uses the machine's ``nvcc`` when present, else NVRTC from the ``nvidia-cuda-nvrtc`` wheel
(through ctypes). Reports registers, spills and stack frames per kernel and target, the
persistent kernels whose planned CTAs per SM their registers do not hold on sm_90a, and
exits non-zero on a compile error, on a wgmma wait that ptxas had to inject (warning C7517:
it then waits for every MMA group where the code keeps one in flight), or on a spill when
``--no-spills`` is given.

    python tools/check_kernels.py [--arch sm_80 sm_90a] [--no-spills] [--dtype float16 ...]
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cubsparse._cuda import compile as _compile
from cubsparse._cuda import configs as _configs
from cubsparse._cuda import instances


def _gencode(arch: str) -> list[str]:
    # sm_90a only assembles through the -gencode form (the -arch shorthand also runs a
    # plain sm_90 pass); use it for every target.
    num = arch.removeprefix("sm_")
    return [f"-gencode=arch=compute_{num},code=sm_{num}"]


def compile_nvcc(nvcc: str, family: str, names: list[str], arch: str,
                 kernels: str | None = None, cubin: Path | None = None) -> tuple[bool, str]:
    """Compile ``names`` with nvcc, from the package's kernels or the folder ``kernels``
    (``compile.source``), keeping the cubin at ``cubin`` where given; returns (ok, ptxas
    log)."""
    src = _compile.source(family, kernels)
    refs = ",\n".join(f"  (const void*)&{n}" for n in names)
    src += ("\n// Host-side references force each instantiation.\n"
            f"const void* cubsparse_keep[] = {{\n{refs}\n}};\n")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{family}.cu"
        path.write_text(src)
        cmd = [nvcc, "-cubin", *_gencode(arch), *_compile.compile_options_for_nvcc(),
               "-o", str(cubin or Path(tmp) / "out.cubin"), str(path)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
    return proc.returncode == 0, proc.stdout + proc.stderr


def _load_nvrtc():
    import nvidia  # the nvidia-cuda-nvrtc wheel installs under the nvidia namespace

    for root in nvidia.__path__:
        for lib in sorted(glob.glob(os.path.join(root, "**", "libnvrtc.so*"), recursive=True)):
            if "builtins" not in lib:
                return ctypes.CDLL(lib)
    raise RuntimeError("libnvrtc not found in the nvidia wheels")


def compile_nvrtc(lib, family: str, names: list[str], arch: str) -> tuple[bool, str]:
    prog = ctypes.c_void_p()
    src = _compile.source(family).encode()
    if lib.nvrtcCreateProgram(ctypes.byref(prog), src, f"{family}.cu".encode(), 0, None, None):
        return False, "nvrtcCreateProgram failed"
    for n in names:
        lib.nvrtcAddNameExpression(prog, n.encode())
    opts = [*_compile.COMPILE_OPTIONS, f"--gpu-architecture={arch}", "--ptxas-options=-v"]
    arr = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
    res = lib.nvrtcCompileProgram(prog, len(opts), arr)
    size = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    lib.nvrtcGetProgramLog(prog, log)
    lib.nvrtcDestroyProgram(ctypes.byref(prog))
    return res == 0, log.value.decode(errors="replace")


_FN = re.compile(r"Compiling entry function '(\S+)'|Function properties for (\S+)")
_USED = re.compile(r"Used (\d+) registers")
_SPILL = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")


def parse_report(log: str) -> dict[str, dict]:
    """Per mangled kernel name: registers, stack frame and spill bytes from a ptxas log."""
    out: dict[str, dict] = {}
    cur = None
    for line in log.splitlines():
        m = _FN.search(line)
        if m:
            cur = out.setdefault(m.group(1) or m.group(2), {})
            continue
        if cur is None:
            continue
        if (m := _USED.search(line)):
            cur["registers"] = int(m.group(1))
        if (m := _SPILL.search(line)):
            cur["stack"], cur["spill_st"], cur["spill_ld"] = map(int, m.groups())
    return out


def resident_by_registers(registers: int, threads: int) -> int:
    """CTAs of ``threads`` threads an SM of compute capability 8.0-9.0 holds by registers:
    each warp takes ``registers`` rounded up to 8 a thread (256 a warp at a time), and
    each of the SM's four schedulers 16,384 registers for its warps."""
    per_warp = -(-registers * 32 // 256) * 256
    warps = 4 * (16384 // per_warp)
    return warps // -(-threads // 32)


def occupancy_report(configs, report: dict[str, dict], demangle) -> list[str]:
    """A line for each persistent kernel whose plan counts more CTAs an SM (from shared
    memory) than its registers allow: the grid then runs in waves (the short weight
    gradient's runner cuts it where that pays; the others keep theirs)."""
    regs = {}
    for mangled, r in report.items():
        name = demangle(mangled)
        if name is not None and "registers" in r:
            regs[name] = r["registers"]
    lines = []
    for c in configs:
        if not c.persistent or c.name not in regs:
            continue
        held = min(resident_by_registers(regs[c.name], c.threads), 2048 // c.threads)
        if held < c.persistent:
            lines.append(f"  {c.name}: planned {c.persistent}/SM from shared memory, "
                         f"{regs[c.name]} registers x {c.threads} threads hold {held}")
    return lines


def demangler():
    """Mangled name -> the name expression as the configs write it (``kernel<A,B>``), by
    ``cu++filt`` or ``c++filt``; None where neither is found."""
    tool = shutil.which("cu++filt") or shutil.which("c++filt")
    if tool is None:
        return lambda mangled: None

    def demangle(mangled: str):
        out = subprocess.run([tool, mangled], capture_output=True, text=True).stdout.strip()
        head = out.split("(", 1)[0].removeprefix("void ")
        return head.replace(" ", "") if "<" in head else None

    return demangle


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", nargs="+", default=["sm_80", "sm_90a"])
    ap.add_argument("--dtype", nargs="+", default=None)
    ap.add_argument("--no-spills", action="store_true", help="fail on any register spill")
    ap.add_argument("--compiler", choices=["auto", "nvcc", "nvrtc"], default="auto")
    args = ap.parse_args(argv)

    nvcc = shutil.which("nvcc") if args.compiler in ("auto", "nvcc") else None
    if nvcc is None and args.compiler == "nvcc":
        print("nvcc not found", file=sys.stderr)
        return 2
    lib = None if nvcc else _load_nvrtc()
    print(f"compiler: {nvcc or 'NVRTC (nvidia-cuda-nvrtc wheel)'}")
    configs = instances.all_configs(dtypes=args.dtype)
    failed, spilled, injected, waves = [], [], [], []
    demangle = demangler()
    for arch in args.arch:
        for fam in _configs.FAMILIES:
            names = [c.name for c in configs if c.family == fam and c.arch in (None, arch)]
            if not names:
                continue
            ok, log = (compile_nvcc(nvcc, fam, names, arch) if nvcc
                       else compile_nvrtc(lib, fam, names, arch))
            if not ok:
                failed.append((arch, fam))
                print(f"FAILED {fam} for {arch}:\n{log}")
                continue
            report = parse_report(log)
            worst = max((r.get("registers", 0) for r in report.values()), default=0)
            bad = {k: r for k, r in report.items() if r.get("spill_st") or r.get("spill_ld")}
            print(f"{arch:7s} {fam}: {len(names)} instantiations compiled, "
                  f"max {worst} registers, {len(bad)} with spills")
            for k, r in bad.items():
                spilled.append((arch, k))
                print(f"  spill: {k}: {r}")
            if arch == "sm_90a":
                waves += occupancy_report([c for c in configs if c.family == fam], report,
                                          demangle)
            waits = [line for line in log.splitlines() if "C7517" in line]
            if waits:
                injected.append((arch, fam))
                print(f"  {len(waits)} injected wgmma wait(s), e.g. {waits[0].strip()}")
    if waves:
        print(f"{len(waves)} persistent kernel(s) planned past what registers hold on sm_90a:")
        print("\n".join(waves))
    if failed:
        print(f"compile errors in {len(failed)} module(s)")
        return 1
    if injected:
        print(f"ptxas injected wgmma waits in {len(injected)} module(s): {injected}")
        return 1
    if spilled and args.no_spills:
        print(f"{len(spilled)} kernels spill registers")
        return 1
    print("all kernels compiled")
    return 0


if __name__ == "__main__":
    sys.exit(main())
