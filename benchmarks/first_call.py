"""What a new user waits for: the first call of each public algorithm in a fresh process
with an empty numba cache (numba compiles the kernels the call needs), then the same
call in a second fresh process that loads them from the cache; and the first-ever
``tscube demo``. Each case runs in its own interpreter, one after the other (a compile
uses one core: two at once would share this machine's cores).

Per case: wall seconds of the first call (cold), CPU seconds of that process and of the
processes it started (a first call may compile a kernel in another process), the
kernels numba compiled in the process and its compile seconds, the wall seconds of the same call in a
new process with the cache filled (warm, loading included), and the wall seconds of
importing tscube. The inputs are small (compile time does not depend on their size).

    python benchmarks/first_call.py [--cases monitor,monitor_bp,...] [--markdown]

Prints one JSON line per case, then (``--markdown``) the table of docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

#: Each case: the set-up (not timed) and the call (timed) in a fresh interpreter.
SETUP = """
from tscube.datasets import make_cube
cube = make_cube("demo", shape=(8, 8), seed=0)
data, dates, start = cube.data, cube.dates, cube.start
"""

CASES = {
    "monitor": ("bfast_monitor (default: ROC history)",
                "from tscube import bfast_monitor", "bfast_monitor(data, dates, start, freq=23)"),
    "monitor_all": ('bfast_monitor(history="all")',
                    "from tscube import bfast_monitor", 'bfast_monitor(data, dates, start, freq=23, history="all")'),
    "monitor_bp": ('bfast_monitor(history="BP")',
                   "from tscube import bfast_monitor", 'bfast_monitor(data, dates, start, freq=23, history="BP")'),
    "monitor_season": ("bfast_monitor(order=0, season=True) (ROC per pixel)",
                       "from tscube import bfast_monitor",
                       "bfast_monitor(data, dates, start, freq=23, order=0, season=True)"),
    "monitor_calibrated": ("bfast_monitor(calibrate=True)",
                           "from tscube import bfast_monitor",
                           "bfast_monitor(data, dates, start, freq=23, calibrate=True)"),
    "lite": ("bfast_lite", "from tscube import bfast_lite", "bfast_lite(data, dates, freq=23)"),
    "classic": ("bfast_classic", "from tscube import bfast_classic", "bfast_classic(data, dates, freq=23)"),
    "stl": ("stl", "from tscube import stl", "stl(data, 23)"),
    "kmeans": ("KMeans().fit",
               "import numpy as np\nfrom tscube.cluster import KMeans\n"
               "X = np.random.default_rng(0).standard_normal((2000, 8))",
               "KMeans(n_clusters=4, random_state=0).fit(X)"),
    "gmm": ("GaussianMixture().fit",
            "import numpy as np\nfrom tscube.cluster import GaussianMixture\n"
            "X = np.random.default_rng(0).standard_normal((2000, 8))",
            "GaussianMixture(n_components=4, random_state=0).fit(X)"),
    "nrt": ("BfastMonitor.fit/update",
            "import numpy as np\nfrom tscube import BfastMonitor\ncut = int(np.searchsorted(dates, start)) + 4",
            "m = BfastMonitor(start, freq=23).fit(data[:cut], dates[:cut])\n"
            "m.update(data[cut:], dates[cut:])"),
}

_CHILD = """
import json, resource, sys, time
began = time.perf_counter()
import tscube
imported = time.perf_counter() - began
from numba.core import event
from tscube._jit import compile_notice


class Kernels(event.Listener):  # each kernel the call compiles (top-level events) and its seconds
    def __init__(self):
        self.depth, self.found = 0, []

    def on_start(self, ev):
        if self.depth == 0:
            self.began = time.perf_counter()
        self.depth += 1

    def on_end(self, ev):
        self.depth -= 1
        if self.depth == 0:
            function = ev.data["dispatcher"].py_func
            self.found.append((function.__module__ + "." + function.__qualname__, time.perf_counter() - self.began))


kernels = Kernels()
event.register("numba:compile", kernels)
{setup}
{imports}
with compile_notice(lambda line: None) as notice:
    began = time.perf_counter()
{call}
    wall = time.perf_counter() - began
