"""The numba decorator of every CPU kernel and helper: ``numba.njit`` with ``cache=True``
and both flags that a callee would otherwise inherit, ``fastmath`` and ``error_model``,
always set; the stamp of its cache, which covers the modules a kernel compiles in; cache
writes under a file lock (:class:`LockedCacheFile`); compiling a kernel, or a kernel's
largest callees, in another process while this one does other work
(:func:`compile_jobs`, :func:`compile_elsewhere`); a kernel's largest callees called
through their addresses instead of compiled into it (:class:`Callees`); the notice
that numba is compiling (:func:`compile_notice`); and numba's typing of operators
remembered (:func:`_remembered_call_type`). docs/performance.md says what a first call
costs and why.

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

A cached kernel holds the machine code of every jitted function it calls (but those it
calls by address, :class:`Callees`: they have caches of their own) and the values
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
import warnings
from contextlib import contextmanager
from functools import lru_cache, partial
from pathlib import Path

from numba import njit, types
from numba.core import caching, event, sigutils
from numba.core.caching import _CacheLocator
from numba.core.errors import NumbaExperimentalFeatureWarning
from numba.core.target_extension import get_local_target
from numba.extending import typeof_impl

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
        allocates: bool = True, **options):
    """``numba.njit(cache=cache, fastmath=fastmath, error_model=error_model, **options)``;
    the defaults are numba's own for a function called from Python (IEEE rounding of each
    operation, ``ZeroDivisionError`` on a division by zero). Cached kernels write their
    cache under a lock (:class:`LockedCacheFile`).

    ``plain_args``: when called from another kernel, compile for plain argument types
    only. numba types a constant argument of a call from a kernel as a literal (0, 1,
    -1, 64) and compiles the callee once per value: up to 4 versions of one set-up
    helper. Keep numba's specialisation (the default) where a constant decides the
    code's speed (a step of 1, a feature count that unrolls a loop).

    ``allocates=False``: the function creates no array (no ``np.empty``, no copies; views
    are fine) and returns no array, so it is compiled without numba's runtime
    (``_nrt=False``): no reference counts on the arrays it takes or the views it makes.
    numba counts them with atomic increments and decrements at the function's entry and
    exit and around each view, which its pruning pass removes only in part: in BFAST
    Lite's per-start helpers (called a few hundred times per pixel) they cost 4–7 % of a
    cloudy pixel's time (docs/bfast_lite.md). numba refuses to compile such a function if it allocates, and
    passes the flag on to the callees it compiles that leave it unset (as it does
    ``fastmath``): an allocating callee of such a function fails to compile, loudly."""
    if not allocates:
        options["_nrt"] = False
    decorate = njit(cache=cache, fastmath=fastmath, error_model=error_model, **options)

    def decorator(func):
        dispatcher = decorate(func)
        dispatcher.get_call_template = partial(_call_template, dispatcher, plain_args)
        cache_file = getattr(getattr(dispatcher, "_cache", None), "_cache_file", None)
        if type(cache_file) is caching.IndexDataCacheFile and fcntl is not None:
            cache_file.__class__ = LockedCacheFile
        return dispatcher

    return decorator


def function_type(spec: str, *more, returns=types.none) -> types.FunctionType:
    """numba's type of a jitted function called by address (:class:`Callees`) with
    arguments ``spec`` (:func:`arg_types`' notation) and then ``more`` (numba types, e.g.
    the function types of callees it is passed), returning ``returns``."""
    return types.FunctionType(returns(*arg_types(spec), *more))


# numba warns at each typing of a call through a first-class function type (the feature
# is marked experimental since numba 0.49); tscube's kernels rely on it, tested
warnings.filterwarnings("ignore", message="First-class function type feature is experimental",
                        category=NumbaExperimentalFeatureWarning)

#: Modules of the functions whose call types :func:`_remembered_call_type` remembers:
#: Python's operators (``a * b``, ``x[i]``, ``x[i] = v``), ``math`` and the builtins
#: (``min``, ``range``, ``len``).
_REMEMBERED_MODULES = frozenset({"_operator", "math", "builtins"})
#: ``(function type, argument types, typing context's class, target)`` -> the signature
#: numba resolved (:func:`_remembered_call_type`); a function type's identity holds its
#: templates.
_CALL_TYPES: dict = {}
_numba_call_type = types.BaseFunction.get_call_type


def _remembered_call_type(self, context, args, kws):
    """numba's ``BaseFunction.get_call_type``, remembered for operators, ``math`` and
    builtins. numba types every call of such a function by trying its templates in order
    (about fifteen for ``*``), raising and formatting an error for each that does not
    match, at every occurrence: 7,900 of the 8,500 call typings of the Bai–Perron lane
    kernels' compile repeated one of 200, 14 % of its time (docs/performance.md).
    Their outcome depends only on the function, its templates, the argument types and
    the target, so the first one serves the others (the implementation numba then
    lowers is the one it recorded at the first). Failures are not remembered: numba
    raises them each time, as before."""
    if kws or getattr(self.typing_key, "__module__", None) not in _REMEMBERED_MODULES:
        return _numba_call_type(self, context, args, kws)
    key = (self, args, type(context), get_local_target(context))  # the target orders the templates
    signature = _CALL_TYPES.get(key)
    if signature is None:
        signature = _numba_call_type(self, context, args, kws)
        if signature is not None:
            _CALL_TYPES[key] = signature
    return signature


types.BaseFunction.get_call_type = _remembered_call_type


#: Each callee's compile seconds, where its :class:`Callees` entry gives them (:func:`_deal`).
_COMPILE_SECONDS: dict = {}


class Callees(tuple):
    """Jitted functions that a kernel calls through their addresses (numba's first-class
    functions), each with the numba type it is called with (:func:`function_type`): a
    tuple of the functions, passed to the kernel as one argument and called there as
    ``calls[INDEX](...)`` with a constant ``INDEX``.

    A kernel links the code of the jitted functions it calls, and LLVM optimises and
    emits that code again in every caller's module, at every level of calls; a kernel
    compiles after its callees. A callee called by address is compiled once, on its own,
    into its own cache entry, which every kernel that calls it shares, and needs nothing
    compiled to type its callers: :func:`compile_jobs` lists those not cached yet for
    other processes to compile while this one compiles the kernel. Each call costs an
    indirect call (no inlining), so callees by address are those whose calls do much
    work (docs/performance.md). A call's arguments must have the types of the callee's
    function type exactly (numba raises a typing error otherwise).

    An entry is ``(function, function type)``, or ``(function, function type, seconds)``
    with the seconds its compile takes (any machine: only their ratios count), by which
    :func:`compile_elsewhere` shares the compiles among its processes."""

    def __new__(cls, *entries):
        self = super().__new__(cls, (entry[0] for entry in entries))
        self.entries = entries
        self.numba_type = types.Tuple(tuple(entry[1] for entry in entries))
        self.loaded = False  # all compiled or loaded in this process (:func:`wait_compiled`)
        for entry in entries:
            _remember_addresses(entry[0])
            if len(entry) > 2:
                _COMPILE_SECONDS[entry[0]] = entry[2]
        return self

    def __add__(self, other):
        """These callees, then ``other``'s (a kernel's own after a shared programme's)."""
        return Callees(*self.entries, *other.entries)

    def __reduce__(self):
        return Callees, tuple(self.entries)

    def jobs(self) -> list:
        """``(function, argument types)`` of each callee, for :func:`compile_jobs`."""
        return [(entry[0], tuple(entry[1].signature.args)) for entry in self.entries]


