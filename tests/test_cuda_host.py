"""tscube._cuda_host: what the cuda engines share on the host side (no GPU needed)."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from tscube import _cuda_host, config


def test_numpy_that_numba_cuda_cannot_compile_with_is_named(monkeypatch):
    def broken(name, *args):
        raise AttributeError("module 'numpy' has no attribute 'row_stack'")

    monkeypatch.setattr(importlib, "import_module", broken)
    with pytest.raises(RuntimeError, match=r"numpy<2\.5"):
        _cuda_host.check_numpy_support()


class _Context:
    def get_memory_info(self):
        return 1000, 4000  # free, total


class _Cuda:
    def current_context(self):
        return _Context()


def test_chunks_count_the_buffers_a_run_would_reuse_as_free(monkeypatch):
    monkeypatch.setattr(config, "CUDA_MEMORY_FRACTION", 0.5)
    assert _cuda_host.chunk_items(_Cuda(), 10_000, 10) == 25  # 0.5 * 1000 / (2 * 10)
    assert _cuda_host.chunk_items(_Cuda(), 10_000, 10, held_bytes=1000) == 50


def test_one_engine_keeps_buffers_at_a_time():
    bfast_like, stl_like = _cuda_host.KeptBuffers(), _cuda_host.KeptBuffers()
    bfast_like.get("a", 10, 2, _Set)
    stl_like.get("b", 5, 1, _Set)
    assert bfast_like.sets == [] and len(stl_like.sets) == 1
    _cuda_host.release_buffers()


def test_chunks_fit_two_buffer_sets_in_the_budget(monkeypatch):
    monkeypatch.setattr(config, "CUDA_CHUNK_BYTES", 2 * 10 * 100 + 99)
    assert _cuda_host.chunk_items(None, 1000, 100) == 10
    assert _cuda_host.chunk_items(None, 7, 100) == 7
    monkeypatch.setattr(config, "CUDA_CHUNK_PIXELS_MAX", 4)
    assert _cuda_host.chunk_items(None, 1000, 100) == 4
    monkeypatch.setattr(config, "CUDA_CHUNK_BYTES", 1)
    assert _cuda_host.chunk_items(None, 1000, 100) == 1  # never zero


class _Stream:
    def __init__(self):
        self.synchronized = 0

    def synchronize(self):
        self.synchronized += 1


class _Set:
    def __init__(self, chunk):
        self.chunk = chunk
        self.pending = "stale"
        self.stream = _Stream()


def test_kept_buffers_are_reused_only_when_they_fit(monkeypatch):
    kept = _cuda_host.KeptBuffers()
    first = kept.get("a", 10, 2, _Set)
    assert [b.chunk for b in first] == [10, 10] and all(b.pending is None for b in first)
    assert kept.get("a", 8, 1, _Set)[0] is first[0]  # smaller fits
    assert first[0].stream.synchronized == 1  # copies of a failed run are waited for
    assert kept.held_items() == 20
    assert kept.get("a", 12, 2, _Set)[0] is not first[0]  # larger does not
    again = kept.get("a", 12, 2, _Set)
    kept.drop_unless("a")
    assert kept.sets == again
    kept.drop_unless("b")
    assert kept.sets == []
    monkeypatch.setattr(config, "CUDA_KEEP_BUFFERS", False)
    kept.get("b", 3, 1, _Set)
    assert kept.sets == []
    monkeypatch.setattr(config, "CUDA_KEEP_BUFFERS", True)
    kept.get("c", 3, 1, _Set)
    _cuda_host.release_buffers()
    assert kept.sets == [] and kept.key is None


def test_view_takes_the_leading_part():
    flat = np.arange(20)
    np.testing.assert_array_equal(_cuda_host.view(flat, 2, 3), [[0, 1, 2], [3, 4, 5]])


class _Steps:
    def add_to(self, timings):
        if timings is not None:
            timings["kernels"] = timings.get("kernels", 0.0) + 1.0


def test_stream_chunks_reuse_a_set_only_after_collecting_its_chunk():
    sets = [_Set(3), _Set(3)]
    for buf in sets:
        buf.pending = None
    log, timings = [], {}

    def launch(buf, start, stop):
        log.append(("launch", sets.index(buf), start, stop))
        return _Steps()

    def collect(buf, start, stop):
        log.append(("collect", sets.index(buf), start, stop))

    _cuda_host.stream_chunks(10, 3, sets, launch, collect, timings)
    assert log == [("launch", 0, 0, 3), ("launch", 1, 3, 6), ("collect", 0, 0, 3), ("launch", 0, 6, 9),
                   ("collect", 1, 3, 6), ("launch", 1, 9, 10), ("collect", 0, 6, 9), ("collect", 1, 9, 10)]
    assert [buf.stream.synchronized for buf in sets] == [2, 2]
    assert timings == {"kernels": 4.0} and all(buf.pending is None for buf in sets)
