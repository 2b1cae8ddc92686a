"""``tscube view``: a result in the browser, pixel by pixel (:func:`tscube.view`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from .app import app, clean_errors, warn
from .options import DatePattern, DatesFile, Variable


@app.command("view")
def view_command(
    result_path: Annotated[Path, typer.Argument(metavar="RESULT", help=(
        "Result of monitor, breaks, bfast, stl or cluster: .zarr, .nc or .tif."))],
    cube: Annotated[Optional[str], typer.Option("--cube", help=(
        "The input cube, for the pixel series (default: the input the result's run recorded)."))] = None,
    dates: DatesFile = None,
    date_pattern: DatePattern = None,
    variable: Variable = None,
    port: Annotated[int, typer.Option(help="Port to serve on (0: any free port).")] = 8765,
    host: Annotated[str, typer.Option(help=(
        "Interface to listen on. The default serves this machine only; another address shows the result "
        "to the network."))] = "127.0.0.1",
    start_index: Annotated[int, typer.Option("--start-index", help=(
        "Which start of a multi-start monitor result to show."))] = 0,
    browser: Annotated[bool, typer.Option("--browser/--no-browser", help="Open the page in the web browser.")] = True,
) -> None:
    """Explore a result in the browser: its maps (pan, zoom, every layer's value under the pointer) and, on
    click, the pixel's series with what the algorithm saw. Ctrl-C stops it."""
    from ..viewer import view

    with clean_errors():
        try:
            viewer = view(result_path, cube, dates=dates, variable=variable, date_pattern=date_pattern, host=host,
                          port=port, open_browser=False, start_index=start_index)
        except OSError as exc:
            if port and getattr(exc, "errno", None) in (98, 48):  # address in use: any free port instead
                viewer = view(result_path, cube, dates=dates, variable=variable, date_pattern=date_pattern,
                              host=host, port=0, open_browser=False, start_index=start_index)
            else:
                raise
    app_info = viewer.app.info
    typer.echo(f"{app_info['kind'].replace('_', ' ')} result {result_path.name}: {app_info['shape'][0]} x "
               f"{app_info['shape'][1]} pixels, layers {', '.join(layer['name'] for layer in app_info['layers'])}")
    if app_info["cube_problem"]:
        warn(f"pixel series unavailable: {app_info['cube_problem']}")
    if host not in ("127.0.0.1", "localhost", "::1"):
        warn(f"serving on {host}: anyone who can reach this address sees the result")
    typer.echo(f"tscube view: {viewer.url}  (Ctrl-C stops it)")
    if browser:
        import webbrowser

        webbrowser.open(viewer.url)
    _stop_on_signals()
    viewer.wait()


def _stop_on_signals() -> None:
    """Ctrl-C and SIGTERM (a service manager, ``docker stop``) end the viewer cleanly, also
    where the shell started it with SIGINT ignored (a background job)."""
    import signal

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, interrupt)