@typeof_impl.register(Callees)
def _typeof_callees(value, context):
    return value.numba_type


def _remember_addresses(dispatcher) -> None:
    """Make ``dispatcher``'s ``get_compile_result``, which numba calls twice for each callee
    by address at each call of a kernel from Python (to read its addresses), answer from a
    memo: numba's own hashes the argument types each time (45 us for the Bai–Perron
    programme's, about 1 ms per kernel call for all its callees). numba passes the same
    signature object each time (its constants are unpickled once per process). With
    :func:`_remember_pointers`, a kernel call reads its callees' addresses in ~10 us each."""
    plain = getattr(type(dispatcher), "get_compile_result", None)
    if plain is None or getattr(dispatcher, "_tscube_addresses", None) is not None:
        return  # numba's jit disabled (NUMBA_DISABLE_JIT: a plain function), or done
    memo: dict = {}

    def get_compile_result(sig):
        hit = memo.get(id(sig))
        if hit is not None and hit[0] is sig:
            return hit[1]
        result = plain(dispatcher, sig)
        memo[id(sig)] = (sig, result)
        _remember_pointers(result.library)
        return result

    dispatcher._tscube_addresses = memo
    dispatcher.get_compile_result = get_compile_result


def _remember_pointers(library) -> None:
    """The same for a compiled library's ``get_pointer_to_function`` (a symbol lookup in
    LLVM's engine, 8 us, twice per callee and call): its functions never move."""
    if not hasattr(library.get_pointer_to_function, "cache_info"):
        library.get_pointer_to_function = lru_cache(maxsize=None)(library.get_pointer_to_function)