usage = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
cpu = sum(u.ru_utime + u.ru_stime for u in usage)  # with the processes that compiled kernels for it
print("RESULT " + json.dumps(dict(wall=wall, cpu=cpu, compiled=notice.kernels,
                                  compile_s=notice.seconds, import_s=imported, kernels=kernels.found)))
"""


def _indent(code: str) -> str:
    return "\n".join("    " + line for line in code.splitlines())


def _child(setup: str, imports: str, call: str, env: dict) -> dict:
    source = _CHILD.format(setup=setup, imports=imports, call=_indent(call))
    done = subprocess.run([sys.executable, "-c", source], env=env, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(done.stderr[-3000:])
    line = next(line for line in done.stdout.splitlines() if line.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def _fresh_env(root: str) -> dict:
    env = dict(os.environ)
    env["NUMBA_CACHE_DIR"] = os.path.join(root, "numba")
    env["TSCUBE_CACHE_DIR"] = os.path.join(root, "tscube")  # calibration tables too
    return env


def run_case(name: str) -> dict:
    label, imports, call = CASES[name]
    with tempfile.TemporaryDirectory() as root:
        env = _fresh_env(root)
        cold = _child(SETUP, imports, call, env)
        warm = _child(SETUP, imports, call, env)
    return dict(case=name, call=label, first_wall_s=round(cold["wall"], 2), first_cpu_s=round(cold["cpu"], 1),
                kernels_compiled=cold["compiled"], compile_s=round(cold["compile_s"], 1),
                second_process_wall_s=round(warm["wall"], 3), import_s=round(warm["import_s"], 2),
                kernels={name.replace("tscube.", ""): round(seconds, 1) for name, seconds in cold["kernels"]})


def run_demo() -> dict:
    with tempfile.TemporaryDirectory() as root:
        env = _fresh_env(root)
        tscube = [os.path.join(os.path.dirname(sys.executable), "tscube")]
        began = time.perf_counter()
        subprocess.run(tscube + ["demo", "-o", os.path.join(root, "demo.png")], env=env, check=True,
                       capture_output=True)
        first = time.perf_counter() - began
        began = time.perf_counter()
        subprocess.run(tscube + ["demo", "-o", os.path.join(root, "demo.png")], env=env, check=True,
                       capture_output=True)
        second = time.perf_counter() - began
    return dict(case="demo", call="tscube demo (whole command)", first_wall_s=round(first, 1),
                second_process_wall_s=round(second, 1))


def kernel_markdown(rows: list[dict]) -> str:
    """Each kernel compiled in the calls' own processes, with the first call that compiled it."""
    lines = ["| kernel (compiled in the call's process) | first compiled by | seconds |", "|---|---|---:|"]
    seen = set()
    for row in rows:
        for name, seconds in row.get("kernels", {}).items():
            if name not in seen:
                seen.add(name)
                lines.append(f"| `{name}` | {row['call']} | {seconds} |")
    return "\n".join(lines)


def markdown(rows: list[dict]) -> str:
    lines = ["| first call | first (s, wall) | CPU s | kernels compiled | compiling (s) | second process (s) |",
             "|---|---:|---:|---:|---:|---:|"]
    for row in rows:
        lines.append(f"| {row['call']} | {row['first_wall_s']} | {row.get('first_cpu_s', '')} | "
                     f"{row.get('kernels_compiled', '')} | {row.get('compile_s', '')} | "
                     f"{row['second_process_wall_s']} |")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", default=",".join([*CASES, "demo"]),
                        help=f"comma-separated, of {', '.join([*CASES, 'demo'])}")
    parser.add_argument("--markdown", action="store_true", help="also print the Markdown table")
    args = parser.parse_args(argv)
    import llvmlite.binding as llvm
    import numba

    cpu = os.environ.get("NUMBA_CPU_NAME") or llvm.get_host_cpu_name()
    print(json.dumps(dict(cpu=cpu, cores=os.cpu_count(), numba=numba.__version__)), flush=True)
    rows = []
    for name in args.cases.split(","):
        row = run_demo() if name == "demo" else run_case(name)
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.markdown:
        print(markdown(rows))
        print()
        print(kernel_markdown(rows))


if __name__ == "__main__":
    main()
