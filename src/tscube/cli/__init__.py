"""The ``tscube`` command line: a thin layer over the library, one module per family of
commands on the typer app of :mod:`.app`: ``demo``, ``bfast`` (monitor, breaks), ``stl``,
``figures`` (plot, plot-pixel), ``view``, ``info``, ``cluster``, ``warmup``; the options they share are in
:mod:`.options`, opening inputs and running into outputs in :mod:`.running`."""

# The command modules register their commands on ``app`` when imported, in the order of
# ``tscube --help``.
from . import demo, bfast, stl, figures, view, info, cluster, warmup  # noqa: F401, I001
from .app import app

__all__ = ["app"]
