"""Simulator tests: numba.cuda kernels run on the CPU (``NUMBA_ENABLE_CUDASIM=1``).

The variable must be set before numba is first imported, hence at the very top here.
Set ``TSCUBE_TEST_REAL_CUDA=1`` to run the same tests on a real GPU instead.
"""

import os

if not os.environ.get("TSCUBE_TEST_REAL_CUDA"):
    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
