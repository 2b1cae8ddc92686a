"""Resumable production runs: compute a lazy result chunk by chunk into a Zarr store.

A continent-sized run takes hours; a crash must not cost the work done. :func:`run_chunked`
takes the *lazy* result of a per-pixel algorithm (e.g. :func:`tscube.xr.bfast_monitor_xarray`
on a dask-backed cube) and

1. creates the output store once (a Zarr store whose chunks are the pixel chunks of the
   result; metadata and coordinates only), atomically: built under a temporary name with
   its run record inside, then renamed;
2. computes the chunks in a fixed (row-major) order, writes each one into its Zarr region
   and then records it as finished in the run record ``_tscube_run.json``, which is
   replaced atomically (temporary file + ``os.replace``) after every chunk;
3. at the end adds the run summary to the store's attributes and, for a ``.tif``/``.nc``
   output, assembles that file from the store with :func:`tscube.io.write_result`
   (atomic) and removes the store.

A run killed at any moment (even ``SIGKILL``) and started again with the same arguments
recomputes only the chunks missing from the record; a chunk written but not yet
recorded is simply computed and written again. The output is byte-identical to that of
an uninterrupted run because every chunk is written whole, by the same code, from the
same data, and nothing in the output depends on when or in how many sessions it was made:
wall time and throughput go to the run record only (see ``docs/production.md``).

A run with other parameters, another input (path, size, modification time, shape,
dates) or another chunk grid than the record's is refused with the differing entries
named, unless ``overwrite=True``. Inputs are only read. A run holds an exclusive lock
(``flock`` on the hidden file ``.OUT.lock`` next to the output; the OS releases it when
the process dies), so a second run into the same output is refused while one is going.

Where things are, for an output ``OUT``:

* ``OUT.zarr``: the store is the output; the record is ``OUT.zarr/_tscube_run.json``.
* ``OUT.tif`` / ``OUT.nc``: chunks go to the sidecar store ``OUT.tif.partial.zarr``
  (record inside) while running; when done, the record moves next to the output as
  ``OUT.tif.tscube_run.json`` and the sidecar is removed.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import threading
import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from itertools import islice
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .io import COMPLETE_ATTR, NOT_COMPUTED, RECORD_NAME, RunIncomplete, check_complete

__all__ = ["RunSummary", "RunMismatch", "RunLocked", "RunIncomplete", "check_apart_from_inputs", "check_complete",
           "input_identity", "run_chunked", "record_path", "chunk_store_path"]

#: Version of the record layout; a record of another version is never resumed.
RECORD_VERSION = 1
#: Test hook: seconds to sleep after computing each chunk, before writing it (lets a
#: test kill a run mid-way).
CHUNK_DELAY_ENV = "TSCUBE_TEST_CHUNK_DELAY"


class RunMismatch(ValueError):
    """An existing output was made by a run with other parameters or inputs (or by no run)."""


# --------------------------------------------------------------------------------------
# paths and records


def _is_zarr(output: Path) -> bool:
    return output.suffix.lower() == ".zarr"


def chunk_store_path(output) -> Path:
    """The Zarr store the chunks are written to: the output itself, or its ``.partial.zarr`` sidecar."""
    output = Path(output)
    return output if _is_zarr(output) else output.with_name(output.name + ".partial.zarr")


def record_path(output) -> Path:
    """Where the record of a *finished* run of ``output`` lives."""
    output = Path(output)
    return output / RECORD_NAME if _is_zarr(output) else output.with_name(output.name + ".tscube_run.json")


def read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {"unreadable": str(path)}


def _write_json_atomic(path: Path, data: dict) -> None:
    """Write ``data`` to ``path`` so that readers see the old or the new file, never a partial one."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(data, sort_keys=True, separators=(",", ":")) + "\n")
    os.replace(tmp, path)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def check_apart_from_inputs(output, *inputs) -> None:
    """Refuse an output that is one of the inputs, or inside an input folder (a result
    written among the scenes would change the input: a scene replaced, or one more file
    in its folder), or that holds an input. Inputs given as URLs are not local paths and
    pass. Inputs are only ever opened for reading."""
    output = Path(output).resolve()
    for source in inputs:
        if source is None or "://" in str(source):
            continue
        source = Path(source).resolve()
        if output == source:
            raise ValueError(f"the output {output.name} is the input: inputs are only read; write to another path")
        if source.is_dir() and output.is_relative_to(source):
            raise ValueError(f"the output {output.name} is inside the input folder {source.name}: a result written "
                             "there would change the input; write it outside the folder")
        if output.is_dir() and source.is_relative_to(output):
            raise ValueError(f"the output {output.name} holds the input {source.name}: inputs are only read; write to "
                             "another path")


