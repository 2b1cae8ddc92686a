"""The numba decorator of every CPU kernel and helper: ``numba.njit`` with ``cache=True``
and both flags that a callee would otherwise inherit, ``fastmath`` and ``error_model``,
always set; the stamp of its cache, which covers the modules a kernel compiles in; cache
writes under a file lock (:class:`LockedCacheFile`); compiling a kernel in another
process while this one does other work (:func:`compile_elsewhere`); and the notice
that numba is compiling (:func:`compile_notice`). docs/performance.md says what a first
call costs and why.

numba compiles a function that leaves one of these flags unset with the value of the
jitted caller that compiles it first (``Flags.inherit_if_not_set``), then keeps that
compiled version, one per signature, for every later caller, and in its on-disk cache.
A helper called both by a ``fastmath={"contract"}`` kernel and by a plain one therefore
rounded differently, fused multiply-adds or not, depending on which kernel the process
(or the run that wrote the cache) happened to compile first; with ``error_model`` a
division by zero could raise in one order and give inf in another. With every flag set
here, a function's arithmetic is its own decorator's, whatever calls it and whatever the
cache holds. ``tests/test_jit_flags.py`` checks every kernel of the package.

Functions with ``inline="always"`` are inlined into the caller's numba IR before typing
and compiled with the caller's flags; their own flags only apply when Python calls them.

A cached kernel holds the machine code of every jitted function it calls and the values
of the module constants it reads, wherever they are defined; numba checks a cache
against the kernel's own source file only, so a kernel whose module was unchanged ran
the old code of a helper, or an old constant, from another module that had changed.
:class:`ImportStampLocator` stamps the caches of tscube's kernels with the contents of
their module *and* of every tscube module it imports at module level, transitively: any
change to what a kernel can compile in makes numba compile it again.
"""

from __future__ import annotations

import ast
import hashlib
import os
import pickle
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from functools import lru_cache, partial
from pathlib import Path

from numba import njit, types
from numba.core import caching, event
from numba.core.caching import _CacheLocator

try:
    import fcntl
except ImportError:  # Windows: numba's own, unlocked, cache writes
    fcntl = None

#: numba's cache implementation, whose list of locators :class:`ImportStampLocator` joins
#: (``_CacheImpl`` before numba 0.58).
CacheImpl = getattr(caching, "CacheImpl", None) or getattr(caching, "_CacheImpl")

#: ``fastmath`` that allows only fused multiply-adds (``a * b + c`` in one rounding)
CONTRACT = {"contract"}

#: The package whose kernels' caches :class:`ImportStampLocator` stamps.
PACKAGE_DIR = Path(__file__).resolve().parent


def jit(*, fastmath: bool | set = False, error_model: str = "python", cache: bool = True, plain_args: bool = False,
        **options):
    """``numba.njit(cache=cache, fastmath=fastmath, error_model=error_model, **options)``;
    the defaults are numba's own for a function called from Python (IEEE rounding of each
    operation, ``ZeroDivisionError`` on a division by zero). Cached kernels write their
    cache under a lock (:class:`LockedCacheFile`).

    ``plain_args``: when called from another kernel, compile for plain argument types
    only. numba types a constant argument of a call from a kernel as a literal (0, 1,
    -1, 64) and compiles the callee once per value: up to 4 versions of one set-up
    helper. Keep numba's specialisation (the default) where a constant decides the
    code's speed (a step of 1, a feature count that unrolls a loop)."""
    decorate = njit(cache=cache, fastmath=fastmath, error_model=error_model, **options)

    def decorator(func):
        dispatcher = decorate(func)
        if plain_args:
            dispatcher.get_call_template = partial(_plain_call_template, dispatcher)
        cache_file = getattr(getattr(dispatcher, "_cache", None), "_cache_file", None)
        if type(cache_file) is caching.IndexDataCacheFile and fcntl is not None:
            cache_file.__class__ = LockedCacheFile
        return dispatcher

    return decorator


def _plain_call_template(dispatcher, args, kws):
    """``Dispatcher.get_call_template`` with literal argument types made plain."""
    args = tuple(types.unliteral(arg) for arg in args)
    kws = {name: types.unliteral(arg) for name, arg in kws.items()}
    return type(dispatcher).get_call_template(dispatcher, args, kws)


