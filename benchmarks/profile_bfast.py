"""Where the cpu engine of BFAST Monitor spends its time, by numba function (Linux ``perf``).

    python benchmarks/profile_bfast.py [--preset D1] [--history all] [--threads 1] [--seconds 8] [--json]

numba's JIT code has no symbols that ``perf`` can see. This script compiles the engine
into a fresh numba cache folder (so that the object code is at hand; ~1 minute), writes
``/tmp/perf-<pid>.map`` with the address range of every compiled function, then samples
itself with ``perf record`` while it runs the engine in a loop, and prints the share of
samples per function. Functions that LLVM inlined into their caller are counted in it.
Needs ``perf`` and ``nm`` on the PATH and permission to profile one's own processes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time


def _function_ranges(module):
    """(address, size, name) of every function in the object code of ``module``'s numba
    dispatchers; names shortened to what follows the module path."""
    from numba.core.registry import CPUDispatcher

    ranges = []
    for attribute in dir(module):
        dispatcher = getattr(module, attribute)
        if not isinstance(dispatcher, CPUDispatcher):
            continue
        for result in dispatcher.overloads.values():
            library = result.library
            with tempfile.NamedTemporaryFile(suffix=".o") as handle:
                handle.write(library._get_compiled_object())
                handle.flush()
                listing = subprocess.run(["nm", "-S", "--defined-only", handle.name],
                                         capture_output=True, text=True, check=True).stdout
            symbols = {}
            for line in listing.splitlines():
                fields = line.split()
                if len(fields) == 4 and fields[2] in "tT":
                    symbols[fields[3]] = (int(fields[0], 16), int(fields[1], 16))
            entry = result.fndesc.llvm_func_name
            if entry not in symbols:
                continue
            base = library.get_pointer_to_function(entry) - symbols[entry][0]
            for name, (offset, size) in symbols.items():
                ranges.append((base + offset, size, _short_name(name)))
    return sorted(set(ranges))


def _short_name(mangled: str) -> str:
    """The last name of an Itanium-mangled nested name (``_ZN6tscube5bfast4_cpu7_medianB3v..``
    -> ``_median``), or the symbol itself."""
    if not mangled.startswith("_ZN"):
        return mangled[:60]
    names, i = [], 3
    while i < len(mangled) and mangled[i].isdigit():
        j = i
        while mangled[j].isdigit():
            j += 1
        length = int(mangled[i:j])
        names.append(mangled[j:j + length])
        i = j + length
    return names[-1] if names else mangled[:60]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="D1", help="make_cube preset")
    parser.add_argument("--history", default="all", choices=["all", "ROC", "BP"], help="history selection")
    parser.add_argument("--threads", type=int, default=1, help="numba threads")
    parser.add_argument("--seconds", type=float, default=8.0, help="sampling time")
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--json", action="store_true", help="one JSON line instead of a table")
    args = parser.parse_args(argv)
    for tool in ("perf", "nm"):
        if shutil.which(tool) is None:
            print(f"profile_bfast: needs `{tool}` on the PATH", file=sys.stderr)
            return 2

    cache = tempfile.mkdtemp(prefix="tscube-profile-cache-")
    os.environ["NUMBA_CACHE_DIR"] = cache  # compile afresh: cached code has no object to map
    import numba

    from tscube import bfast_monitor
    from tscube.bfast.monitor import _cpu
    from tscube.bfast.monitor.history import _cpu as _history_cpu
    from tscube.datasets import make_cube

    numba.set_num_threads(args.threads)
    cube = make_cube(args.preset)
    # compile here: a kernel compiled in another process (compile_elsewhere) comes from the
    # cache, which keeps no object code to map
    _cpu.compile_elsewhere = lambda jobs: False

    def call():
        bfast_monitor(cube.data, cube.dates, cube.start, order=3, freq=23, history=args.history, engine="cpu")

    call()  # compiles
    ranges = _function_ranges(_cpu) + _function_ranges(_history_cpu)
    with open(f"/tmp/perf-{os.getpid()}.map", "w") as handle:
        for address, size, name in ranges:
            handle.write(f"{address:x} {size:x} {name}\n")

    stop = threading.Event()
    calls = []

    def loop():
        numba.set_num_threads(args.threads)  # numba's thread count is per calling thread
        while not stop.is_set():
            begin = time.perf_counter()
            call()
            calls.append(time.perf_counter() - begin)

    worker = threading.Thread(target=loop)
    worker.start()
    data = os.path.join(cache, "perf.data")
    subprocess.run(["perf", "record", "-q", "-o", data, "-p", str(os.getpid()), "--", "sleep",
                    str(args.seconds)], check=True, capture_output=True)
    stop.set()
    worker.join()
    report = subprocess.run(["perf", "report", "-i", data, "--stdio", "--sort", "sym"],
                            capture_output=True, text=True, check=True).stdout
    shares = []
    for line in report.splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[0].endswith("%") and not line.startswith("#"):
            shares.append((float(fields[0][:-1]), " ".join(fields[2:])))
    shares.sort(reverse=True)
    from isa import target  # this folder's

    record = dict(preset=args.preset, history=args.history, threads=args.threads, calls=len(calls), **target(),
                  best_call_s=min(calls) if calls else None,
                  functions={name: share for share, name in shares[: args.top]})
    if args.json:
        print(json.dumps(record))
    else:
        print(f"{args.preset}, history {args.history}, {record['vector_isa']} ({record['numba_cpu']}), "
              f"{args.threads} thread(s), {len(calls)} calls, best {min(calls):.4f} s")
        for share, name in shares[: args.top]:
            print(f"{share:6.2f}%  {name}")
    shutil.rmtree(cache, ignore_errors=True)
    os.remove(f"/tmp/perf-{os.getpid()}.map")
    return 0


if __name__ == "__main__":
    sys.exit(main())