def input_identity(path, da) -> dict[str, Any]:
    """What identifies an input: path, total size, newest modification time, shape, dtype, dates hash.

    For a folder or a Zarr store, size and modification time cover every file inside. A
    STAC input (path or URL; its cube has ``stac_items_sha256``) is identified by the
    hash of its items' metadata instead.
    """
    if "stac_items_sha256" in da.attrs:
        where = {"source": str(path), "stac_items_sha256": str(da.attrs["stac_items_sha256"])}
    else:
        path = Path(path).resolve()
        files = [f for f in path.rglob("*") if f.is_file()] if path.is_dir() else [path]
        stats = [f.stat() for f in files]
        where = {"path": str(path), "files": len(files), "size": int(sum(s.st_size for s in stats)),
                 "mtime_ns": int(max((s.st_mtime_ns for s in stats), default=0))}
    dates = np.asarray(da["time"].values)
    if np.issubdtype(dates.dtype, np.datetime64):
        dates = dates.astype("datetime64[ns]").astype(np.int64)
    return {
        **where,
        "shape": [int(n) for n in da.shape],
        "dims": [str(d) for d in da.dims],
        "dtype": str(da.dtype),
        "dates_sha256": hashlib.sha256(np.ascontiguousarray(dates).tobytes()).hexdigest(),
    }


def _flatten(prefix: str, value, out: dict) -> dict:
    if isinstance(value, dict):
        for key, item in value.items():
            _flatten(f"{prefix}.{key}" if prefix else str(key), item, out)
    else:
        out[prefix] = value
    return out


def _differences(old: dict, new: dict) -> list[str]:
    """``name (old -> new)`` for every entry of the identities ``old`` and ``new`` that differs."""
    a, b = _flatten("", old, {}), _flatten("", new, {})
    return [f"{key} ({a.get(key, 'unset')!r} -> {b.get(key, 'unset')!r})"
            for key in sorted(set(a) | set(b)) if a.get(key) != b.get(key)]


def _jsonable(value):
    """``value`` as plain JSON types (numbers, strings, lists, dicts), for the record."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_jsonable(v) for v in list(value)]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if np.isfinite(value) else repr(float(value))
    if value is None or isinstance(value, (int, str)):
        return value
    return str(value)


# --------------------------------------------------------------------------------------
# the chunk grid


@dataclass(frozen=True)
class ChunkGrid:
    """The pixel chunks of a result, numbered in row-major order."""

    dims: tuple[str, ...]
    chunks: tuple[tuple[int, ...], ...]

    @classmethod
    def of(cls, ds, pixel_dims) -> "ChunkGrid":
        sizes = ds.chunksizes if ds.chunks else {}
        chunks = tuple(tuple(int(c) for c in sizes.get(d, (ds.sizes[d],))) for d in pixel_dims)
        return cls(tuple(pixel_dims), chunks)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(len(c) for c in self.chunks)

    def __len__(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def region(self, chunk_id: int) -> dict[str, slice]:
        """``{dim: slice}`` of chunk ``chunk_id``."""
        index = np.unravel_index(chunk_id, self.shape)
        region = {}
        for dim, sizes, i in zip(self.dims, self.chunks, index):
            begin = int(sum(sizes[:i]))
            region[dim] = slice(begin, begin + sizes[i])
        return region

    def as_record(self) -> dict:
        return {"dims": list(self.dims), "chunks": [list(c) for c in self.chunks]}


# --------------------------------------------------------------------------------------
# summary


@dataclass
class RunSummary:
    """What a run did: pixels processed, per-status counts, breaks found, time, throughput.

    ``seconds`` is the computing time summed over every session of the run (a resumed run
    counts its earlier sessions too); ``pixels_per_second`` is ``pixels / seconds``.
    ``chunks_computed`` is how many chunks *this* session computed.
    """

    pixels: int
    status_counts: dict[str, int]
    breaks: int | None
    seconds: float
    chunks: int
    chunks_computed: int
    sessions: int
    output: str = ""
    #: True when the output was already complete and nothing was done.
    up_to_date: bool = False

    @property
    def pixels_per_second(self) -> float:
        return self.pixels / self.seconds if self.seconds > 0 else float("nan")

    def attrs(self) -> dict[str, Any]:
        """The deterministic part, stored in the output's attributes (no wall time in data files)."""
        out = {"pixels_processed": int(self.pixels),
               "status_counts": ", ".join(f"{k}: {v}" for k, v in self.status_counts.items())}
        if self.breaks is not None:
            out["breaks_found"] = int(self.breaks)
        return out

    def as_record(self) -> dict[str, Any]:
        return {"pixels": self.pixels, "status_counts": self.status_counts, "breaks": self.breaks,
                "seconds": round(self.seconds, 3), "pixels_per_second": round(self.pixels_per_second, 1),
                "chunks": self.chunks, "sessions": self.sessions}

    def lines(self) -> list[str]:
        """Human-readable summary lines."""
        text = [f"pixels processed: {self.pixels:,} in {self.chunks} chunks "
                f"({self.chunks_computed} computed now, {self.sessions} session(s))",
                f"pixel status: {self.status_counts}"]
        if self.breaks is not None:
            text.append(f"breaks found: {self.breaks:,}")
        text.append(f"time: {self.seconds:.2f} s, {self.pixels_per_second:,.0f} pixels/s")
        return text


