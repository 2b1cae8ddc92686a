"""The instruction set numba compiles the benchmarks' kernels for, and how to measure
another one on this machine.

numba compiles for the host CPU unless ``NUMBA_CPU_NAME`` and ``NUMBA_CPU_FEATURES`` say
otherwise, and it takes the host's **features** whenever ``NUMBA_CPU_FEATURES`` is unset:
``NUMBA_CPU_NAME=haswell`` alone on an AVX-512 machine still emits AVX-512 code. To
measure how the kernels behave on an AVX2 machine (16 ymm registers, no masking, no
vector conversions between float64 and 64-bit integers), set both::

    NUMBA_CPU_NAME=haswell NUMBA_CPU_FEATURES="$(python benchmarks/isa.py --avx2-features)" \\
        python benchmarks/cluster.py --methods kmeans

(``--avx2-features``: this host's features with every AVX-512 extension turned off).
Each benchmark prints :func:`target` in its machine line; a separate numba cache folder
per target is not needed (numba keys its cache by CPU name and features).

:func:`fma_roof` measures the float64 fused multiply-add rate one thread reaches here, the
roof that kernels' GFLOP/s are compared to (independent chains enough to cover the
latency: two 256-bit multiply-adds a cycle on a Zen 3 core).

Usage: ``python benchmarks/isa.py [--avx2-features | --fma-roof]``
"""

from __future__ import annotations

import json
import sys

#: Features an AVX2-only x86 CPU lacks (every AVX-512 extension, and what builds on it).
_NOT_ON_AVX2 = ("avx512", "amx-", "avxvnni", "evex512", "avx10")


def avx2_features() -> str:
    """This host's LLVM features with the AVX-512 family off: numba's target for an AVX2
    machine of this generation."""
    import llvmlite.binding as llvm

    features = llvm.get_host_cpu_features()
    return ",".join(("-" if name.startswith(_NOT_ON_AVX2) or not on else "+") + name
                    for name, on in features.items())


def target() -> dict:
    """The CPU name and the widest vector extension numba compiles for here."""
    import llvmlite.binding as llvm
    import numba

    name = numba.config.CPU_NAME or llvm.get_host_cpu_name()
    features = numba.config.CPU_FEATURES
    if features is None:
        on = {f for f, enabled in llvm.get_host_cpu_features().items() if enabled}
    else:
        on = {f[1:] for f in features.split(",") if f.startswith("+")}
    vector = next((isa for isa, flag in (("AVX-512", "avx512f"), ("AVX2", "avx2"), ("AVX", "avx"), ("NEON", "neon"))
                   if flag in on), "SSE")
    return dict(numba_cpu=name, vector_isa=vector, target_set=numba.config.CPU_NAME is not None)


def fma_roof(seconds: float = 0.3) -> float:
    """GFLOP/s of float64 fused multiply-adds on one thread, as numba compiles them for
    this target: 4 × 1,024 independent chains, 16 multiply-adds each, best of three runs.
    The compiler vectorises across the 1,024 and keeps a few vectors in flight; four
    chains per element make sure those are enough to cover the FMA latency (with one
    chain of 64 per element, a Zen 3 core showed 17.6 GFLOP/s, below what BFAST Lite's
    lane kernel reaches; 64 multiply-adds per element in all, which LLVM unrolls)."""
    import time

    import numpy as np
    from numba import njit

    @njit(fastmath={"contract"}, error_model="numpy", cache=False)
    def chains(x, y, reps):
        for _ in range(reps):
            for i in range(x.shape[0]):
                v0 = x[i]
                v1 = v0 + 1.0
                v2 = v0 + 2.0
                v3 = v0 + 3.0
                for _ in range(16):
                    v0 = v0 * 0.999999 + 1e-7
                    v1 = v1 * 0.999999 + 1e-7
                    v2 = v2 * 0.999999 + 1e-7
                    v3 = v3 * 0.999999 + 1e-7
                y[i] = v0 + v1 + v2 + v3
        return y[0]

    x = np.random.default_rng(0).random(1024)
    y = np.empty_like(x)
    chains(x, y, 1)
    reps = 1
    while True:
        begin = time.perf_counter()
        chains(x, y, reps)
        if time.perf_counter() - begin > seconds / 3:
            break
        reps *= 2
    best = min(_timed(chains, x, y, reps) for _ in range(3))
    return 2 * 16 * 4 * x.size * reps / best / 1e9


def _timed(kernel, *args) -> float:
    import time

    begin = time.perf_counter()
    kernel(*args)
    return time.perf_counter() - begin


if __name__ == "__main__":
    if "--avx2-features" in sys.argv[1:]:
        print(avx2_features())
    elif "--fma-roof" in sys.argv[1:]:
        print(json.dumps(dict(**target(), fma_roof_gflops_1thread=round(fma_roof(), 1))))
    else:
        print(json.dumps(target()))
