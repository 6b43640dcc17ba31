"""Block-layout generators.

A *block layout* is a 2-D NumPy ``bool`` array: entry ``[i, j]`` is True when
block ``(i, j)`` of a :class:`~cubsparse.BlockSparseMatrix` is stored (non-zero).
The generators here build the layouts used by sparse layers and benchmarks:

* :func:`random` -- a fixed number of uniformly placed blocks;
* :func:`barabasi_albert` -- scale-free (heavy-tailed degree) connectivity;
* :func:`watts_strogatz` and :func:`watts_strogatz_2d` -- small-world
  connectivity on a ring or on a 2-D torus;
* :func:`banded` and :func:`identity` -- regular structures.

Every random generator takes ``seed`` (anything :func:`numpy.random.default_rng`
accepts) and returns the same layout for the same seed. Only NumPy is needed at
run time. :func:`summary` reports the per-row and per-column block counts of a
layout.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

__all__ = [
    "random",
    "barabasi_albert",
    "watts_strogatz",
    "watts_strogatz_2d",
    "banded",
    "identity",
    "summary",
]

SeedLike = Any  # None, int, sequence of ints, SeedSequence, BitGenerator or Generator


# --------------------------------------------------------------------------- checks


def _describe(value: object) -> str:
    return f"{type(value).__name__} {value!r}"


def _check_int(name: str, value: object, minimum: int | None = None) -> int:
    # bool is an int subclass, but `n=True` is always a caller mistake.
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {_describe(value)}")
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


def _check_probability(name: str, value: object) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number in [0, 1], got {_describe(value)}")
    value = float(value)
    # `not (0 <= value <= 1)` also rejects NaN.
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be in [0, 1], got {value}")
    return value


def _check_bool(name: str, value: object) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, got {_describe(value)}")
    return bool(value)


def _rng(seed: SeedLike) -> np.random.Generator:
    try:
        return np.random.default_rng(seed)
    except (TypeError, ValueError) as exc:
        # Keep NumPy's exception type (TypeError for a wrong kind, ValueError for a
        # negative integer) but say what this module accepts.
        raise type(exc)(
            "seed must be None, a non-negative integer, a SeedSequence, a BitGenerator "
            f"or a numpy Generator, got {_describe(seed)}"
        ) from exc


# --------------------------------------------------------------------------- helpers


def _symmetric_layout(n: int, u: np.ndarray, v: np.ndarray, self_loops: bool) -> np.ndarray:
    layout = np.zeros((n, n), dtype=bool)
    layout[u, v] = True
    layout[v, u] = True
    if self_loops:
        np.fill_diagonal(layout, True)
    return layout


def _rewire(
    adj: np.ndarray, u: np.ndarray, v: np.ndarray, p: float, rng: np.random.Generator
) -> None:
    """Rewire the edges ``(u[e], v[e])`` of the loop-free symmetric ``adj`` in place.

    Edges are visited in the given order; each is, with probability ``p``, replaced by
    ``(u[e], w)`` with ``w`` uniform over the nodes that are neither ``u[e]`` nor already
    adjacent to it. An edge whose ``u[e]`` is adjacent to every other node is kept.
    """
    n = adj.shape[0]
    # A complete graph has no free endpoint anywhere; skip the per-edge loop.
    if p == 0.0 or u.size == 0 or u.size == n * (n - 1) // 2:
        return
    chosen = np.flatnonzero(rng.random(u.size) < p)
    # One batched draw serves as the first proposal for every rewired edge, so the
    # Python loop below only calls the generator again after a rejection.
    proposals = rng.integers(0, n, size=chosen.size).tolist()
    degree = adj.sum(axis=1).tolist()
    us = u[chosen].tolist()
    vs = v[chosen].tolist()
    for a, b, w in zip(us, vs, proposals, strict=True):
        if degree[a] >= n - 1:
            continue
        if w == a or adj[a, w]:
            if 2 * degree[a] >= n:
                # Rejection would mostly miss; draw from the explicit free set instead.
                free = np.flatnonzero(~adj[a])
                free = free[free != a]
                w = int(free[rng.integers(free.size)])
            else:
                while w == a or adj[a, w]:
                    w = int(rng.integers(n))
        adj[a, b] = adj[b, a] = False
        adj[a, w] = adj[w, a] = True
        degree[b] -= 1
        degree[w] += 1


# --------------------------------------------------------------------------- generators


def random(rows: int, cols: int, density: float, seed: SeedLike = None) -> np.ndarray:
    """Layout with a fixed number of uniformly placed non-zero blocks.

    Parameters
    ----------
    rows, cols : int
        Number of block rows and block columns (>= 0).
    density : float
        Fraction of blocks that are non-zero, in [0, 1]. Exactly
        ``round(density * (rows * cols))`` blocks are set, chosen uniformly without
        replacement, so the block count does not fluctuate with the seed.
    seed : int, numpy.random.Generator or None, optional
        Seed for :func:`numpy.random.default_rng`.

    Returns
    -------
    numpy.ndarray
        ``bool`` array of shape ``(rows, cols)``.

    Examples
    --------
    >>> from cubsparse import layouts
    >>> a = layouts.random(4, 6, 0.25, seed=0)
    >>> a.shape, a.dtype, int(a.sum())
    ((4, 6), dtype('bool'), 6)
    """
    rows = _check_int("rows", rows, 0)
    cols = _check_int("cols", cols, 0)
    density = _check_probability("density", density)
    rng = _rng(seed)
    total = rows * cols
    count = min(round(density * total), total)
    layout = np.zeros(total, dtype=bool)
    layout[rng.choice(total, size=count, replace=False)] = True
    return layout.reshape(rows, cols)


def barabasi_albert(n: int, m: int, seed: SeedLike = None, self_loops: bool = True) -> np.ndarray:
    """Symmetric layout of a Barabási–Albert preferential-attachment graph.

    The graph starts from a complete graph on the ``m + 1`` nodes ``0 .. m``. Nodes
    ``m + 1 .. n - 1`` are then added one at a time; each attaches to ``m`` distinct
    existing nodes, drawn one after another with probability proportional to their
    current degree among those not yet drawn (the usual successive sampling). The
    complete seed graph (rather than the star some implementations use) means every
    node ends with degree >= ``m``, and the graph is connected. It has
    ``m * (m + 1) / 2 + m * (n - m - 1)`` edges and its degree distribution has a
    power-law tail, ``P(k) ~ k**-3``.

    Parameters
    ----------
    n : int
        Number of nodes (block rows and columns).
    m : int
        Edges added per new node, ``1 <= m < n``.
    seed : int, numpy.random.Generator or None, optional
        Seed for :func:`numpy.random.default_rng`.
    self_loops : bool, optional
        Also set the diagonal (default). In a sparse layer each unit keeps its own
        block, and every block row and column is non-empty.

    Returns
    -------
    numpy.ndarray
        Symmetric ``bool`` array of shape ``(n, n)``.

    Examples
    --------
    >>> from cubsparse import layouts
    >>> a = layouts.barabasi_albert(100, 2, seed=0)
    >>> a.shape, bool((a == a.T).all()), bool(a.diagonal().all())
    ((100, 100), True, True)
    >>> int(a.sum() - 100) // 2   # 2 * 3 / 2 + 2 * (100 - 3) edges
    197
    """
    n = _check_int("n", n)
    m = _check_int("m", m)
    if not 1 <= m < n:
        raise ValueError(f"m must satisfy 1 <= m < n, got m={m}, n={n}")
    self_loops = _check_bool("self_loops", self_loops)
    rng = _rng(seed)

    seed_u, seed_v = np.triu_indices(m + 1, 1)
    n_seed = seed_u.size
    n_edges = n_seed + m * (n - m - 1)
    u = np.empty(n_edges, dtype=np.int64)
    v = np.empty(n_edges, dtype=np.int64)
    u[:n_seed], v[:n_seed] = seed_u, seed_v
    # `pool` lists every edge endpoint, so a node appears in it once per unit of degree
    # and a uniform draw from it is a degree-proportional draw of a node.
    pool = np.empty(2 * n_edges, dtype=np.int64)
    pool[:n_seed], pool[n_seed : 2 * n_seed] = seed_u, seed_v
    size = 2 * n_seed
    degree = np.zeros(n, dtype=np.int64)
    degree[: m + 1] = m

    edge = n_seed
    for t in range(m + 1, n):
        if 4 * m > t:
            # Few candidates for many picks: pool draws would mostly repeat. Exponential
            # clocks scaled by 1/degree, smallest m first, give the same successive
            # degree-proportional sampling at O(t) cost.
            clocks = rng.standard_exponential(t) / degree[:t]
            targets = np.argpartition(clocks, m - 1)[:m]
        else:
            # Keep the first m distinct nodes of a stream of i.i.d. pool draws. Most
            # nodes have small degree, so a batch a bit larger than m almost always
            # suffices and the loop runs once.
            draws = pool[rng.integers(0, size, size=2 * m + 8)]
            while True:
                nodes, first = np.unique(draws, return_index=True)
                if nodes.size >= m:
                    break
                draws = np.concatenate([draws, pool[rng.integers(0, size, size=2 * m + 8)]])
            targets = nodes[np.argsort(first, kind="stable")[:m]]
        u[edge : edge + m] = t
        v[edge : edge + m] = targets
        edge += m
        pool[size : size + m] = targets
        pool[size + m : size + 2 * m] = t
        size += 2 * m
        degree[targets] += 1
        degree[t] = m

    return _symmetric_layout(n, u, v, self_loops)


def watts_strogatz(
    n: int, k: int, p: float, seed: SeedLike = None, self_loops: bool = True
) -> np.ndarray:
    """Symmetric layout of a Watts–Strogatz small-world graph on a ring.

    Node ``i`` is first joined to its ``k`` nearest ring neighbours, ``k / 2`` on each
    side. The lattice edges ``(i, (i + j) % n)`` are then visited for ``j = 1 .. k/2``
    (outer) and ``i = 0 .. n-1`` (inner); each is, with probability ``p``, replaced by
    ``(i, w)`` with ``w`` uniform over the nodes that are neither ``i`` nor already
    joined to ``i`` (an edge whose ``i`` is joined to every node is kept). Rewiring
    never creates self-loops or duplicate edges, so the graph always has exactly
    ``n * k / 2`` edges. ``p = 0`` gives the ring lattice, ``p = 1`` a nearly random
    graph; small ``p`` gives short paths with high clustering.

    Rewiring is sequential (each choice depends on the edges already moved) and runs
    one Python-level step per rewired edge, about ``p * n * k / 2`` of them.

    Parameters
    ----------
    n : int
        Number of nodes (block rows and columns), >= 1.
    k : int
        Lattice degree: even, ``0 <= k < n``.
    p : float
        Rewiring probability in [0, 1].
    seed : int, numpy.random.Generator or None, optional
        Seed for :func:`numpy.random.default_rng`.
    self_loops : bool, optional
        Also set the diagonal (default). In a sparse layer each unit keeps its own
        block, and every block row and column is non-empty.

    Returns
    -------
    numpy.ndarray
        Symmetric ``bool`` array of shape ``(n, n)``.

    Examples
    --------
    >>> from cubsparse import layouts
    >>> layouts.watts_strogatz(6, 2, 0.0, self_loops=False).astype(int)
    array([[0, 1, 0, 0, 0, 1],
           [1, 0, 1, 0, 0, 0],
           [0, 1, 0, 1, 0, 0],
           [0, 0, 1, 0, 1, 0],
           [0, 0, 0, 1, 0, 1],
           [1, 0, 0, 0, 1, 0]])
    >>> a = layouts.watts_strogatz(100, 4, 0.3, seed=0)
    >>> int(a.sum() - 100) // 2   # rewiring keeps the n * k / 2 edges
    200
    """
    n = _check_int("n", n, 1)
    k = _check_int("k", k, 0)
    if k % 2:
        raise ValueError(f"k must be even, got {k}")
    if k >= n:
        raise ValueError(f"k must be < n, got k={k}, n={n}")
    p = _check_probability("p", p)
    self_loops = _check_bool("self_loops", self_loops)
    rng = _rng(seed)

    half = k // 2
    u = np.tile(np.arange(n), half)
    v = (u + np.repeat(np.arange(1, half + 1), n)) % n
    adj = _symmetric_layout(n, u, v, self_loops=False)
    _rewire(adj, u, v, p, rng)
    if self_loops:
        np.fill_diagonal(adj, True)
    return adj


def watts_strogatz_2d(
    height: int,
    width: int,
    radius: int,
    p: float,
    seed: SeedLike = None,
    self_loops: bool = True,
) -> np.ndarray:
    """Symmetric layout of a Watts–Strogatz small-world graph on a 2-D torus.

    Nodes sit on a ``height x width`` grid with wrap-around; node ``r * width + c`` is
    at row ``r``, column ``c``. Each node is first joined to every other node within
    Chebyshev distance ``radius`` on the torus, i.e. ``(2 * radius + 1)**2 - 1``
    neighbours when both sides are at least ``2 * radius + 1`` (fewer on smaller
    grids, where offsets wrap onto the same node). The lattice edges ``(a, b)`` with
    ``a < b`` are then visited in row-major order; each is, with probability ``p``,
    replaced by ``(a, w)`` with ``w`` uniform over the nodes that are neither ``a`` nor
    already joined to ``a`` (kept if ``a`` is joined to every node). The edge count is
    preserved and there are no self-loops or duplicate edges.

    Parameters
    ----------
    height, width : int
        Grid size, >= 1 each.
    radius : int
        Neighbourhood radius (Chebyshev distance), >= 0.
    p : float
        Rewiring probability in [0, 1].
    seed : int, numpy.random.Generator or None, optional
        Seed for :func:`numpy.random.default_rng`.
    self_loops : bool, optional
        Also set the diagonal (default). In a sparse layer each unit keeps its own
        block, and every block row and column is non-empty.

    Returns
    -------
    numpy.ndarray
        Symmetric ``bool`` array of shape ``(height * width, height * width)``.

    Examples
    --------
    >>> from cubsparse import layouts
    >>> a = layouts.watts_strogatz_2d(5, 6, 1, 0.0, self_loops=False)
    >>> a.shape, sorted(set(a.sum(axis=1).tolist()))   # 3 * 3 - 1 neighbours each
    ((30, 30), [8])
    >>> bool(a[0, 4 * 6 + 5])   # (0, 0) touches (4, 5) through the wrap-around
    True
    """
    height = _check_int("height", height, 1)
    width = _check_int("width", width, 1)
    radius = _check_int("radius", radius, 0)
    p = _check_probability("p", p)
    self_loops = _check_bool("self_loops", self_loops)
    rng = _rng(seed)

    n = height * width
    rr, cc = np.divmod(np.arange(n), width)
    # Offsets beyond the grid size only revisit the same residues; dedupe them so a
    # huge radius on a small grid costs no more than a radius equal to the grid size.
    dr = np.unique(np.arange(-min(radius, height), min(radius, height) + 1) % height)
    dc = np.unique(np.arange(-min(radius, width), min(radius, width) + 1) % width)
    adj = np.zeros((n, n), dtype=bool)
    nodes = np.arange(n)
    for a in dr:
        for b in dc:
            adj[nodes, ((rr + a) % height) * width + (cc + b) % width] = True
    np.fill_diagonal(adj, False)
    u, v = np.nonzero(np.triu(adj, 1))
    _rewire(adj, u, v, p, rng)
    if self_loops:
        np.fill_diagonal(adj, True)
    return adj


def banded(n: int, width: int, cols: int | None = None) -> np.ndarray:
    """Band layout: True where ``|i - j| <= width``.

    Parameters
    ----------
    n : int
        Number of block rows (>= 0).
    width : int
        Number of off-diagonals on each side (>= 0); ``0`` gives the identity.
    cols : int, optional
        Number of block columns (>= 0); defaults to ``n``.

    Returns
    -------
    numpy.ndarray
        ``bool`` array of shape ``(n, cols)``.

    Examples
    --------
    >>> from cubsparse import layouts
    >>> layouts.banded(4, 1).astype(int)
    array([[1, 1, 0, 0],
           [1, 1, 1, 0],
           [0, 1, 1, 1],
           [0, 0, 1, 1]])
    >>> layouts.banded(2, 0, cols=3).astype(int)
    array([[1, 0, 0],
           [0, 1, 0]])
    """
    n = _check_int("n", n, 0)
    width = _check_int("width", width, 0)
    cols = n if cols is None else _check_int("cols", cols, 0)
    i = np.arange(n)[:, None]
    j = np.arange(cols)[None, :]
    return np.abs(i - j) <= width


def identity(n: int) -> np.ndarray:
    """Diagonal layout: block ``(i, i)`` only.

    Parameters
    ----------
    n : int
        Number of block rows and columns (>= 0).

    Returns
    -------
    numpy.ndarray
        ``bool`` array of shape ``(n, n)``.

    Examples
    --------
    >>> from cubsparse import layouts
    >>> layouts.identity(3).astype(int)
    array([[1, 0, 0],
           [0, 1, 0],
           [0, 0, 1]])
    """
    n = _check_int("n", n, 0)
    return np.eye(n, dtype=bool)


def summary(layout: np.ndarray) -> dict[str, int | float]:
    """Statistics of a block layout.

    Parameters
    ----------
    layout : array_like
        2-D boolean (or 0/1) block layout.

    Returns
    -------
    dict
        ``rows``, ``cols``, ``nnzb`` (number of non-zero blocks), ``density``
        (``nnzb / (rows * cols)``, 0 for an empty shape), ``row_min``, ``row_mean``,
        ``row_max`` (blocks per block row), ``col_min``, ``col_mean``, ``col_max``
        (blocks per block column) and ``empty_rows``, ``empty_cols`` (rows/columns
        without any block). Counts are ``int``, means and density ``float``.

    Examples
    --------
    >>> from cubsparse import layouts
    >>> s = layouts.summary(layouts.banded(4, 1))
    >>> s["nnzb"], s["density"], s["row_min"], s["row_mean"], s["row_max"]
    (10, 0.625, 2, 2.5, 3)
    """
    array = np.asarray(layout)
    if array.ndim != 2:
        raise ValueError(f"layout must be a 2-D array, got {array.ndim}-D with shape {array.shape}")
    if array.dtype != bool:
        if not (np.issubdtype(array.dtype, np.number) and np.isin(array, (0, 1)).all()):
            raise TypeError(f"layout must be a bool (or 0/1) array, got dtype {array.dtype}")
        array = array.astype(bool)
    rows, cols = array.shape
    per_row = array.sum(axis=1)
    per_col = array.sum(axis=0)
    nnzb = int(per_row.sum())

    def stats(counts: np.ndarray, prefix: str) -> dict[str, int | float]:
        if counts.size == 0:
            return {f"{prefix}_min": 0, f"{prefix}_mean": 0.0, f"{prefix}_max": 0}
        return {
            f"{prefix}_min": int(counts.min()),
            f"{prefix}_mean": float(counts.mean()),
            f"{prefix}_max": int(counts.max()),
        }

    return {
        "rows": rows,
        "cols": cols,
        "nnzb": nnzb,
        "density": nnzb / (rows * cols) if rows * cols else 0.0,
        **stats(per_row, "row"),
        **stats(per_col, "col"),
        "empty_rows": int((per_row == 0).sum()),
        "empty_cols": int((per_col == 0).sum()),
    }