def _chunk_stats(ds, pixel_dims, status_enum) -> dict[str, Any]:
    status = np.asarray(ds["status"].values)
    codes, counts = np.unique(status, return_counts=True)
    stats = {"pixels": int(np.prod([ds.sizes[d] for d in pixel_dims], dtype=np.int64)),
             "status": {status_enum(int(c)).name: int(n) for c, n in zip(codes, counts)}}
    # breaks: BFAST Lite's break_index, classic BFAST's trend_ and season_break_index
    found = [name for name in ds.data_vars if name == "break_index"
             or (name.endswith("_break_index") and not name.startswith("iter_"))]
    if found:
        stats["breaks"] = sum(int(np.count_nonzero(np.asarray(ds[name].values) >= 0)) for name in found)
    return stats


def _summarise(record: dict, status_enum, computed_now: int, output) -> RunSummary:
    counts: dict[str, int] = {}
    pixels, breaks, has_breaks = 0, 0, False
    for stats in record["finished"].values():
        pixels += stats["pixels"]
        for name, n in stats["status"].items():
            counts[name] = counts.get(name, 0) + n
        if "breaks" in stats:
            has_breaks = True
            breaks += stats["breaks"]
    ordered = {s.name: counts[s.name] for s in status_enum if s.name in counts}
    seconds = float(sum(s.get("seconds", 0.0) for s in record["sessions"]))
    return RunSummary(pixels=pixels, status_counts=ordered, breaks=breaks if has_breaks else None, seconds=seconds,
                      chunks=len(record["finished"]), chunks_computed=computed_now,
                      sessions=len(record["sessions"]), output=str(output))


# --------------------------------------------------------------------------------------
# the run


