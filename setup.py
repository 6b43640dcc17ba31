"""The optional compiled part of cubsparse: the eager call path (``cubsparse/_cuda/_fastcall.pyx``).

Everything else is configured in pyproject.toml. The extension is optional: where it
cannot be built (no C compiler, no Python headers), the install goes on and every call
takes the Python path, which gives the same results (``cubsparse._cuda.fastcall``).
"""

from setuptools import Extension, setup

try:
    from Cython.Build import cythonize
except ImportError:  # building without Cython: the package is pure Python
    cythonize = None

extensions = [Extension("cubsparse._cuda._fastcall", ["cubsparse/_cuda/_fastcall.pyx"],
                        optional=True)]
setup(ext_modules=cythonize(extensions, quiet=True) if cythonize else [])