class LockedCacheFile(caching.IndexDataCacheFile):
    """numba's cache file of one kernel (an index of its compiled versions and a data file
    each), saved under an exclusive lock on the index. Without it, two processes that
    compile the kernel for two signatures at once (``tscube warmup``'s jobs,
    :func:`compile_elsewhere`, dask workers that share a cache folder) each read the
    index, pick the same free data file name and write their machine code to it: the
    index of one could then name the other's code, which a later process would load for
    the wrong argument types."""

    def save(self, key, data):  # numba made the folder (the locator's ensure_cache_path)
        with open(self._index_path + ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                super().save(key, data)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)


def _module_file(name: str) -> Path | None:
    """The source file of the tscube module ``name`` (dotted, relative to the package), if any."""
    base = PACKAGE_DIR.joinpath(*name.split(".")) if name else PACKAGE_DIR
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


@lru_cache(maxsize=None)
def _imported_files(path: Path) -> tuple[Path, ...]:
    """The files of the tscube modules that the module at ``path`` imports at module level
    (``from . import x`` counts ``x`` when it is a module)."""
    package = list(path.relative_to(PACKAGE_DIR).with_suffix("").parts[:-1])  # an __init__'s is its own
    found = []
    for node in ast.parse(path.read_bytes()).body:  # module level only: what kernels can reach
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            elif node.module == "tscube" or (node.module or "").startswith("tscube."):
                target = node.module[len("tscube."):] if "." in node.module else ""
            else:
                continue
            for alias in node.names:
                found.append(_module_file(f"{target}.{alias.name}".strip(".")) or _module_file(target))
        elif isinstance(node, ast.Import):
            found += [_module_file(alias.name[len("tscube."):]) for alias in node.names
                      if alias.name.startswith("tscube.")]
    return tuple(sorted({file for file in found if file is not None and file != path}))


@lru_cache(maxsize=None)
def _dependencies(path: Path) -> tuple[Path, ...]:
    """``path`` and every tscube module file it imports at module level, transitively."""
    seen = {path}
    stack = [path]
    while stack:
        for file in _imported_files(stack.pop()):
            if file not in seen:
                seen.add(file)
                stack.append(file)
    return tuple(sorted(seen))


@lru_cache(maxsize=None)
def _content_digest(path: Path, mtime_ns: int, size: int) -> bytes:
    """sha256 of the file (``mtime_ns`` and ``size`` key the memo: a changed file is read again)."""
    return hashlib.sha256(path.read_bytes()).digest()


def import_stamp(py_file: str) -> str:
    """A digest of the contents of ``py_file`` and of the tscube modules it imports, transitively."""
    digest = hashlib.sha256()
    for file in _dependencies(Path(py_file).resolve()):
        stat = file.stat()
        digest.update(str(file.relative_to(PACKAGE_DIR)).encode())
        digest.update(_content_digest(file, stat.st_mtime_ns, stat.st_size))
    return digest.hexdigest()


class ImportStampLocator(_CacheLocator):
    """The cache locator of tscube's kernels: where and under which name numba's own
    locator keeps a kernel's cache, with a source stamp that also covers the modules the
    kernel's module imports (:func:`import_stamp`). Functions outside tscube are left to
    numba's locators."""

    def __init__(self, inner: _CacheLocator, py_file: str):
        self._inner = inner
        self._py_file = py_file

    def ensure_cache_path(self):
        self._inner.ensure_cache_path()

    def get_cache_path(self):
        return self._inner.get_cache_path()

    def get_disambiguator(self):
        return self._inner.get_disambiguator()

    def get_source_stamp(self):
        return self._inner.get_source_stamp(), import_stamp(self._py_file)

    @classmethod
    def from_function(cls, py_func, py_file):
        try:
            inside = Path(py_file).resolve().is_relative_to(PACKAGE_DIR) and os.path.isfile(py_file)
        except (OSError, ValueError):
            inside = False
        if not inside:
            return None
        for other in CacheImpl._locator_classes:
            if other is not cls:
                inner = other.from_function(py_func, py_file)
                if inner is not None:
                    return cls(inner, py_file)
        return None


if ImportStampLocator not in CacheImpl._locator_classes:
    CacheImpl._locator_classes.insert(0, ImportStampLocator)


