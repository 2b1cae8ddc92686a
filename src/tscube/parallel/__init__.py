"""Data-parallel primitives (scan, segmented scan, compaction, reductions, batched small
linear algebra) for tscube's GPU engines.

Two sibling modules compute the same things:

* :mod:`tscube.parallel.reference` — NumPy, written for clarity; always importable.
* :mod:`tscube.parallel.cuda` — numba.cuda device functions, kernels and host wrappers
  (NumPy in, NumPy out). It imports ``numba.cuda`` and is therefore loaded only when
  first used: ``tscube.parallel.cuda`` (or any name in :data:`CUDA_FUNCTIONS` looked up
  on this package, e.g. ``tscube.parallel.cuda_inclusive_scan``) imports it on demand,
  so importing tscube never needs a CUDA driver or toolkit.

See ``docs/parallel.md`` for work/depth of each primitive and how the kernels compose.
"""

from __future__ import annotations

import importlib

from . import reference

__all__ = ["reference", "cuda", "CUDA_FUNCTIONS"]

#: Host wrappers of :mod:`tscube.parallel.cuda`, exposed here with a ``cuda_`` prefix:
#: one for every NumPy reference function.
CUDA_FUNCTIONS = tuple(name for name in reference.__all__ if name != "accumulation_dtype")


def __getattr__(name: str):
    # PEP 562 lazy attributes: numba.cuda is imported only here, on first use.
    if name == "cuda":
        return importlib.import_module(".cuda", __name__)
    if name.startswith("cuda_") and name[5:] in CUDA_FUNCTIONS:
        return getattr(importlib.import_module(".cuda", __name__), name[5:])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + ["cuda"] + [f"cuda_{n}" for n in CUDA_FUNCTIONS])
