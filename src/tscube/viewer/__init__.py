"""``tscube view`` and :func:`tscube.view`: explore a result in the browser, pixel by pixel.

:func:`view` serves a local page with the result's map layers (tiles of a zoom pyramid,
legends, every layer's value under the pointer) and, for a clicked pixel, its series
with what the algorithm saw, drawn by the algorithm's own pixel plot. See docs/view.md.
"""

from .server import Viewer, ViewApp, view

__all__ = ["view", "Viewer", "ViewApp"]
