"""The optional compiled part of cubsparse: the eager call path (``cubsparse/_cuda/_fastcall.pyx``).

Everything else is configured in pyproject.toml. The extension is optional: where it
cannot be built (no C compiler, no Python headers, no Cython and no generated C file), the
install goes on without it and every call takes the Python path, which gives the same
results (``cubsparse._cuda.fastcall``).
"""

import os

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

PYX = "cubsparse/_cuda/_fastcall.pyx"


class OptionalBuildExt(build_ext):
    """``build_ext`` that reports an extension it cannot build and goes on without it."""

    def run(self):
        try:
            super().run()
        except Exception as exc:  # no compiler at all, say
            self.warn(f"the compiled call path is not built ({exc}); calls take the Python path")

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as exc:  # a compile or link error: missing headers, say
            self.warn(f"{ext.name} is not built ({exc}); calls take the Python path")


def _extensions():
    ext = Extension("cubsparse._cuda._fastcall", [PYX], optional=True)
    try:
        from Cython.Build import cythonize
    except ImportError:  # without Cython: the C file a source distribution carries, if any
        c = PYX[:-4] + ".c"
        if not os.path.exists(c):
            return []
        ext.sources = [c]
        return [ext]
    exts = cythonize([ext], quiet=True)
    for e in exts:  # cythonize makes new Extension objects, without `optional`
        e.optional = True
    return exts


setup(ext_modules=_extensions(), cmdclass={"build_ext": OptionalBuildExt})
