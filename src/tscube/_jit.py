"""The numba decorator of every CPU kernel and helper: ``numba.njit`` with ``cache=True``
and both flags that a callee would otherwise inherit, ``fastmath`` and ``error_model``,
always set.

numba compiles a function that leaves one of these flags unset with the value of the
jitted caller that compiles it first (``Flags.inherit_if_not_set``), then keeps that
compiled version, one per signature, for every later caller, and in its on-disk cache.
A helper called both by a ``fastmath={"contract"}`` kernel and by a plain one therefore
rounded differently, fused multiply-adds or not, depending on which kernel the process
(or the run that wrote the cache) happened to compile first; with ``error_model`` a
division by zero could raise in one order and give inf in another. With every flag set
here, a function's arithmetic is its own decorator's, whatever calls it and whatever the
cache holds. ``tests/test_jit_flags.py`` checks every kernel of the package.

Functions with ``inline="always"`` are inlined into the caller's numba IR before typing
and compiled with the caller's flags; their own flags only apply when Python calls them.
"""

from __future__ import annotations

from numba import njit

#: ``fastmath`` that allows only fused multiply-adds (``a * b + c`` in one rounding)
CONTRACT = {"contract"}


def jit(*, fastmath: bool | set = False, error_model: str = "python", cache: bool = True, **options):
    """``numba.njit(cache=cache, fastmath=fastmath, error_model=error_model, **options)``;
    the defaults are numba's own for a function called from Python (IEEE rounding of each
    operation, ``ZeroDivisionError`` on a division by zero)."""
    return njit(cache=cache, fastmath=fastmath, error_model=error_model, **options)
