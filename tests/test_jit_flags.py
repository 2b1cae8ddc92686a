"""Every numba kernel states its own ``fastmath`` and ``error_model`` (``tscube._jit``):
numba gives a function that leaves them unset the flags of the first jitted caller that
compiles it, so its rounding would depend on the order things were compiled in."""

from __future__ import annotations

import importlib
import os
import pkgutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from numba.core.errors import NumbaError
from numba.core.registry import CPUDispatcher

import tscube
from tscube._jit import jit
from tscube.bfast.core.bai_perron_cpu import _programme_row_1


def _dispatchers():
    for info in pkgutil.walk_packages(tscube.__path__, "tscube."):
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if isinstance(obj, CPUDispatcher):
                yield f"{info.name}.{name}", obj


def test_every_kernel_sets_the_flags_a_callee_would_inherit():
    kernels = dict(_dispatchers())
    assert len(kernels) > 100
    lacking = [name for name, kernel in kernels.items()
               if not {"fastmath", "error_model"} <= set(kernel.targetoptions)]
    assert lacking == [], "use tscube._jit.jit (or set fastmath and error_model) for: " + ", ".join(lacking)


def test_a_shared_helper_compiles_with_its_own_flags_whatever_calls_it_first(tmp_path):
    """The near-real-time fit and the cpu engine's per-pixel path share the normal-equation
    helpers; compiled first from a ``fastmath={"contract"}`` kernel they must still round
    each operation on its own (no ``contract`` in their IR), while a plain ``@njit``
    helper in the same situation does take the caller's flag (the probe can tell)."""
    script = textwrap.dedent("""
        import numpy as np
        from numba import njit

        from tscube.bfast.core import ols_cpu

        @njit
        def plain_helper(G, X):
            G[0, 0] += X[0, 0] * X[0, 1]

        @njit(fastmath={"contract"})
        def caller(G, b, X):
            ols_cpu.add_normal_row(G, b, X, 0, 1.0)
            plain_helper(G, X)

        caller(np.zeros((3, 3)), np.zeros(3), np.ones((2, 3)))
        for helper in (ols_cpu.add_normal_row, plain_helper):
            (compiled,) = helper.overloads.values()
            ir = compiled.library.get_llvm_str()
            print(" contract " in ir and "fmul" in ir)
    """)
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))  # compiled here, not loaded
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True"]


def test_a_cache_is_stale_when_a_module_it_imports_changes(tmp_path):
    """A kernel reads a constant of another module; after that module changes (and the
    kernel's own does not), the next process compiles the kernel again and sees the new
    value. numba's own locator keeps the cache and the old value (the control: the test
    can tell the two apart)."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "consts.py").write_text("K = 1\n")
    (package / "kern.py").write_text(textwrap.dedent("""
        from tscube._jit import jit

        from .consts import K


        @jit()
        def value():
            return K
    """))
    script = textwrap.dedent(f"""
        import sys
        from pathlib import Path

        import tscube._jit as j

        j.PACKAGE_DIR = Path({str(package)!r}).resolve()
        if sys.argv[1] == "numba":
            j.CacheImpl._locator_classes.remove(j.ImportStampLocator)
        sys.path.insert(0, {str(tmp_path)!r})
        from pkg.kern import value

        print(value())
    """)

    def run(locator: str, cache: Path) -> str:
        env = dict(os.environ, NUMBA_CACHE_DIR=str(cache))
        return subprocess.run([sys.executable, "-c", script, locator], env=env, capture_output=True, text=True,
                              check=True).stdout.strip()

    outputs = {}
    for locator in ("tscube", "numba"):
        (package / "consts.py").write_text("K = 1\n")
        first = run(locator, tmp_path / f"cache-{locator}")
        (package / "consts.py").write_text("K = 2\n")
        outputs[locator] = (first, run(locator, tmp_path / f"cache-{locator}"))
    assert outputs == {"tscube": ("1", "2"), "numba": ("1", "1")}


def test_the_stamp_of_a_kernel_module_covers_the_helpers_it_compiles_in():
    """The near-real-time kernels inline the normal-equation helpers and the boundary of
    other modules: their files are part of the stamp of the kernels' cache."""
    from tscube._jit import PACKAGE_DIR, _dependencies

    files = {str(path.relative_to(PACKAGE_DIR)) for path in _dependencies(PACKAGE_DIR / "bfast" / "nrt" / "_cpu.py")}
    assert {"bfast/nrt/_cpu.py", "bfast/core/ols_cpu.py", "bfast/monitor/critval.py", "_jit.py", "config.py"} <= files
    assert not any(Path(name).name in ("_xarray.py", "api.py") for name in files)  # not the whole package


