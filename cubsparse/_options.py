"""Library-wide options: whether the CUDA backend may take its dense path, and how much
memory that path may hold; whether its small-block products may multiply dense panels."""

from __future__ import annotations

import contextlib

_DEFAULTS = {"dense_fallback": True, "dense_max_bytes": 1 << 30, "dense_panels": True}
_OPTIONS = dict(_DEFAULTS)
#: What of the options a plan depends on, ``(dense_bytes_limit(), dense_panels())``, kept
#: up to date by :func:`set_options`: part of every cached plan's key, read on every call.
KEY: tuple = ()  # set below, once the functions that make it are defined


def get_options() -> dict:
    """The current options, as a dict (a copy).

    ``dense_fallback`` (default True)
        Let the CUDA backend run a product densely (W's blocks written into a dense
        buffer, then cuBLAS; or a dense weight gradient whose blocks are read out) where
        its cost model predicts that faster than the sparse kernels.
    ``dense_max_bytes`` (default 1 GiB)
        The most memory one dense buffer may take; larger products stay sparse.
    ``dense_panels`` (default True)
        Let the CUDA backend's small-block products (b <= 32, Hopper) multiply dense panels
        of adjacent output blocks, absent blocks as zeros, where the blocks fill enough of
        them (banded and small-world layouts).

    Both the dense path and the panels multiply absent blocks as zeros, so a NaN or Inf
    in X reaches outputs that do not read it (every output of its row on the dense path,
    those of its panel's output blocks with panels). With both off, the CUDA backend
    handles them as SciPy does: an output reads only the blocks stored for it.

    Examples
    --------
    >>> import cubsparse
    >>> cubsparse.get_options()["dense_fallback"]
    True
    """
    return dict(_OPTIONS)


def set_options(**options) -> dict:
    """Change options (see :func:`get_options`); returns the previous ones.

    Examples
    --------
    >>> import cubsparse
    >>> old = cubsparse.set_options(dense_fallback=False)
    >>> cubsparse.get_options()["dense_fallback"]
    False
    >>> _ = cubsparse.set_options(**old)
    """
    unknown = set(options) - set(_DEFAULTS)
    if unknown:
        raise ValueError(f"unknown options {sorted(unknown)}; known: {sorted(_DEFAULTS)}")
    for name in ("dense_fallback", "dense_panels"):
        if name in options and not isinstance(options[name], bool):
            raise TypeError(f"{name} must be True or False, got {options[name]!r}")
    if "dense_max_bytes" in options:
        v = options["dense_max_bytes"]
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise ValueError(f"dense_max_bytes must be a non-negative int, got {v!r}")
    global KEY
    old = dict(_OPTIONS)
    _OPTIONS.update(options)
    KEY = (dense_bytes_limit(), dense_panels())
    return old


@contextlib.contextmanager
def options(**kw):
    """Set options inside a ``with`` block.

    Examples
    --------
    >>> import cubsparse
    >>> with cubsparse.options(dense_fallback=False):
    ...     cubsparse.get_options()["dense_fallback"]
    False
    """
    old = set_options(**kw)
    try:
        yield
    finally:
        set_options(**old)


def dense_bytes_limit() -> int | None:
    """Bytes the dense path may hold, None where it is off."""
    return _OPTIONS["dense_max_bytes"] if _OPTIONS["dense_fallback"] else None


def dense_panels() -> bool:
    """Whether small-block products may multiply dense panels."""
    return _OPTIONS["dense_panels"]


KEY = (dense_bytes_limit(), dense_panels())