def _call_template(dispatcher, plain_args, args, kws):
    """``Dispatcher.get_call_template``, which a jitted caller's typing calls (and which
    compiles the callee for those types): with literal argument types made plain for
    ``plain_args``, and after waiting for the callee's compilation in another process
    (:func:`compile_elsewhere`) when one is under way for those types."""
    if plain_args:
        args = tuple(types.unliteral(arg) for arg in args)
        kws = {name: types.unliteral(arg) for name, arg in kws.items()}
    if _PENDING:
        _wait_for_callee(dispatcher, args, kws)
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


#: Compilations under way in other processes (:func:`compile_elsewhere`): dispatcher ->
#: {argument types: :class:`_Job`}.
_PENDING: dict = {}
_PENDING_LOCK = threading.Lock()
#: Their processes, until they end (a process may outlive the jobs this one waited for).
_RUNNING: list = []

#: Set (the tests do): a kernel whose compile asked a callee compiled elsewhere for it for
#: other types than its table names (so that it compiled that callee a second time), or
#: never asked for one the table names, raises :class:`StaleCompileJobs` after its call
#: (:func:`settle`). Unset, a stale table only costs the first call time.
STRICT_ENV = "TSCUBE_STRICT_COMPILE_JOBS"


class StaleCompileJobs(RuntimeError):
    """A kernel's table of callees to compile elsewhere no longer names the argument types
    the kernel calls them with (raised only under :data:`STRICT_ENV`)."""


class _Job:
    """One function's compilation for one signature in another process, done for the first
    compile of ``owner`` here (the function itself, or a kernel that calls it)."""

    def __init__(self, process: subprocess.Popen, owner) -> None:
        self.process = process
        self.owner = owner
        self.asked = False
        self.stale: list[str] = []  # the owner's compile asked for the function for other types


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
        data_name = cache._cache_file._load_index().get(key)
        # numba writes the index before the data file (atomically): loadable once that exists
        loadable = data_name is not None and os.path.exists(cache._cache_file._data_path(data_name))
        return "disk" if loadable else "missing"
    except Exception:  # noqa: BLE001 - a numba without these internals: compile as usual
        return "unknown"


def arg_types(spec: str) -> tuple:
    """numba argument types from ``spec``, written as the arguments of a numba signature
    string (``"f8[:, ::1], i8, literal(0), Tuple((f8[::1], i8[:, ::1]))"``; a read-only
    array is ``Array(u1, 2, "C", readonly=True)``, numba's type of a constant argument
    ``literal(N)``)."""
    args, _ = sigutils.normalize_signature(f"({spec},)")
    return tuple(args)


def compile_jobs(kernel, args, callees=(), kernel_too: bool = False) -> list:
    """What other processes can compile for a first call of ``kernel`` on ``args``
    (:func:`compile_elsewhere`'s jobs): the callees by address of its :class:`Callees`
    arguments that numba's cache lacks (this process compiles the kernel meanwhile);
    then, when neither this process nor the cache has the kernel, and it has no callees
    by address, the kernel itself, or, given ``callees`` (pairs of a function the kernel
    links and the argument types it calls it with, which this process's compile of the
    kernel then loads from the cache), those of them that are not cached. With
    ``kernel_too`` (this process compiles something else meanwhile, e.g. classic BFAST's
    STL start), the kernel itself first, then its callees by address.

    A kernel links the machine code of its callees, so the callees a kernel's compile
    spends most of its time in can be compiled by another process meanwhile: on two
    cores, this process compiles the rest of the kernel while the other compiles them."""
    if not hasattr(kernel, "typeof_pyval"):  # numba's jit disabled (NUMBA_DISABLE_JIT): nothing to compile
        return []
    jobs = []
    tables = [arg for arg in args if isinstance(arg, Callees)]
    by_address = [job for table in tables if not table.loaded for job in table.jobs()]
    for function, sig in by_address:
        if (_cache_state(function, sig) == "missing" and sig not in _PENDING.get(function, {})
                and not any(function is other and sig == other_sig for other, other_sig, _ in jobs)):
            jobs.append((function, sig, kernel))
    sig = tuple(kernel.typeof_pyval(arg) for arg in args)
    if _cache_state(kernel, sig) != "missing" or sig in _PENDING.get(kernel, {}):
        return jobs
    if kernel_too or not callees and not tables:
        return [(kernel, sig, kernel)] + jobs
    return jobs + [(callee, tuple(callee_sig), kernel) for callee, callee_sig in callees
                   if _cache_state(callee, tuple(callee_sig)) == "missing"]


