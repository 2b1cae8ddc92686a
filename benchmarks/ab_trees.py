"""A/B spot-check of a change: the same timings on two source trees, interleaved, in one run.

    git worktree add --detach ../base <commit before>   # the code before
    python benchmarks/ab_trees.py ../base/src src [--rounds 3] [--cases monitor_ROC_D2,...]

Each case runs in a fresh subprocess per tree and round (PYTHONPATH=<tree>/src), warms up
once (numba compiles or loads its cache), then takes the best of ``repeat`` timed calls
(or of the part a case times itself). Prints one JSON line per case: the best seconds of
each tree over all rounds and new/base. Cases: BFAST Monitor ROC, "all" and BP on D2 (BP
also on Peru(Small), whose short histories give segments under 3k rows; ROC also with
season dummies, 24 regressors: the per-pixel path),
BFAST Lite and classic BFAST on cloudy cubes, STL on cloudy series, k-means and a full-covariance Gaussian
mixture (fixed iterations), near-real-time updates in memory and of a saved state.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

CASES = {
    "monitor_ROC_D2": ("""
        import numpy as np, tscube
        from tscube.datasets import make_cube
        cube = make_cube("D2", seed=1)
        run = lambda: tscube.bfast_monitor(cube.data, cube.dates, cube.start, freq=23, history="ROC", engine="cpu")
    """, 3),
    "monitor_all_D2": ("""
        import numpy as np, tscube
        from tscube.datasets import make_cube
        cube = make_cube("D2", seed=1)
        run = lambda: tscube.bfast_monitor(cube.data, cube.dates, cube.start, freq=23, history="all", engine="cpu")
    """, 3),
    "monitor_BP_D2": ("""
        import numpy as np, tscube
        from tscube.datasets import make_cube
        cube = make_cube("D2", seed=1)
        run = lambda: tscube.bfast_monitor(cube.data, cube.dates, cube.start, freq=23, history="BP", engine="cpu")
    """, 3),
    "monitor_BP_peru_small": ("""
        import numpy as np, tscube
        from tscube.datasets import make_cube
        cube = make_cube("peru_small", seed=1)
        data = cube.data.reshape(cube.data.shape[0], -1)[:, :2048]
        run = lambda: tscube.bfast_monitor(data, cube.dates, cube.start, freq=23, history="BP", engine="cpu")
    """, 3),
    "monitor_ROC_season": ("""
        import numpy as np, tscube
        from tscube.datasets import make_cube
        cube = make_cube("demo", shape=(16, 64), nan_fraction=0.2, seed=3)
        run = lambda: tscube.bfast_monitor(cube.data, cube.dates, cube.start, freq=23, order=0, season=True,
                                           history="ROC", engine="cpu")
    """, 3),
    "lite_cloudy": ("""
        import numpy as np, tscube
        from tscube.datasets import make_cube
        cube = make_cube("demo", shape=(16, 64), seed=3)
        data = cube.data.reshape(cube.data.shape[0], -1)
        rng = np.random.default_rng(0)
        data = np.where(rng.random(data.shape) < 0.2, np.nan, data)
        run = lambda: tscube.bfast_lite(data, cube.dates, freq=23, engine="cpu")
    """, 3),
    "classic_cloudy": ("""
        import numpy as np, tscube
        from tscube.datasets import make_cube
        cube = make_cube("demo", shape=(8, 32), seed=3)
        data = cube.data.reshape(cube.data.shape[0], -1)
        run = lambda: tscube.bfast_classic(data, cube.dates, freq=23, engine="cpu")
    """, 3),
    "stl_cloudy": ("""
        import numpy as np, tscube
        rng = np.random.default_rng(0)
        T, P = 230, 40000
        t = np.arange(T)
        data = (0.5 + 0.2 * np.sin(2 * np.pi * t / 23)[:, None] + 0.05 * rng.standard_normal((T, P))).astype(np.float32)
        data[rng.random((T, P)) < 0.3] = np.nan
        run = lambda: tscube.stl(data, 23, engine="cpu")
    """, 3),
    "kmeans": ("""
        import numpy as np
        from tscube.cluster import KMeans
        X = np.random.default_rng(0).standard_normal((400_000, 8))
        run = lambda: KMeans(16, n_init=1, max_iter=10, tol=0.0, random_state=0, engine="cpu").fit(X)
    """, 3),
    "gmm_full": ("""
        import numpy as np
        from tscube.cluster import GaussianMixture
        X = np.random.default_rng(0).standard_normal((200_000, 8))
        run = lambda: GaussianMixture(8, max_iter=5, tol=0.0, init="random_from_data", random_state=0, engine="cpu").fit(X)
    """, 3),
    "nrt_update": ("""
        import numpy as np, tscube
        from tscube.datasets import make_cube
        from tscube.bfast import BfastMonitor
        from tscube.timeaxis import build_time_axis
        cube = make_cube("demo", shape=(200, 500), seed=2)
        t = build_time_axis(cube.dates, 23).time
        n = cube.data.shape[0]
        monitor = BfastMonitor(float(t[150]), freq=23, engine="cpu").fit(cube.data[:n - 8], t[:n - 8])
        import copy, time as _time
        state = copy.deepcopy(monitor.__getstate__())
        timings = []
        def run():
            monitor.__setstate__(copy.deepcopy(state))
            began = _time.perf_counter()
            for i in range(n - 8, n):
                monitor.update(cube.data[i:i + 1], t[i:i + 1])
            timings.append(_time.perf_counter() - began)
    """, 7),
    "nrt_update_saved": ("""
        import numpy as np, tscube, shutil, tempfile, time as _time
        from pathlib import Path
        from tscube.datasets import make_cube
        from tscube.bfast import BfastMonitor
        from tscube.bfast.nrt import update_saved
        from tscube.timeaxis import build_time_axis
        cube = make_cube("demo", shape=(400, 500), seed=2)
        t = build_time_axis(cube.dates, 23).time
        n = cube.data.shape[0]
        folder = Path(tempfile.mkdtemp())
        BfastMonitor(float(t[150]), freq=23, engine="cpu").fit(cube.data[:n - 1], t[:n - 1]).save(folder / "s.zarr")
        timings = []
        def run():
            shutil.rmtree(folder / "c.zarr", ignore_errors=True)
            shutil.copytree(folder / "s.zarr", folder / "c.zarr")
            began = _time.perf_counter()
            update_saved(folder / "c.zarr", cube.data[n - 1:], t[n - 1:])
            timings.append(_time.perf_counter() - began)
    """, 5),
}

SNIPPET = """
import json, time, textwrap
{setup}
run()
best = float("inf")
for _ in range({repeat}):
    began = time.perf_counter(); run(); best = min(best, time.perf_counter() - began)
if "timings" in globals():  # the case times its own part
    best = min(timings[1:])
print(json.dumps(best))
"""


def main() -> None:
    base, new = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 3
    only = sys.argv[sys.argv.index("--cases") + 1].split(",") if "--cases" in sys.argv else list(CASES)
    for name in only:
        setup, repeat = CASES[name]
        code = SNIPPET.format(setup=textwrap.dedent(setup), repeat=repeat)
        best = {"base": float("inf"), "new": float("inf")}
        for _ in range(rounds):
            for label, tree in (("base", base), ("new", new)):
                env = dict(os.environ, PYTHONPATH=tree)
                out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
                if out.returncode:
                    raise SystemExit(f"{name} {label}: {out.stderr[-2000:]}")
                best[label] = min(best[label], json.loads(out.stdout.strip().splitlines()[-1]))
        print(json.dumps(dict(case=name, base_s=round(best["base"], 4), new_s=round(best["new"], 4),
                              new_over_base=round(best["new"] / best["base"], 3), load=os.getloadavg()[0])),
              flush=True)


if __name__ == "__main__":
    main()
