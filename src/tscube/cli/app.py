"""The ``tscube`` command's typer app, and how every command reports a caller's error: one
line ``error: ...`` and exit code 1, never a traceback."""

from __future__ import annotations

from contextlib import contextmanager

import typer

app = typer.Typer(help="Per-pixel time-series analysis of satellite image cubes.", no_args_is_help=True, add_completion=False)


@app.callback()
def main(ctx: typer.Context) -> None:
    """tscube: BFAST Monitor change detection (and more) over image cubes, in parallel."""
    from .._jit import compile_notice

    # a first run compiles for a minute or more: say so on stderr, and how long it took
    ctx.with_resource(compile_notice(lambda line: typer.echo(line, err=True)))


#: Exit code of the file commands when the input or a parameter is wrong.
EXIT_ERROR = 1


def one_line(exc: BaseException) -> str:
    """The error in one line: its message, or the chained cause where a library only says
    "See previous exception" (rasterio's read and write failures)."""
    from ..io import failure_cause

    text = failure_cause(exc) if str(exc).strip() else type(exc).__name__
    return text if not isinstance(exc, KeyError) else f"missing key {text}"


@contextmanager
def clean_errors():
    """Turn caller errors into a one-line ``error: ...`` message and a non-zero exit code."""
    from ..stac import naming_failed_reads

    try:
        with naming_failed_reads():
            yield
    except (typer.Exit, typer.Abort, KeyboardInterrupt):
        raise
    except (ValueError, TypeError, KeyError, OSError) as exc:
        typer.secho(f"error: {one_line(exc)}", err=True, fg=typer.colors.RED)
        raise typer.Exit(EXIT_ERROR) from None
    except Exception as exc:  # noqa: BLE001 - rasterio/zarr/distributed errors of bad inputs
        typer.secho(f"error: {type(exc).__name__}: {one_line(exc)}", err=True, fg=typer.colors.RED)
        raise typer.Exit(EXIT_ERROR) from None


def warn(message: str) -> None:
    typer.secho(f"WARNING: {message}", err=True, fg=typer.colors.YELLOW, bold=True)