def _processes(n_jobs: int) -> int:
    """How many processes :func:`compile_elsewhere` shares ``n_jobs`` among: two at least
    (on two cores, this process compiles its kernel beside them), one per spare core
    beyond, four at most (each holds an interpreter with numba)."""
    return max(1, min(n_jobs, 4, max(2, (os.cpu_count() or 1) - 1)))


def _deal(jobs: list, n: int, seconds: list | None = None) -> list:
    """``jobs`` dealt to ``n`` processes: given each job's ``seconds``, the longest first,
    each to the process with the least so far (in that process's order); else in the
    order given, which should be decreasing compile time, back and forth (1, 2, 2, 1, 1,
    2, ...), so that each gets a similar share. (A table of a kernel's own callees after a
    shared one's is not in that order: BFAST Lite's ``_finish_pixel`` after the
    programme's smallest.)"""
    groups = [[] for _ in range(n)]
    if seconds is not None:
        loads = [0.0] * n
        for i in sorted(range(len(jobs)), key=lambda i: -seconds[i]):
            place = loads.index(min(loads))
            groups[place].append(jobs[i])
            loads[place] += seconds[i]
        return [group for group in groups if group]
    for i, job in enumerate(jobs):
        lap, place = divmod(i, n)
        groups[place if lap % 2 == 0 else n - 1 - place].append(job)
    return [group for group in groups if group]


#: The compiling process's programme: tscube's package bare (its ``__init__``, the public
#: API with pandas and xarray, is half a second to import that compiling does not need).
_COMPILE_JOB = ("import importlib.util, sys; "
                "sys.modules['tscube'] = importlib.util.module_from_spec(importlib.util.find_spec('tscube')); "
                "from tscube._jit import _compile_job; _compile_job()")


