"""What the cuda test files share: running code in a subprocess without the simulator
(to see the error where there is no GPU) and the PTX compile check (NVVM, no GPU)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


def run_without_simulator(code: str, timeout: int = 120) -> subprocess.CompletedProcess:
    """``python -c code`` with ``NUMBA_ENABLE_CUDASIM`` unset."""
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=timeout)


def assert_no_gpu_error(result: subprocess.CompletedProcess) -> None:
    """The code printed ``RuntimeError: ...`` naming the missing driver (skip on a GPU)."""
    if "RuntimeError:" not in result.stdout and result.returncode == 0:
        pytest.skip("a CUDA device is available here")
    assert result.returncode == 0, result.stderr
    assert "RuntimeError: engine='cuda' needs" in result.stdout
    assert "CUDA driver" in result.stdout


#: Prepended to a PTX check: a fake current device (device functions ask for its compute
#: capability) and a trivial compile that exits with "SKIP ..." where NVVM is missing.
PTX_PREAMBLE = '''
import sys
import numba.cuda.dispatcher as dispatcher
from numba import cuda, types as nt


class FakeDevice:
    compute_capability = (8, 0)


dispatcher.get_current_device = lambda: FakeDevice()


def trivial(a):
    a[cuda.grid(1)] = 1.0


try:
    cuda.compile_ptx(trivial, (nt.float64[:],), cc=(8, 0))
except Exception as exc:  # no NVVM / NVRTC libraries: nothing to check with
    print("SKIP", type(exc).__name__, str(exc).splitlines()[0])
    sys.exit(0)

A = lambda dtype, ndim: nt.Array(dtype, ndim, "C")
'''


#: Appended to a PTX check: each of its ``checks`` (a kernel's dispatcher and the argument
#: types its host code passes) compiled to PTX, then how many.
PTX_COMPILE = '''
for kernel, signature in checks:
    ptx, _ = cuda.compile_ptx(kernel.py_func, signature, cc=(8, 0))
    assert ".entry" in ptx
print("COMPILED", len(checks))
'''


def check_ptx(body: str, expected: int) -> None:
    """Compile the ``checks`` that ``body`` lists (after :data:`PTX_PREAMBLE`) to PTX in a
    process without the simulator (:data:`PTX_COMPILE`): ``expected`` of them; skip
    without NVVM."""
    result = run_without_simulator(PTX_PREAMBLE + body + PTX_COMPILE, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    if result.stdout.startswith("SKIP"):
        pytest.skip(f"no NVVM to compile with: {result.stdout.strip()}")
    assert f"COMPILED {expected}" in result.stdout
