"""Choosing an engine, for every algorithm in one place: the table of each algorithm's
engines, ``engine="auto"`` and GPU detection.

An algorithm registers its engines once, where its public function is defined
(:func:`register`); its public function, xarray wrapper and command then resolve the
caller's ``engine`` with :func:`resolve` (one check, one message for every algorithm)
and import the engine's module with :func:`load` (a cuda engine only when asked for).
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from functools import lru_cache
from types import ModuleType

from . import config


@dataclass(frozen=True)
class EngineTable:
    """The engines of one algorithm.

    Attributes
    ----------
    algorithm : str
        The name that messages give (the public function's).
    modules : dict of str to str
        Engine name (``"reference"``, ``"cpu"``, ``"cuda"``) to the module implementing it.
    auto_gpu : bool
        Whether ``engine="auto"`` may pick the cuda engine (on a GPU, for large batches).
    """

    algorithm: str
    modules: dict
    auto_gpu: bool = True

    @property
    def names(self) -> tuple[str, ...]:
        """What ``engine`` accepts: ``"auto"`` and the engines."""
        return ("auto", *self.modules)


#: Every registered algorithm's engines, by algorithm name.
TABLE: dict[str, EngineTable] = {}


def register(algorithm: str, modules: dict[str, str], *, auto_gpu: bool = True) -> EngineTable:
    """Enter an algorithm's engines in :data:`TABLE` (again: replaced) and return them."""
    TABLE[algorithm] = EngineTable(algorithm, dict(modules), auto_gpu)
    return TABLE[algorithm]


def resolve(algorithm: str, engine: str, n_values: int = 0) -> str:
    """The engine that runs ``algorithm`` for the caller's ``engine``: an engine of its
    table, or for ``"auto"`` the cuda engine where :func:`auto_engine` picks it for
    ``n_values`` values (and the algorithm has one that ``"auto"`` may pick), else "cpu".
    Anything else is refused with one message for every algorithm."""
    table = TABLE[algorithm]
    if engine == "auto":
        return auto_engine(n_values) if table.auto_gpu and "cuda" in table.modules else "cpu"
    if not isinstance(engine, str) or engine not in table.modules:
        raise ValueError(f"engine must be one of {', '.join(map(repr, table.names))} for {algorithm}; got {engine!r}")
    return engine


def load(algorithm: str, engine: str) -> ModuleType:
    """The module of a resolved engine of ``algorithm``, imported on first use."""
    return importlib.import_module(TABLE[algorithm].modules[engine])


@lru_cache(maxsize=1)
def cuda_available() -> bool:
    """True if numba.cuda finds a real GPU. Never raises: no driver or toolkit -> False.

    The CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``) is for tests and never counts.
    """
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        return False
    try:
        from numba import cuda

        if not cuda.is_available():
            return False
        from ._cuda_host import check_numpy_support

        check_numpy_support()  # a GPU numba-cuda cannot compile for does not count
        return True
    except Exception:  # pragma: no cover - broken driver/toolkit installs
        return False


def release_cuda_buffers() -> None:
    """Free the device and pinned host memory the cuda engines keep between calls
    (``config.CUDA_KEEP_BUFFERS``), e.g. before handing the GPU to another library."""
    from ._cuda_host import release_buffers

    release_buffers()


def auto_engine(n_values: int) -> str:
    """Engine for ``engine="auto"``: CUDA for large batches when a GPU is present, else cpu."""
    if n_values >= config.CUDA_AUTO_MIN_WORK and cuda_available():
        return "cuda"
    return "cpu"
