"""Choosing an engine: ``engine="auto"`` and GPU detection, shared by all algorithms."""

from __future__ import annotations

import os
from functools import lru_cache

from . import config


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
        from ._cuda_host import _check_numpy_support

        _check_numpy_support()  # a GPU numba-cuda cannot compile for does not count
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
