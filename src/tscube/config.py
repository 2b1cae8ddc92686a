"""Tunables of tscube's engines, in one place (like STUMPY's ``config``).

Values are module attributes so that tests and power users can change them at run
time (``tscube.config.CPU_BLOCK_PIXELS = 1024``); :func:`reset` restores the defaults.
"""

from __future__ import annotations

_DEFAULTS = dict(
    # cpu engines: pixels per block streamed through the numba kernels. A block's
    # working set (block × T × 8 bytes) should fit in the L2/L3 cache.
    CPU_BLOCK_PIXELS=64,
    # cpu BFAST Monitor formulation: "simd" (pixel blocks as SIMD lanes, the default),
    # "blas" (the same with the masked Gram matrices by one BLAS product) or "fused" (one
    # pixel at a time); None = the engine's default (tscube.bfast.monitor._cpu.DEFAULT_GRAM).
    CPU_BFAST_GRAM=None,
    # cuda engines: threads per block for 1-D kernels, and register-tile sizes of the
    # batched masked Gram kernel.
    CUDA_THREADS_PER_BLOCK=256,
    CUDA_GRAM_TILE_PIXELS=32,
    # batched masked Gram (tscube.parallel): regressor tile (the block is its square,
    # capped at the number of regressors) and dates staged in shared memory per barrier.
    CUDA_GRAM_TILE_K=16,
    CUDA_GRAM_TILE_DATES=8,
    # ``engine="auto"`` picks CUDA only for batches at least this large (pixels × dates);
    # below it the device start-up and transfers cost more than they save.
    CUDA_AUTO_MIN_WORK=50_000_000,
    # bytes of device memory one cuda chunk may use (fraction of free memory otherwise).
    CUDA_CHUNK_BYTES=None,
    # without CUDA_CHUNK_BYTES, cuda engines use this fraction of the free device memory
    # (split over two buffer sets that alternate between two streams), and at most this
    # many pixels per chunk (bounds the pinned host staging buffers).
    CUDA_MEMORY_FRACTION=0.5,
    CUDA_CHUNK_PIXELS_MAX=131_072,
    # keep the cuda engine's device and pinned host buffers between calls (reused by the
    # next call of the same shape: allocating them costs more than the kernels on cubes
    # of ~10^5 pixels); tscube.engines.release_cuda_buffers() frees them.
    CUDA_KEEP_BUFFERS=True,
    # clustering (tscube.cluster): samples per block of the cpu kernels (each block
    # keeps its own partial sums, so results do not depend on the thread count), and
    # samples drawn for k-means++ seeding (seeding runs on this random subset).
    CLUSTER_BLOCK_SAMPLES=2048,
    CLUSTER_INIT_SAMPLES=100_000,
    # resumable runs (tscube.runs): chunks computed ahead of the one being written, so that
    # reading/computing the next chunk overlaps writing this one (memory: one chunk each).
    RUN_CHUNKS_AHEAD=1,
    # BFAST Monitor critical values outside strucchange's OLS-MOSUM table are simulated
    # (tscube.bfast.monitor.critval): paths per (h, end), the seed, and where the simulated samples
    # are cached (None: $TSCUBE_CACHE_DIR, else ~/.cache/tscube).
    CRITVAL_PATHS=100_000,
    CRITVAL_SEED=20241124,
    CRITVAL_CACHE_DIR=None,
    # calibrated critical values (bfast_monitor(calibrate=True), tscube.bfast.monitor.calibration):
    # simulated paths per cell of the (history size, monitoring ratio, stretch) grid; a
    # cell's critical values are simulated once and cached beside the simulated ones.
    CALIBRATION_PATHS=20_000,
    # network reads (STAC catalogs and their assets, tscube.stac): seconds to connect and
    # seconds any one read may wait for data before the run fails with an error naming the
    # URL (a frozen server never hangs a run); CLI --timeout.
    HTTP_TIMEOUT=60.0,
    # times a failed read of an asset over http(s) is tried again (GDAL_HTTP_MAX_RETRY; a
    # frozen server ends a run after about (HTTP_RETRIES + 1) x HTTP_TIMEOUT seconds).
    HTTP_RETRIES=3,
    # assets or child documents of a STAC catalog read over http(s) that are local files
    # (file:// or paths) are refused unless this is True: a catalog from the web does not
    # get to read the local disk.
    STAC_LOCAL_HREFS_FROM_WEB=False,
)

globals().update(_DEFAULTS)


def reset() -> None:
    """Restore every tunable to its default value."""
    globals().update(_DEFAULTS)