@contextmanager
def quiet_zarr():
    """Silence zarr's notes on consolidated metadata (not yet Zarr v3) and on the files
    tscube keeps in a store besides its arrays (the run record, hidden ``.name`` entries
    such as a monitoring state's directory)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*[Cc]onsolidated metadata.*")
        warnings.filterwarnings("ignore", message=f".*{RECORD_NAME} is not recognized as a component.*")
        warnings.filterwarnings("ignore", message=r".*Object at \.\S* is not recognized as a component.*")
        yield


class RunLocked(OSError):
    """Another process is running into the same output."""


#: Locks this process holds, by lock file and thread: a holder may take its lock again
#: (``monitor --update`` holds its output's lock around the fit's run_chunked).
_HELD: dict[tuple[str, int], int] = {}


@contextmanager
def exclusive_lock(output: Path):
    """Hold an exclusive lock on ``output`` for the whole run (released by the OS when the process dies).

    The one lock of every writer of an output (a run, an ``--overwrite``, a
    near-real-time update): ``fcntl.flock`` on the hidden file ``.NAME.lock`` next to the
    output. The thread that holds it may take it again (nested writers of one command);
    any other process or thread is refused with :class:`RunLocked`. Where ``fcntl`` does
    not exist (Windows) runs are not locked.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    output = Path(output)
    lock_path = output.with_name(f".{output.name}.lock")
    key = (str(lock_path.resolve()), threading.get_ident())
    if key in _HELD:
        _HELD[key] += 1
        try:
            yield
        finally:
            _HELD[key] -= 1
        return
    with open(lock_path, "a+") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.seek(0)
            owner = handle.read().strip() or "unknown"
            raise RunLocked(f"another tscube run (pid {owner}) is writing {output.name}; wait for it to end "
                            "or stop it, then run again") from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        _HELD[key] = 1
        try:
            yield
        finally:  # the lock file stays: unlinking it would let two later runs lock different files
            del _HELD[key]
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _create_store(template, store: Path, record: dict) -> None:
    """Create the empty store (metadata, coordinates, record) under a temporary name, then rename."""
    for stale in store.parent.glob(f".{store.name}.tmp-*"):  # left by runs killed while creating it
        _remove(stale)
    tmp = store.with_name(f".{store.name}.tmp-{os.getpid()}")
    template = template.copy()
    template["status"].encoding["fill_value"] = NOT_COMPUTED  # what the unwritten chunks read as
    template.attrs[COMPLETE_ATTR] = 0
    with quiet_zarr():
        template.to_zarr(tmp, mode="w-", compute=False, write_empty_chunks=True)
    _write_json_atomic(tmp / RECORD_NAME, record)
    _remove(store)
    os.replace(tmp, store)


class _StoreWriter:
    """Writes computed chunks into the arrays of an existing Zarr store, in place.

    Opens the store's arrays once and assigns each variable's block to its region
    (zarr encodes and compresses it exactly as xarray would: the result variables are
    plain numbers, stored without CF transformations). Much cheaper per chunk than
    ``Dataset.to_zarr(region=...)``, which reopens the store and every array each time.
    """

    def __init__(self, store: Path, names):
        import zarr

        with quiet_zarr():
            group = zarr.open_group(str(store), mode="r+", use_consolidated=False)
            self.arrays = {name: group[name] for name in names}

        from concurrent.futures import ThreadPoolExecutor

        # one thread per array: zarr's per-call overhead dominates small chunks
        self._pool = ThreadPoolExecutor(max_workers=max(1, min(8, len(self.arrays))),
                                        thread_name_prefix="tscube-write")

    def write(self, ds, region: dict[str, slice]) -> None:
        """Write the variables of the computed chunk ``ds`` into ``region``; returns when all are written."""

        def put(name):
            array, variable = self.arrays[name], ds[name]
            selection = tuple(region.get(dim, slice(None)) for dim in variable.dims)
            values = np.asarray(variable.values)
            if values.dtype != array.dtype:
                raise TypeError(f"{name}: computed {values.dtype}, store holds {array.dtype}")
            array[selection] = values

        list(self._pool.map(put, self.arrays))

    def close(self) -> None:
        self._pool.shutdown(wait=True)


def _finish_store(store: Path, summary: RunSummary) -> None:
    """Add the deterministic summary to the store's attributes and consolidate its metadata."""
    import zarr

    with quiet_zarr():
        group = zarr.open_group(str(store), mode="r+", use_consolidated=False)
        group.attrs.update({**summary.attrs(), COMPLETE_ATTR: 1})
        zarr.consolidate_metadata(str(store))


def _pending(record: dict, grid: ChunkGrid) -> list[int]:
    done = {int(k) for k in record["finished"]}
    return [i for i in range(len(grid)) if i not in done]


def _compute_local(template, grid: ChunkGrid, pending: list[int], ahead: int):
    """Yield ``(chunk_id, computed Dataset)`` in order; up to ``ahead`` further chunks are computed meanwhile.

    The look-ahead overlaps reading and computing the next chunk with writing this one
    (each chunk may use the whole ``memory`` budget, so ``ahead + 1`` chunks are in memory).
    """
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor

    def compute(chunk_id):
        return template.isel(grid.region(chunk_id)).compute(scheduler="threads")

    queue = iter(pending)
    pool = ThreadPoolExecutor(max_workers=max(1, ahead + 1), thread_name_prefix="tscube-chunk")
    try:
        running = deque((chunk_id, pool.submit(compute, chunk_id)) for chunk_id in islice(queue, max(0, ahead) + 1))
        while running:
            chunk_id, future = running.popleft()
            result = future.result()
            following = next(queue, None)
            if following is not None:
                running.append((following, pool.submit(compute, following)))
            yield chunk_id, result
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def _compute_on_client(template, grid: ChunkGrid, pending: list[int], client, in_flight: int):
    """Yield ``(chunk_id, computed Dataset)`` as the cluster finishes them (at most ``in_flight`` queued)."""
    from distributed import as_completed

    queue = list(pending)
    futures = {}

    def submit(chunk_id):
        future = client.compute(template.isel(grid.region(chunk_id)))
        futures[future] = chunk_id
        return future

    running = as_completed([submit(queue.pop(0)) for _ in range(min(in_flight, len(queue)))])
    for future in running:
        chunk_id = futures.pop(future)
        result = future.result()
        if queue:
            running.add(submit(queue.pop(0)))
        yield chunk_id, result