def compile_elsewhere(jobs) -> bool:
    """Start compiling ``jobs`` (:func:`compile_jobs`' ``(function, argument types,
    owner)`` triples, in decreasing order of compile time), in new processes
    (:func:`_processes`; each compiles its share in order), into numba's on-disk cache;
    this process meanwhile compiles or runs something else (numba compiles one function
    at a time per process). A kernel compiled elsewhere is waited for by
    :func:`tscube._threads.run_tasks` (:func:`wait_compiled`), and so are callees by
    address; a linked callee by the typing of the kernel that calls it; all are then
    loaded from the cache. Returns whether a process was started."""
    with _PENDING_LOCK:
        jobs = [(function, sig, owner) for function, sig, owner in jobs if sig not in _PENDING.get(function, {})]
        started = False
        seconds = [_COMPILE_SECONDS.get(function) for function, _, _ in jobs]
        for share in _deal(jobs, _processes(len(jobs)), None if None in seconds else seconds):
            payload = pickle.dumps([(function.py_func.__module__, function.py_func.__qualname__, sig)
                                    for function, sig, _ in share])
            try:
                process = subprocess.Popen([sys.executable, "-c", _COMPILE_JOB], stdin=subprocess.PIPE,
                                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            except OSError:  # no interpreter to start (an embedded Python): compile here as usual
                return started
            try:
                process.stdin.write(payload)
                process.stdin.close()
            except OSError:  # the process died at once: the call compiles its kernels itself
                pass
            for function, sig, owner in share:
                _PENDING.setdefault(function, {})[sig] = _Job(process, owner)
            _RUNNING[:] = [other for other in _RUNNING if other.poll() is None] + [process]  # reaps the ended
            started = True
        return started


def _await(function, sig, job: _Job) -> None:
    """Until ``function`` for ``sig`` is in the cache, or its process has ended (failed:
    the caller then compiles it)."""
    while job.process.poll() is None and _cache_state(function, sig) not in ("disk", "memory"):
        time.sleep(0.02)


def _wait_for_callee(function, args, kws) -> None:
    """A jitted caller's typing asks ``function`` for ``args``: wait for its compilation
    elsewhere, if under way for those types."""
    jobs = _PENDING.get(function)
    if not jobs:
        return
    _, folded = function._compiler.fold_argument_types(args, kws)
    sig = tuple(folded)
    job = jobs.get(sig)
    if job is None:  # compiled here: the table that sent it elsewhere is stale (settle says so)
        for other in jobs.values():
            other.stale.append(f"{function.py_func.__qualname__} asked for {sig}, not {list(jobs)}")
        return
    if not job.asked:
        job.asked = True
        _await(function, sig, job)


def wait_compiled(kernel, args=()) -> None:
    """Before ``kernel``'s call on ``args``: wait for :func:`compile_elsewhere`'s process
    compiling ``kernel``, if any (the kernel is then in the cache, unless that process
    failed: then the call compiles it); with callees by address in ``args``
    (:class:`Callees`), compile the kernel here first (unless another process does),
    then wait for those compiled elsewhere and load them all (a call would compile a
    missing one in a worker thread, the others waiting)."""
    # once per process and table (hashing their types costs ~20 us a callee)
    tables = [arg for arg in args if isinstance(arg, Callees) and not arg.loaded]
    if tables and hasattr(kernel, "typeof_pyval"):
        by_address = [job for table in tables for job in table.jobs()]
        if any(sig in _PENDING.get(function, {}) for function, sig in by_address):
            sig = tuple(kernel.typeof_pyval(arg) for arg in args)
            if sig not in kernel.overloads and sig not in _PENDING.get(kernel, {}):
                kernel.compile(sig)  # meanwhile (unless another process compiles it too)
        for function, callee_sig in by_address:
            job = _PENDING.get(function, {}).get(callee_sig)
            if job is not None:  # also when another thread asked first (a dask chunk's first call beside this)
                job.asked = True
                _await(function, callee_sig, job)
            if callee_sig not in function.overloads:
                function.compile(callee_sig)
        for table in tables:
            table.loaded = True
    if not _PENDING:
        return
    with _PENDING_LOCK:  # left for settle to forget: another thread's call may wait for them too
        jobs = dict(_PENDING.get(kernel, {}))
    for sig, job in jobs.items():
        job.asked = True
        _await(kernel, sig, job)
    _let_end({job.process for job in jobs.values()}, done=kernel)


def _let_end(processes, done=None) -> None:
    """Wait for those of ``processes`` with no job left but ``done``'s (compiled) to end
    (their interpreter's exit would otherwise share the cores with the call's first run)."""
    busy = {job.process for function, jobs in list(_PENDING.items()) if function is not done for job in jobs.values()}
    for process in processes - busy:
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


def settle(kernel, checked: bool = True) -> None:
    """After ``kernel``'s call: forget the callees compiled elsewhere for it. Under
    :data:`STRICT_ENV` and ``checked``, raise :class:`StaleCompileJobs` when its compile
    here asked one of them for other argument types, or asked for some of them and not
    for the others."""
    if not _PENDING:
        return
    with _PENDING_LOCK:
        asked, unasked, stale, done = [], [], [], []
        for function in list(_PENDING):
            jobs = _PENDING[function]
            for sig in [sig for sig, job in jobs.items() if job.owner is kernel]:
                job = jobs.pop(sig)
                done.append(job)
                (asked if job.asked else unasked).append(f"{function.py_func.__qualname__}{sig}")
                stale += job.stale
            if not jobs:
                del _PENDING[function]
        processes = {job.process for job in done}
    _let_end(processes)
    if checked and os.environ.get(STRICT_ENV) and (stale or asked and unasked):
        never = [f"never asked for {name}" for name in unasked] if asked else []
        raise StaleCompileJobs(f"the callees compiled elsewhere for {kernel.py_func.__qualname__} are not those it "
                               f"calls: {'; '.join(sorted(set(stale)) + never)}; update its table")


def _compile_job() -> None:
    """In the process of :func:`compile_elsewhere`: compile each function for its
    signature, in order; numba saves each to its cache. A failed one is left to the
    process that needs it."""
    for module, qualname, sig in pickle.loads(sys.stdin.buffer.read()):
        try:
            function = _import_bare(module)
            for name in qualname.split("."):
                function = getattr(function, name)
            function.compile(sig)
        except Exception:  # noqa: BLE001, S112 - the caller compiles it itself
            continue


def _import_bare(module: str):
    """``module``, imported without running the ``__init__`` of the packages above it
    that are not imported yet: what a compiling process needs is the module and what it
    imports, not the packages' public API."""
    import importlib
    import importlib.util

    parts = module.split(".")
    for end in range(1, len(parts)):
        name = ".".join(parts[:end])
        if name not in sys.modules:
            package = importlib.util.module_from_spec(importlib.util.find_spec(name))
            sys.modules[name] = package
            setattr(sys.modules[".".join(parts[:end - 1])], parts[end - 1], package)
    return importlib.import_module(module)
