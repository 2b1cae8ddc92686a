"""tscube._kernel_io: positional reads and writes from numba kernels, whole or failed."""

from __future__ import annotations

import os

import numpy as np

from tscube._kernel_io import read_exactly, write_exactly


def test_reads_and_writes_at_offsets(tmp_path):
    path = tmp_path / "data.bin"
    np.arange(100, dtype=np.float64).tofile(path)
    fd = os.open(path, os.O_RDWR)
    try:
        rows = np.empty((2, 3))
        assert read_exactly(fd, rows, 8 * 10)
        np.testing.assert_array_equal(rows.ravel(), np.arange(10, 16))
        assert write_exactly(fd, np.full(4, -1.0), 8 * 50)
        assert not read_exactly(fd, np.empty(10), 8 * 95)  # the file ends first
    finally:
        os.close(fd)
    expected = np.arange(100, dtype=np.float64)
    expected[50:54] = -1
    np.testing.assert_array_equal(np.fromfile(path), expected)
    read_only = os.open(path, os.O_RDONLY)
    try:
        assert not write_exactly(read_only, np.zeros(2), 0)  # a failed write is reported, not looped on
    finally:
        os.close(read_only)