def run_chunked(
    template,
    output,
    *,
    command: str,
    params: dict[str, Any],
    input_id: dict[str, Any],
    status_enum,
    overwrite: bool = False,
    progress: bool = True,
    client=None,
    echo: Callable[[str], None] = print,
) -> RunSummary:
    """Compute the lazy result ``template`` chunk by chunk into ``output``, resumably.

    Parameters
    ----------
    template : xarray.Dataset
        The lazy (dask-backed) result, with a ``status`` variable over the pixel dims; its
        pixel chunks are the units of work and the Zarr chunks of the store.
    output : path
        ``.zarr``, ``.tif``/``.tiff`` or ``.nc``.
    command : str
        Name of the computation (``"monitor"``, ``"stl"``), part of the run's identity.
    params : dict
        The parameters that determine the result (part of the run's identity).
    input_id : dict
        The input's identity, from :func:`input_identity`.
    status_enum : IntEnum
        Status codes of ``status`` (``BfastStatus``, ``StlStatus``), for the summary.
    overwrite : bool
        Replace an existing output (or a run in progress) made with other parameters.
    progress : bool
        Show a tqdm progress bar over the chunks (on stderr).
    client : distributed.Client, optional
        Compute the chunks on this cluster; each is still written and recorded as it arrives.
    echo : callable
        Where messages go.

    Returns
    -------
    RunSummary

    Raises
    ------
    RunMismatch
        ``output`` (or a run in progress into it) exists with other parameters, another
        input or chunk grid, or was not written by a resumable run; and not ``overwrite``.
    RunLocked
        Another process is running into ``output`` now.
    """
    output = Path(output)
    with exclusive_lock(output):
        return _run(template, output, command=command, params=params, input_id=input_id, status_enum=status_enum,
                    overwrite=overwrite, progress=progress, client=client, echo=echo)


