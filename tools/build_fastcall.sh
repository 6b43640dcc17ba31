#!/usr/bin/env bash
# Builds the compiled eager call path (cubsparse/_cuda/_fastcall) in place for this
# machine's python3, from the C file Cython generated (cubsparse/_cuda/_fastcall.c, written
# by `pip install -e .`; ignored by git, so a device call carries it: carry
# ["cubsparse/_cuda/_fastcall.c"]). For machines where pip cannot build it: without the
# extension every call takes the Python path, and eager figures of short kernels time that
# path's host time. Prints what it did; never fails the caller.
cd "$(dirname "$0")/.."
P=${PYTHON:-python3}
SUF=$($P -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))")
SO=cubsparse/_cuda/_fastcall$SUF
C=cubsparse/_cuda/_fastcall.c
if [ -f "$SO" ] && [ "$SO" -nt "$C" ]; then
  echo "compiled call path: $SO (already built)"
elif [ -f "$C" ]; then
  INC=$($P -c "import sysconfig; print(sysconfig.get_paths()['include'])")
  if gcc -shared -fPIC -O2 -I"$INC" "$C" -o "$SO"; then
    echo "compiled call path: built $SO"
  else
    echo "compiled call path: the build failed; eager calls take the Python path"
  fi
else
  echo "compiled call path: no $C (run pip install -e . here, or carry it); eager calls" \
       "take the Python path"
fi
$P -c "import sys; sys.path.insert(0, '.'); from cubsparse._cuda import fastcall; \
print('eager calls:', 'compiled' if fastcall.active() else 'python')" 2>/dev/null || true
exit 0