def test_a_compilation_is_announced_once_and_timed_and_a_cached_kernel_says_nothing():
    """compile_notice (the CLI's): one line when numba starts compiling, one with the
    count and time at the end; nothing for kernels already compiled."""
    from numba import njit

    from tscube._jit import compile_notice

    @njit
    def outer(x):
        return inner(x) * 2.0

    @njit
    def inner(x):
        return x + 1.0

    lines = []
    with compile_notice(lines.append) as notice:
        assert outer(1.0) == 4.0 and outer(2.0) == 6.0  # one signature: compiled once, callee inside it
    assert len(lines) == 2 and "compiling" in lines[0]
    assert notice.kernels == 1 and notice.seconds > 0 and lines[1].startswith("numba compiled 1 kernels in ")
    quiet = []
    with compile_notice(quiet.append):
        outer(3.0)
    assert quiet == []


def test_remembered_call_types_are_those_numba_resolves():
    """``tscube._jit`` remembers numba's typing of operator, ``math`` and builtin calls
    (numba redoes it at every occurrence): each remembered signature is what numba's own
    resolution gives for the same function and argument types, and a function compiled
    with them computes what Python computes."""
    import math

    import numpy as np
    from numba import njit
    from numba.core.registry import cpu_target

    from tscube import _jit

    def mixed(x, i, flag):
        total = 0.0
        for j in range(len(x)):
            v = x[j] * 2.0 - i / 3 + (j % 4) ** 2
            if flag and v > 0.5:
                total += math.sqrt(abs(v)) + min(v, 1.0)
            x[j] = v
        return total, -i, i // 2, float(i) * np.float32(1.5)

    values = np.linspace(0.0, 1.0, 9)
    remembered = njit(cache=False)(mixed)(values.copy(), 5, True)
    assert remembered == mixed(values.copy(), 5, True)
    context = cpu_target.typing_context
    entries = [(key, signature) for key, signature in _jit._CALL_TYPES.items() if key[2] is type(context)]
    assert len(entries) >= 10
    for (function, args, _, _), signature in entries:
        assert _jit._numba_call_type(function, context, args, {}) == signature, (function, args)


def test_a_function_that_allocates_nothing_counts_no_references():
    """``jit(allocates=False)`` compiles without numba's runtime: the same values, no
    reference counting of the arrays it takes or the views it makes (numba's atomic
    increments and decrements: a few percent of BFAST Lite, from per-start helpers such
    as the programme's offers), and a clear compile error for a function that allocates
    after all."""
    def allocates(values):
        return np.empty(values.shape[0]).sum()

    counted = jit(cache=False, error_model="numpy")(_programme_row_1.py_func)
    uncounted = jit(cache=False, error_model="numpy", allocates=False)(_programme_row_1.py_func)
    M, n, h = 5, 220, 33
    values = np.random.default_rng(1).random(n)
    programmes = []
    for offer in (counted, uncounted):
        best, arg = np.full((M + 1, n), np.inf), np.full((M + 1, n), -1)
        best[:, :40] = np.random.default_rng(0).random((M + 1, 40))
        offer(best, arg, M, n, h, 40, 72, values, n - 72)
        programmes.append((best, arg))
    (best_a, arg_a), (best_b, arg_b) = programmes
    assert np.array_equal(best_a, best_b) and np.array_equal(arg_a, arg_b)
    assert np.isfinite(best_a[1, 72:n - h]).all()  # offers for one break (start 40 < 2h)
    calls = [sum(ir.count(f"call void @NRT_{op}") for ir in offer.inspect_llvm().values()
                 for op in ("incref", "decref"))
             for offer in (counted, uncounted)]
    assert calls[0] > 0 and calls[1] == 0, calls
    with pytest.raises(NumbaError):
        jit(cache=False, allocates=False)(allocates)(values)
