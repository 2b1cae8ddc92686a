"""The near-real-time monitoring state on disk, updated in place at O(1) values per pixel.

A saved state (``tscube monitor --update``, :meth:`tscube.BfastMonitor.save` to ``.zarr``)
is a Zarr store holding the BFAST Monitor result over every date so far and ``alert``,
plus the directory ``.tscube-state`` with the state arrays of :mod:`tscube.bfast.nrt` as
plain ``.npy`` files:

* ``static/``: what the fit fixed (coefficients, sigma, history, status, the history
  tail of the MOSUM window); never written again;
* ``hot-0/hot.npy`` and ``hot-1/hot.npy``: what an update changes (counts, running sums,
  first break, magnitude, median window, window pointer), one record per pixel
  (:data:`tscube.bfast.nrt.HOT_SCALARS`), ``hot-{g % 2}`` for generation ``g``; the
  other slot holds an older generation, whose bytes the next update overwrites;
* ``residuals.f8``: every monitoring residual, one row of float64 per date, raw;
* ``state.json``: the committed generation, its number of residual rows and its dates.

An update from generation ``g`` (:func:`update_files`) goes band by band of grid rows:
it reads the band's records of ``hot-{g % 2}`` into a buffer, where the update kernel
updates them and computes the band's result, and writes them into the other slot (and
the residuals of the new dates into rows past the committed ones); the band's result is
written into the Zarr store, in place and only where it can have changed, while the next
band is computed. Then it commits by replacing ``state.json`` (one rename). Nothing
that generation ``g`` reads is written before the commit, so a killed update leaves the
previous state whole, and running it again redoes the same writes: the same bytes. The
result, written before the commit, says which state it shows in its attribute
``tscube_state_generation`` (-1 while it is being rewritten, the new generation once
the update has committed); :func:`repair_result` rewrites the whole result from the
committed state when it shows another one (an update was killed). The update reads the
new images, the static arrays, one slot and the residual rows it needs (the one leaving
the MOSUM window; all of a pixel's, when its median has walked out of its window), and
writes one slot, the new rows and the result.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numba
import numpy as np

from ..core.inputs import check_numeric_dtype, kernel_nodata
from ..monitor import OUTPUT_DTYPES, BfastStatus
from ._cpu import (CHANGED_BREAK, CHANGED_INF, CHANGED_STATUS, CODE_KINDS, HOT_WIDTH, RECORD_LANES, RESULT_OUTPUTS,
                   update_band_files)
from .dataset import STATE_PREFIX, normalise_dates, state_lanes
from .state import (OPTIONAL, READABLE_VERSIONS, STATE_FIELDS, STATE_VERSION, STATIC, absent, check_image_dtype,
                    fit_arrays, hot_record, monitoring_test, new_design, result_buffers, state_part, state_result,
                    with_hot)

#: The directory of the state inside a saved state's Zarr store.
STATE_DIR = ".tscube-state"
MANIFEST = "state.json"
RESIDUALS = "residuals.f8"
#: The file of a slot: the records of what an update changes (kept for two generations).
HOT_FILE = "hot.npy"
#: Outputs that only the fit sets (an update leaves them as they are in the store; not
#: ``history_start``: a time on the datetime grid, which moves by an ulp as dates come).
FIT_OUTPUTS = ("n_history", "critval")
#: Zarr attribute: the state generation that the stored result shows.
GENERATION_ATTR = "tscube_state_generation"
#: Pixels of the result computed and updated at a time (whole rows of the grid; whole
#: chunk rows where an array is written through zarr): an update's band of records (15
#: MiB) stays in the cache between its read, its update and its write.
BAND_PIXELS = 1 << 16
#: Environment variable (tests): seconds to wait between an update's writes and its commit.
PAUSE_ENV = "TSCUBE_TEST_NRT_PAUSE"


def state_dir(root) -> Path:
    return Path(root) / STATE_DIR


def has_state(root) -> bool:
    """Whether ``root`` holds a committed state directory."""
    return (state_dir(root) / MANIFEST).is_file()


def _hot_dir(directory: Path, generation: int) -> Path:
    return directory / f"hot-{generation % 2}"


def _write_json_atomic(path: Path, data: dict) -> None:
    """As :func:`tscube.runs._write_json_atomic`, but with one temporary name (no process
    id): a rerun after a kill overwrites what the kill left, so the directory ends up with
    the same files (updates hold the store's lock)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, sort_keys=True, separators=(",", ":")) + "\n")
    os.replace(tmp, path)


def _dates_json(dates: np.ndarray) -> dict:
    if np.issubdtype(dates.dtype, np.datetime64):
        return {"kind": "datetime64[ns]", "values": [str(d) for d in np.asarray(dates, dtype="datetime64[ns]")]}
    return {"kind": "decimal", "values": [float(d) for d in dates]}  # repr round-trips every float64


def _dates_from_json(entry: dict) -> np.ndarray:
    if entry["kind"] == "datetime64[ns]":
        return np.array(entry["values"], dtype="datetime64[ns]")
    return np.array(entry["values"], dtype=np.float64)


def read_manifest(root) -> dict:
    manifest = json.loads((state_dir(root) / MANIFEST).read_text())
    if manifest.get("version") not in READABLE_VERSIONS:
        raise ValueError(f"monitoring state version {manifest.get('version')} is not this tscube's "
                         f"({', '.join(map(str, READABLE_VERSIONS))}); fit again")
    return manifest


def state_dates(root) -> np.ndarray:
    """Every date the committed state has monitored."""
    return _dates_from_json(read_manifest(root)["dates"])


def write_state(root, get, dates, n_pixels: int, *, last_update_dates: int) -> None:
    """Write a new state directory into the store ``root`` (generation 0): ``get(name)``
    gives each state array over flat pixel lanes (one at a time, so that a large state
    needs the memory of its largest array only). Written under a temporary name and
    renamed into place."""
    final = state_dir(root)
    tmp = final.with_name(final.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    for folder in ("static", "hot-0", "hot-1"):
        (tmp / folder).mkdir(parents=True)
    for name in STATIC:
        np.save(tmp / "static" / f"{name}.npy", np.ascontiguousarray(get(name), dtype=STATE_FIELDS[name]))
    # both slots of what an update changes: an update then overwrites the bytes of the
    # other generation's file rather than allocating new ones
    hot = hot_record(get, n_pixels, np.lib.format.open_memmap(tmp / "hot-0" / HOT_FILE, mode="w+",
                                                                 dtype=np.float64, shape=(n_pixels, HOT_WIDTH)))
    np.save(tmp / "hot-1" / HOT_FILE, hot)
    del hot
    residuals = np.ascontiguousarray(get("residuals"), dtype=np.float64)
    residuals.tofile(tmp / RESIDUALS)
    _write_json_atomic(tmp / MANIFEST, {"version": STATE_VERSION, "generation": 0, "pixels": int(n_pixels),
                                        "rows": int(residuals.shape[0]), "dates": _dates_json(np.asarray(dates)),
                                        "last_update_dates": int(last_update_dates)})
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)


def load_state(root, *, mmap_mode=None) -> tuple[dict, np.ndarray, int]:
    """``(state, dates, generation)`` of the committed state (arrays in memory, or
    memory-mapped read-only with ``mmap_mode="r"``)."""
    directory = state_dir(root)
    manifest = read_manifest(root)
    generation = int(manifest["generation"])
    state = {name: _static(directory, name, mmap_mode) for name in STATIC}
    state = with_hot(state, np.load(_hot_dir(directory, generation) / HOT_FILE, mmap_mode=mmap_mode))
    shape = (int(manifest["rows"]), int(manifest["pixels"]))
    if mmap_mode is None:
        state["residuals"] = np.fromfile(directory / RESIDUALS, dtype=np.float64,
                                         count=shape[0] * shape[1]).reshape(shape)
    else:
        state["residuals"] = _residual_rows(directory / RESIDUALS, shape, "r")
    return state, _dates_from_json(manifest["dates"]), generation


def _static(directory: Path, name: str, mmap_mode) -> np.ndarray:
    """A state array of the fit from its file (an :data:`OPTIONAL` one that a version 5
    state lacks: empty)."""
    path = directory / "static" / f"{name}.npy"
    if name in OPTIONAL and not path.is_file():
        return absent(name)
    return np.load(path, mmap_mode=mmap_mode)


def _residual_rows(path: Path, shape: tuple[int, int], mode: str) -> np.ndarray:
    if shape[0] * shape[1] == 0:
        return np.zeros(shape)
    return np.asarray(np.memmap(path, dtype=np.float64, mode=mode, shape=shape))


def _slot_file(path: Path, like: np.ndarray) -> None:
    """Make ``path`` an ``.npy`` file shaped and typed as ``like`` (kept when it already is:
    its bytes are then overwritten, no new blocks)."""
    if path.is_file():
        existing = np.load(path, mmap_mode="r")
        if existing.shape == like.shape and existing.dtype == like.dtype and existing.flags.c_contiguous:
            return
    np.lib.format.open_memmap(path, mode="w+", dtype=like.dtype, shape=like.shape)
    # blocks allocated now: a full disk then fails before the update writes anything
    fd = os.open(path, os.O_RDWR)
    try:
        os.posix_fallocate(fd, 0, os.fstat(fd).st_size)
    finally:
        os.close(fd)


class _Records:
    """The records of a slot's ``.npy`` file, checked (shape, type, layout) and opened for
    the update kernel's reads or writes of rows at their offsets (``offset``: the first
    record's byte)."""

    def __init__(self, path: Path, mode: str, n_pixels: int):
        mapped = np.load(path, mmap_mode="r")
        if mapped.shape != (n_pixels, HOT_WIDTH) or mapped.dtype != np.float64 or not mapped.flags.c_contiguous:
            raise ValueError(f"{path} does not hold {n_pixels} records of this tscube's state")
        self.path, self.mode, self.offset = path, mode, mapped.offset

    def __enter__(self):
        self.handle = open(self.path, self.mode)
        return self

    def __exit__(self, *exc):
        self.handle.close()


def _write_all(fd: int, data: np.ndarray, at: int, path: Path) -> None:
    """The bytes of ``data`` (contiguous) into the file ``fd`` from offset ``at``."""
    view = memoryview(data).cast("B")
    done = 0
    while done < len(view):
        wrote = os.pwrite(fd, view[done:], at + done)
        if wrote <= 0:
            raise OSError(f"could not write {path}")
        done += wrote


class _ChunkFiles:
    """Bands of rows written in place into the chunk files of a Zarr array stored as raw
    bytes (format 3, no filter, compressor or sharding, little-endian: what
    :func:`tscube.bfast.nrt.store_uncompressed` writes), one ``pwrite`` per chunk: the bytes
    zarr would write (edge chunks padded with the fill value, no file for a chunk that is
    all fill), without replacing each chunk file whole; a band's rows of a chunk are
    contiguous in its file, so a band covering part of a chunk is written without reading
    the rest. The chunk files stay open until :meth:`close` (an update writes each of them
    from several bands). ``None`` from :meth:`of` for any other layout."""

    def __init__(self, array, folder: Path):
        import itertools

        self.array, self.folder = array, folder
        self.lock = threading.Lock()  # bands of one chunk row may be written by two threads
        self.chunks, self.shape = tuple(array.chunks), tuple(array.shape)
        self.dtype = np.dtype(array.dtype).newbyteorder("<")
        self.fill = array.fill_value
        self.chunk_bytes = int(np.prod(self.chunks, dtype=np.int64)) * self.dtype.itemsize
        self.row_bytes = int(np.prod(self.chunks[1:], dtype=np.int64)) * self.dtype.itemsize
        # the chunks of a row of chunks: their index and where they lie in a row of the array
        self.tiles = [(tile, tuple(slice(i * c, min((i + 1) * c, n)) for i, c, n in zip(tile, self.chunks[1:],
                                                                                       self.shape[1:])))
                      for tile in itertools.product(*(range(-(-n // c)) for n, c in zip(self.shape[1:],
                                                                                       self.chunks[1:])))]
        self.files: dict[tuple, int | None] = {}  # chunk -> open file (None: none, all fill)

    @classmethod
    def of(cls, array):
        from zarr.codecs import BytesCodec
        from zarr.storage import LocalStore

        endian = getattr(getattr(array, "serializer", None), "endian", None)
        if (array.metadata.zarr_format != 3 or array.filters or array.compressors
                or not isinstance(array.serializer, BytesCodec) or getattr(endian, "value", "little") != "little"
                or not isinstance(array.store, LocalStore)):
            return None
        return cls(array, Path(array.store.root) / array.path)

    def write_rows(self, values: np.ndarray, band: slice, where: np.ndarray | None = None,
                   scratch: np.ndarray | None = None) -> None:
        """``values`` ``(band rows,) + shape[1:]`` into rows ``band`` of the array; with
        ``where`` (shaped as ``values``), only into the chunks where it has a True;
        ``scratch``: bytes to copy a chunk's part of the band into (new memory otherwise)."""
        first = self.chunks[0]
        for row_tile in range(band.start // first, (band.stop - 1) // first + 1):
            lo, hi = max(band.start, row_tile * first), min(band.stop, (row_tile + 1) * first)
            rows = slice(lo - band.start, hi - band.start)
            for tile, inside in self.tiles:
                region = (rows,) + inside
                if where is not None and not where[region].any():
                    continue
                part = values[region]
                size = (hi - lo) * self.row_bytes
                if part.shape[1:] != self.chunks[1:]:  # an edge chunk: zarr pads it with the fill value
                    block = np.full((hi - lo,) + self.chunks[1:], self.fill, dtype=self.dtype)
                    block[(slice(None),) + tuple(slice(0, s.stop - s.start) for s in inside)] = part
                elif part.flags.c_contiguous and part.dtype == self.dtype:
                    block = part
                else:
                    block = (np.empty(size, np.uint8) if scratch is None or scratch.nbytes < size
                             else scratch[:size]).view(self.dtype).reshape(part.shape)
                    np.copyto(block, part)
                self._write((row_tile,) + tile, (lo - row_tile * first) * self.row_bytes, block)

    def _file(self, chunk: tuple, block: np.ndarray) -> int | None:
        """The open chunk file of ``chunk``; made whole first (of fill values) when it is
        missing and ``block`` is not all fill (None, none made, when it is)."""
        fd = self.files.get(chunk, -1)
        if fd is not None and fd >= 0:
            return fd
        with self.lock:
            fd = self.files.get(chunk, -1)
            if fd is not None and fd >= 0:
                return fd
            path = self.folder / self.array.metadata.encode_chunk_key(chunk)
            if not path.exists():  # zarr stores no chunk that is all fill: keep it so, or make it whole
                fill = np.isnan(block) if self.dtype.kind == "f" and np.isnan(self.fill) else block == self.fill
                if fill.all():
                    return None
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp = path.with_name(path.name + ".tmp")
                np.full(self.chunks, self.fill, dtype=self.dtype).tofile(tmp)
                os.replace(tmp, path)
            fd = os.open(path, os.O_WRONLY)
            if os.fstat(fd).st_size != self.chunk_bytes:
                os.close(fd)
                raise OSError(f"{path} is not a whole uncompressed chunk")
            self.files[chunk] = fd
            return fd

    def _write(self, chunk: tuple, offset: int, block: np.ndarray) -> None:
        fd = self._file(chunk, block)
        if fd is not None:
            _write_all(fd, block, offset, self.folder)

    def close(self) -> None:
        with self.lock:
            for fd in self.files.values():
                if fd is not None and fd >= 0:
                    os.close(fd)
            self.files.clear()


def update_files(root, model: dict, values: np.ndarray, new_dates, group=None) -> tuple[int, dict]:
    """Monitor the new images ``values`` ``(T, P)`` at ``new_dates`` into the state of
    ``root``, rewrite its result and commit; returns the new generation and the result's
    summary (:attr:`_ResultBands.summary`).

    Band by band of grid rows (:data:`BAND_PIXELS`, or whole chunk rows of an array
    written through zarr; what bounds the memory of the new values as float64): the
    band's records are read from the committed slot into a buffer, updated by the kernel,
    which also computes the band's result, and written to the other
    slot; the new residuals go to rows past the committed ones; the result is written in
    place while the next band is computed, only the outputs that can have changed: the
    status, ``sigma`` and ``rmse`` where a pixel's first valid or first monitoring value
    came, the break where it changed, ``n_inf`` where it grew, the times of the breaks
    and history starts only if the dates' grid moved; the others wherever. The result is
    written before the commit, under the attribute ``tscube_state_generation = -1``: a
    kill leaves a result that :func:`repair_result` rewrites from the committed state.
    ``group``: the store opened by :func:`open_result`, when the caller has it."""
    from ...runs import quiet_zarr
    from ...timeaxis import build_time_axis

    check_image_dtype(model, values)
    directory = state_dir(root)
    manifest = read_manifest(root)
    generation = int(manifest["generation"])
    dates = _dates_from_json(manifest["dates"])
    all_dates, time, new, X = new_design(model, dates, new_dates)  # refuses dates that are not later
    rows, n_pixels = int(manifest["rows"]), int(manifest["pixels"])
    values = np.ascontiguousarray(values)
    check_numeric_dtype(values, "images")
    if values.shape[1] != n_pixels:
        raise ValueError(f"new images have {values.shape[1]} pixels, the state {n_pixels}")
    n_new = len(all_dates) - len(dates)
    group = open_result(root) if group is None else group
    shown = result_generation(group)

    # copy-on-write maps: typed as the in-memory state's arrays (one compiled kernel), and
    # nothing written to them could reach the files
    static = {name: np.asarray(_static(directory, name, "c")) for name in STATIC}
    current, following = _hot_dir(directory, generation), _hot_dir(directory, generation + 1)
    following.mkdir(exist_ok=True)
    _slot_file(following / HOT_FILE, np.load(current / HOT_FILE, mmap_mode="r"))
    path = directory / RESIDUALS
    total = rows + n_new
    with open(path, "r+b") as handle:  # the committed rows stay; later ones are this update's
        handle.truncate(total * n_pixels * 8)  # (rows of a killed, longer update cut)
        if n_new and hasattr(os, "posix_fallocate"):  # (not on macOS) blocks allocated now: a full
            # disk then fails before the update writes anything
            os.posix_fallocate(handle.fileno(), rows * n_pixels * 8, n_new * n_pixels * 8)
    state = dict(static, residuals=_residual_rows(path, (rows, n_pixels), "c"))
    grid_moved = not np.array_equal(build_time_axis(dates, model["freq"]).time, time[:len(dates)])
    with quiet_zarr():
        group.attrs.update({GENERATION_ATTR: -1})  # being rewritten
        result = _ResultBands(group)
        scratch = threading.local()
        nodata, has_nodata = kernel_nodata(values, model["nodata"])
        update = (X, new.astype(np.int64), rows, fit_arrays(state), CODE_KINDS, monitoring_test(model),
                  state["residuals"], time, len(dates))
        with _Records(current / HOT_FILE, "rb", n_pixels) as source, \
                _Records(following / HOT_FILE, "r+b", n_pixels) as target, open(path, "r+b") as residual_file:

            def update_band(band: slice, pixels: slice, outputs: dict) -> tuple[dict | None, np.ndarray]:
                if not hasattr(scratch, "record"):
                    scratch.record = np.empty((RECORD_LANES, HOT_WIDTH))
                tally = np.zeros(258, dtype=np.int64)
                files = (source.handle.fileno(), source.offset, target.handle.fileno(), target.offset,
                         residual_file.fileno(), rows * n_pixels * 8)
                failed = update_band_files(values, nodata, has_nodata, pixels.start, pixels.stop, *update,
                                           tuple(outputs[name] for name in RESULT_OUTPUTS), scratch.record, files,
                                           n_pixels, tally)
                if failed:
                    raise OSError(f"could not read {source.path}" if failed == -1
                                  else f"could not write {target.path} or {path}")
                return None if shown != generation else _where(outputs["changes"], grid_moved), tally

            result.run(update_band, threads=numba.get_num_threads())
        state.clear()  # the maps closed (their pages written back by the system)
        if os.environ.get(PAUSE_ENV):  # tests kill the update here
            from time import sleep

            sleep(float(os.environ[PAUSE_ENV]))
        _write_json_atomic(directory / MANIFEST, dict(manifest, generation=generation + 1, rows=total,
                                                      dates=_dates_json(all_dates), last_update_dates=n_new))
        summary = result.summary
        _mark_result(root, group, all_dates, summary, generation + 1)
    return generation + 1, summary


def _where(changes: np.ndarray, grid_moved: bool) -> dict[str, np.ndarray]:
    """Where each output can differ from the result before an update, from the bits of
    ``changes`` (absent: anywhere)."""
    status = (changes & CHANGED_STATUS) != 0
    broke = (changes & (CHANGED_STATUS | CHANGED_BREAK)) != 0
    where = {"status": status, "sigma": status, "rmse": status, "break_index": broke,
             "n_inf": (changes & CHANGED_INF) != 0}
    if not grid_moved:
        where.update(break_time=broke, history_start=np.zeros_like(status))
    return where


def _mark_result(root, group, dates, summary: dict, generation: int) -> None:
    """The result's attributes once it shows the state ``generation`` (that one last)."""
    import zarr

    group.attrs.update({"tscube_last_date": str(dates[-1]), "pixels_processed": summary["pixels"],
                        "status_counts": ", ".join(f"{k}: {v}" for k, v in summary["status_counts"].items()),
                        "breaks_found": summary["breaks"]})
    group.attrs.update({GENERATION_ATTR: int(generation)})
    if group.metadata.consolidated_metadata is None:  # (an update changes no array's metadata)
        zarr.consolidate_metadata(str(root))


class _ResultBands:
    """The result and ``alert`` of a saved state's Zarr store (the open ``group``), computed
    and written band by band of grid rows (:data:`BAND_PIXELS`), each band by one thread
    (:meth:`run`): in place into the chunk files where they are raw bytes
    (:class:`_ChunkFiles`), else through zarr in whole chunk rows. Counts the statuses,
    breaks and alerts."""

    def __init__(self, group):
        self.grid = tuple(group["status"].shape)
        self.row_pixels = int(np.prod(self.grid[1:], dtype=np.int64))
        self.names = [name for name in (*OUTPUT_DTYPES, "alert") if name not in FIT_OUTPUTS]
        self.arrays = {name: group[name] for name in self.names}
        self.in_place = {name: _ChunkFiles.of(array) for name, array in self.arrays.items()}
        height = math.lcm(*(array.chunks[0] for name, array in self.arrays.items() if self.in_place[name] is None))
        self.band_rows = height * max(1, BAND_PIXELS // max(self.row_pixels * height, 1))
        self.lanes = min(self.band_rows, self.grid[0]) * self.row_pixels
        self.codes = np.zeros(256, dtype=np.int64)  # status counts, by the code's byte
        self.breaks = self.alerts = 0
        self.counting = threading.Lock()

    def run(self, compute, threads: int = 1) -> None:
        """Call ``compute(band, pixels, outputs)`` for every band (its grid rows, its flat
        pixels, the buffers of :func:`tscube.bfast.nrt.result_buffers` its result goes to),
        on ``threads`` threads, and write each band's result from the thread that computed
        it (where ``compute`` returns ``(where, tally)``: where, as :func:`_where`, or None
        for everywhere; the band's counts, as :func:`tscube.bfast.nrt.update_band_files` makes them, or None). One
        thread per core, each doing all of a band's work, keeps every core busy without
        more threads than cores; each thread reuses its buffers (the first touch of new
        memory costs more than a band's result)."""
        scratch = threading.local()

        def band_work(band: slice) -> None:
            if not hasattr(scratch, "outputs"):
                scratch.outputs = result_buffers(self.lanes)
                scratch.copy = np.empty(self.lanes * 8, dtype=np.uint8)  # a band's part of a chunk
            pixels = slice(band.start * self.row_pixels, band.stop * self.row_pixels)
            outputs = {name: buffer[:pixels.stop - pixels.start] for name, buffer in scratch.outputs.items()}
            self._put(band, outputs, *compute(band, pixels, outputs), scratch.copy)

        bands = [slice(row, min(self.grid[0], row + self.band_rows)) for row in range(0, self.grid[0], self.band_rows)]
        try:
            if threads <= 1:
                for band in bands:
                    band_work(band)
                return
            with ThreadPoolExecutor(max_workers=threads) as pool:
                futures = [pool.submit(band_work, band) for band in bands]
                try:
                    for future in futures:
                        future.result()
                except BaseException:
                    for future in futures:
                        future.cancel()
                    raise
        finally:
            for files in self.in_place.values():
                if files is not None:
                    files.close()

    def _put(self, band: slice, outputs: dict, where: dict | None, tally: np.ndarray | None,
             scratch: np.ndarray) -> None:
        """Write a band's result and count it (``where``: as :func:`_where`, or None for
        everywhere; ``tally``: its counts, when the kernel made them; ``scratch``: the
        thread's bytes for the copies of its parts of chunks)."""
        where = where or {}
        shape = (band.stop - band.start,) + self.grid[1:]
        for name in self.names:
            values, mask = outputs[name].reshape(shape), where.get(name)
            mask = None if mask is None else mask.reshape(shape)
            if self.in_place[name] is not None:
                self.in_place[name].write_rows(values, band, mask, scratch)
            elif mask is None or mask.any():
                self.arrays[name][band] = values.astype(self.arrays[name].dtype, copy=False)
        if tally is None:
            codes = np.bincount(outputs["status"].view(np.uint8), minlength=256)
            breaks, alerts = int(np.count_nonzero(outputs["break_index"] >= 0)), int(np.count_nonzero(outputs["alert"]))
        else:
            codes, breaks, alerts = tally[:256], int(tally[256]), int(tally[257])
        with self.counting:
            self.codes += codes
            self.breaks += breaks
            self.alerts += alerts

    @property
    def summary(self) -> dict:
        """The status counts, breaks, alerts and pixels of the bands written."""
        counts = {int(np.uint8(code).view(np.int8)): int(self.codes[code]) for code in np.flatnonzero(self.codes)}
        return {"status_counts": {BfastStatus(code).name: n for code, n in sorted(counts.items())},
                "breaks": self.breaks, "alerts": self.alerts, "pixels": int(np.prod(self.grid))}


def write_result(root, model: dict, group=None) -> dict:
    """Rewrite the whole result and ``alert`` in the Zarr store ``root`` from its committed
    state, in bands of rows (:class:`_ResultBands`) computed on every core, then its
    attributes (the generation shown last); returns the summary of
    :attr:`_ResultBands.summary`. An update writes its result as it goes
    (:func:`update_files`); this is for a result that shows another state
    (:func:`repair_result`; ``group``: the store opened by :func:`open_result`)."""
    from ...runs import quiet_zarr
    from ...timeaxis import build_time_axis

    manifest = read_manifest(root)
    state, dates, generation = load_state(root, mmap_mode="r")
    n_old = len(dates) - int(manifest["last_update_dates"])
    time = build_time_axis(dates, model["freq"]).time
    group = open_result(root) if group is None else group
    with quiet_zarr():
        result = _ResultBands(group)

        def result_band(band: slice, pixels: slice, outputs: dict) -> tuple[None, None]:
            part = state_part(state, pixels)
            state_result(part, model, dates, out=outputs, time=time)
            np.greater_equal(part["break_index"], n_old, out=outputs["alert"])
            return None, None

        result.run(result_band)  # one band at a time, each on every core
        summary = result.summary
        _mark_result(root, group, dates, summary, generation)
    return summary


def open_result(root, mode: str = "r+"):
    """The Zarr group of a saved state's result, opened once for an update: its arrays'
    metadata from the consolidated metadata where the store has it (one file read, where
    opening each array reads its own; an update changes no array's metadata, and attribute
    updates keep the consolidated block), its attributes from its own metadata document."""
    import zarr

    from ...runs import quiet_zarr

    with quiet_zarr():
        return zarr.open_group(str(root), mode=mode, use_consolidated=None)


def result_generation(result) -> int | None:
    """The state generation that a saved state's result shows (None: unmarked); ``result``:
    the store's path or its group opened by :func:`open_result`."""
    group = open_result(result, "r") if isinstance(result, (str, os.PathLike)) else result
    value = group.attrs.get(GENERATION_ATTR)
    return None if value is None else int(value)


def repair_result(root, model: dict, group=None) -> bool:
    """Rewrite the result of ``root`` (its open ``group``, when the caller has it) when it does
    not show the committed state (an update killed while writing it); True if it did."""
    group = open_result(root) if group is None else group
    if result_generation(group) == int(read_manifest(root)["generation"]):
        return False
    write_result(root, model, group)
    return True


def adopt_dataset_state(root) -> None:
    """Move the ``state_*`` variables of a fitted Zarr store (the chunked fit of
    ``tscube monitor --update``) into its state directory, then drop them and the date
    coordinates from the store (the result stays). Does what a killed call left undone,
    and nothing when there is nothing left to do."""
    import zarr

    from ...runs import quiet_zarr

    root = Path(root)
    with quiet_zarr():
        group = zarr.open_group(str(root), mode="r", use_consolidated=False)
        leftover = [name for name in group.array_keys()
                    if name.startswith(STATE_PREFIX) or name in ("date", "monitor_time")]
    if not leftover and has_state(root):
        return
    if not has_state(root):
        import xarray as xr

        with quiet_zarr(), xr.open_zarr(root, consolidated=False) as ds:
            pixel_dims = tuple(ds["status"].dims)
            n_pixels = int(np.prod([ds.sizes[d] for d in pixel_dims], dtype=np.int64))
            dates = normalise_dates(ds["date"].values)
            write_state(root, lambda name: state_lanes(ds, name, pixel_dims), dates, n_pixels,
                        last_update_dates=len(dates))
    with quiet_zarr():
        group = zarr.open_group(str(root), mode="r+", use_consolidated=False)
        for name in leftover:
            del group[name]
        if GENERATION_ATTR not in group.attrs:
            group.attrs.update({GENERATION_ATTR: 0, "tscube_last_date": str(state_dates(root)[-1])})
        zarr.consolidate_metadata(str(root))