def _run(template, output: Path, *, command, params, input_id, status_enum, overwrite, progress, client, echo):
    from tqdm.auto import tqdm

    store = chunk_store_path(output)
    final_record_path = record_path(output)
    pixel_dims = [d for d in template["status"].dims if d != "start"]
    grid = ChunkGrid.of(template, pixel_dims)
    uneven = [d for d, sizes in zip(grid.dims, grid.chunks)
              if len(set(sizes[:-1])) > 1 or (len(sizes) > 1 and sizes[-1] > sizes[0])]
    if uneven:
        raise ValueError(f"the result's chunks along {', '.join(uneven)} are uneven "
                         f"({'; '.join(str(grid.chunks[grid.dims.index(d)]) for d in uneven)}): a Zarr store needs "
                         "equal chunks but a smaller last one; rechunk the input regularly")
    for name, variable in template.data_vars.items():
        other = [d for d in variable.dims if d not in pixel_dims and variable.chunks
                 and len(variable.chunksizes[d]) > 1]
        if other:
            raise ValueError(f"{name} is chunked along {', '.join(other)}: only pixel dims may be chunked")
    # the variables too: a run of another tscube that writes other outputs (a store without
    # one of them) is refused, not resumed into a store it cannot fill
    identity = {"command": command, "params": _jsonable(params), "input": _jsonable(input_id),
                "grid": grid.as_record(), "variables": ",".join(sorted(map(str, template.data_vars))),
                "version": RECORD_VERSION}

    record = _resume_or_refuse(output, store, final_record_path, identity, overwrite, echo)
    if record is not None and record.get("complete"):
        summary = _summarise(record, status_enum, 0, output)
        summary.up_to_date = True
        echo(f"{output} is complete (same parameters and input): nothing to compute")
        return summary
    if record is None:
        record = dict(identity, finished={}, sessions=[], complete=False)
        _create_store(template, store, record)

    session = {"pid": os.getpid(), "began": datetime.now(timezone.utc).isoformat(timespec="seconds"),
               "computed": [], "seconds": 0.0}
    record["sessions"].append(session)
    pending = _pending(record, grid)
    if record["finished"]:
        echo(f"resuming {output}: {len(record['finished'])} of {len(grid)} chunks already done")
    delay = float(os.environ.get(CHUNK_DELAY_ENV, "0") or 0)
    began = time.perf_counter()
    if client is not None:
        n_workers = max(1, len(client.scheduler_info().get("workers", {})))
        chunks = _compute_on_client(template, grid, pending, client, in_flight=2 * n_workers)
    else:
        from . import config

        chunks = _compute_local(template, grid, pending, ahead=int(config.RUN_CHUNKS_AHEAD))
    writer = _StoreWriter(store, list(template.data_vars))
    bar = tqdm(total=len(grid), initial=len(grid) - len(pending), desc="chunks", unit="chunk", file=sys.stderr,
               disable=not progress, dynamic_ncols=True)
    try:
        for chunk_id, computed in chunks:
            if delay:
                time.sleep(delay)
            writer.write(computed, grid.region(chunk_id))
            record["finished"][str(chunk_id)] = _chunk_stats(computed, pixel_dims, status_enum)
            session["computed"].append(chunk_id)
            session["seconds"] = round(time.perf_counter() - began, 3)
            _write_json_atomic(store / RECORD_NAME, record)  # the chunk's commit
            bar.update(1)
    finally:
        bar.close()
        writer.close()
    session["seconds"] = round(time.perf_counter() - began, 3)

    summary = _summarise(record, status_enum, len(session["computed"]), output)
    _finish_store(store, summary)
    record["complete"] = True
    record["summary"] = summary.as_record()
    if _is_zarr(output):
        _write_json_atomic(store / RECORD_NAME, record)
    else:
        _assemble(store, output)
        _write_json_atomic(store / RECORD_NAME, record)
        _write_json_atomic(final_record_path, record)
        _remove(store)
    return summary


def _assemble(store: Path, output: Path) -> None:
    """Write ``output`` (.tif / .nc) from the finished chunk store, atomically."""
    import xarray as xr

    from .io import write_result

    with quiet_zarr(), xr.open_zarr(store, decode_coords="all") as ds:
        write_result(ds.load(), output)  # in memory: HDF5 written from threaded dask chunks is not byte-stable


def _resume_or_refuse(output: Path, store: Path, final_record_path: Path, identity: dict, overwrite: bool,
                      echo) -> dict | None:
    """The record to continue from (None: start afresh), or raise :class:`RunMismatch`."""
    in_progress = read_json(store / RECORD_NAME) if store.is_dir() else None
    finished = None
    if not _is_zarr(output) and in_progress is None:
        finished = read_json(final_record_path)
    candidate = in_progress if in_progress is not None else finished
    if candidate is not None and finished is not None and not output.exists():
        candidate = finished = None  # the output was removed: run again
        _remove(final_record_path)
    if candidate is not None:
        known = {key: candidate.get(key) for key in identity}
        differences = _differences(known, identity)
        if not differences and (in_progress is not None or output.exists()):
            return candidate
        if not overwrite:
            what = "a run in progress into" if in_progress is not None and not _is_zarr(output) else "the existing"
            raise RunMismatch(
                f"{what} output {output.name} was made with other parameters or input: "
                f"{'; '.join(differences[:8])}{' ...' if len(differences) > 8 else ''}. "
                "Pass --overwrite to replace it, or write to another output"
            )
        echo(f"overwriting {output} (different parameters or input: {', '.join(d.split(' ')[0] for d in differences)})")
    elif output.exists() or (store.exists() and _is_zarr(output)):
        if not overwrite:
            raise RunMismatch(f"output {output.name} exists and was not written by a resumable tscube run; "
                              "pass --overwrite to replace it")
        echo(f"overwriting {output}")
    # start afresh: forget whatever partial run there is (the old .tif/.nc output stays
    # until the new one replaces it atomically; a .zarr output is the store itself)
    if store.exists():
        _remove(store)
    if not _is_zarr(output) and final_record_path.exists():
        _remove(final_record_path)
    return None
