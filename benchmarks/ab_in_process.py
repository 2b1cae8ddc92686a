"""A/B of a change to BFAST Lite in one process: both trees' calls alternate call by call.

    git worktree add --detach ../base <commit before>   # the code before
    python benchmarks/ab_in_process.py ../base/src src [--pixels 512] [--calls 24] [--setting default ...]

For a shared machine whose speed drifts from minute to minute (a VM whose neighbours
come and go: 1.7x between quarter hours has been seen), where :mod:`ab_trees`' fresh
processes per round land in different minutes. Each tree's ``tscube`` package is copied
under a name of its own (``tscube_a``, ``tscube_b``: its absolute imports renamed) into a
temporary folder and imported in this process; the kernels compile here (the first
call of each, with an empty numba cache of its own: a few minutes), not in helper
processes. Then the trees' calls on the same cube alternate (a, b, b, a, ...), one
thread. Prints one JSON line per setting: each tree's minimum and median µs per pixel,
the ratio of the minima and the median of the pairwise ratios (a / b: above 1, b is
faster), and whether the outputs are identical (else the largest relative difference).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

#: Settings of the MODIS-like cube (275 dates, ``benchmarks/bfast_lite.py``'s anchor).
SETTINGS = {
    "default": dict(),
    "h12": dict(h=12),
    "order1": dict(order=1),
    "season": dict(order=0, season=True),
    "h0.25": dict(h=0.25),
}
OUTPUTS = ("n_breaks", "break_index", "rss", "coefficients", "magnitudes")


def copy_tree(src: Path, name: str, into: Path) -> None:
    """``src/tscube`` as the package ``name`` in ``into``, its absolute imports renamed."""
    target = into / name
    shutil.copytree(src / "tscube", target, ignore=shutil.ignore_patterns("__pycache__"))
    for path in target.rglob("*.py"):
        text = path.read_text()
        text = re.sub(r"\btscube\.(?=[a-z_])", f"{name}.", text)
        text = re.sub(r"^from tscube import", f"from {name} import", text, flags=re.M)
        path.write_text(text)


def compare(a, b) -> str | float:
    worst = 0.0
    for field in OUTPUTS:
        x, y = np.asarray(getattr(a, field), float), np.asarray(getattr(b, field), float)
        if not np.array_equal(x, y, equal_nan=True):
            both = np.isfinite(x) & np.isfinite(y)
            if not np.array_equal(np.isfinite(x), np.isfinite(y)):
                return f"{field} differs where finite"
            worst = max(worst, float(np.max(np.abs(x[both] - y[both]) / np.maximum(np.abs(x[both]), 1e-300))))
    return "identical" if worst == 0.0 else worst


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("tree_a", type=Path, help="source folder holding tscube/ (the code before)")
    parser.add_argument("tree_b", type=Path, help="source folder holding tscube/ (the change)")
    parser.add_argument("--pixels", type=int, default=512)
    parser.add_argument("--calls", type=int, default=24, help="timed calls of each tree")
    parser.add_argument("--missing", type=float, default=0.2, help="random gaps per pixel")
    parser.add_argument("--setting", nargs="+", default=["default"], choices=sorted(SETTINGS))
    args = parser.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="tscube-ab-"))
    os.environ.setdefault("NUMBA_CACHE_DIR", str(folder / "numba-cache"))
    copy_tree(args.tree_a.resolve(), "tscube_a", folder)
    copy_tree(args.tree_b.resolve(), "tscube_b", folder)
    sys.path.insert(0, str(folder))

    def no_helpers(*_, **__):  # tscube._jit compiles here when it cannot start a process
        raise OSError("compile in this process")

    popen, subprocess.Popen = subprocess.Popen, no_helpers
    try:
        import numba

        import tscube_a
        import tscube_b
        from tscube_b.datasets import make_cube

        numba.set_num_threads(1)
        cube = make_cube("demo", shape=(1, args.pixels), n_dates=275, n_history=150, nan_fraction=0.0, seed=4)
        data = cube.data.copy()
        data[np.random.default_rng(1).random(data.shape) < args.missing] = np.nan
        for setting in args.setting:
            kwargs = SETTINGS[setting]
            runs = {name: (lambda m=module: m.bfast_lite(data, cube.dates, freq=23, **kwargs))
                    for name, module in (("a", tscube_a), ("b", tscube_b))}
            outputs = {name: run() for name, run in runs.items()}  # compiles
            seconds = {"a": [], "b": []}
            for c in range(args.calls):
                for name in ("a", "b") if c % 2 == 0 else ("b", "a"):
                    start = time.perf_counter()
                    runs[name]()
                    seconds[name].append(time.perf_counter() - start)
            a, b = np.array(seconds["a"]), np.array(seconds["b"])
            print(json.dumps(dict(
                setting=setting, missing=args.missing, pixels=args.pixels, calls=args.calls,
                a_us_min=1e6 * a.min() / args.pixels, a_us_median=1e6 * np.median(a) / args.pixels,
                b_us_min=1e6 * b.min() / args.pixels, b_us_median=1e6 * np.median(b) / args.pixels,
                a_over_b_min=a.min() / b.min(), a_over_b_pairwise_median=float(np.median(a / b)),
                outputs=compare(outputs["a"], outputs["b"]),
            )), flush=True)
    finally:
        subprocess.Popen = popen
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