class CompileNotice(event.Listener):
    """Says, at the first compilation numba starts (a first run on this machine, a new
    tscube, a cleared or stale cache), that it is compiling, and counts the time: a wait
    of a minute with nothing on screen looks like a hang. Kernels loaded from the cache
    start no compilation and say nothing."""

    def __init__(self, echo):
        self.echo = echo
        self.depth = 0  # a kernel's compilation compiles its callees inside it
        self.began = 0.0
        self.seconds = 0.0
        self.kernels = 0

    def on_start(self, _event) -> None:
        if self.depth == 0:
            if self.kernels == 0:
                self.echo("numba is compiling tscube's kernels for their first use here (once: later runs load "
                          "them from its cache)...")
            self.began = time.perf_counter()
        self.depth += 1

    def on_end(self, _event) -> None:
        self.depth -= 1
        if self.depth == 0:
            self.seconds += time.perf_counter() - self.began
            self.kernels += 1

    def summary(self) -> str | None:
        """One line on what was compiled, or None if nothing was."""
        if not self.kernels:
            return None
        return f"numba compiled {self.kernels} kernels in {self.seconds:.1f} s (cached for later runs)"


@contextmanager
def compile_notice(echo):
    """While inside, :class:`CompileNotice` says through ``echo`` when numba starts
    compiling, and at the end how long it took (nothing when every kernel came from the
    cache)."""
    notice = CompileNotice(echo)
    event.register("numba:compile", notice)
    try:
        yield notice
    finally:
        event.unregister("numba:compile", notice)
        line = notice.summary()
        if line:
            echo(line)


#: Compilations running in other processes (:func:`compile_elsewhere`), by kernel.
_PENDING: dict = {}
_PENDING_LOCK = threading.Lock()


def _cache_state(kernel, sig) -> str:
    """"memory" (compiled in this process), "disk" (in numba's on-disk cache), "missing"
    (a call would compile it) or "unknown" (caching off, read-only, or numba's cache
    internals not as expected)."""
    if sig in kernel.overloads:
        return "memory"
    try:
        cache = kernel._cache
        if not cache._enabled or not os.access(cache._cache_path, os.W_OK):
            return "unknown"
        key = cache._index_key(sig, kernel.targetctx.codegen())
        return "disk" if key in cache._cache_file._load_index() else "missing"
    except Exception:  # noqa: BLE001 - a numba without these internals: compile as usual
        return "unknown"


def compile_elsewhere(kernel, args) -> bool:
    """Start compiling ``kernel`` for the types of ``args`` in a new process, into numba's
    on-disk cache, when this process has not compiled it and the cache does not hold it;
    the caller meanwhile compiles or runs something else (numba compiles one function at
    a time per process). :func:`wait_compiled` (which :func:`tscube._threads.run_tasks`
    calls) waits for it, and the call then loads the kernel from the cache. Returns
    whether a process was started."""
    sig = tuple(kernel.typeof_pyval(arg) for arg in args)
    with _PENDING_LOCK:
        if kernel in _PENDING or _cache_state(kernel, sig) != "missing":
            return False
        job = pickle.dumps((kernel.py_func.__module__, kernel.py_func.__qualname__, sig))
        try:
            process = subprocess.Popen([sys.executable, "-c", "from tscube._jit import _compile_job; _compile_job()"],
                                       stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        except OSError:  # no interpreter to start (an embedded Python): compile here as usual
            return False
        try:
            process.stdin.write(job)
            process.stdin.close()
        except OSError:  # the process died at once: the call compiles the kernel itself
            pass
        _PENDING[kernel] = process
        return True


def wait_compiled(kernel) -> None:
    """Wait for :func:`compile_elsewhere`'s process compiling ``kernel``, if any (the
    kernel is then in the cache, unless that process failed: then the call compiles it)."""
    if not _PENDING:
        return
    with _PENDING_LOCK:
        process = _PENDING.pop(kernel, None)
    if process is not None:
        process.wait()


def _compile_job() -> None:
    """In the process of :func:`compile_elsewhere`: compile the kernel, which numba saves
    to its cache."""
    import importlib

    module, qualname, sig = pickle.loads(sys.stdin.buffer.read())
    kernel = importlib.import_module(module)
    for name in qualname.split("."):
        kernel = getattr(kernel, name)
    kernel.compile(sig)
