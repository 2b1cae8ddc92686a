"""Clustering benchmark: tscube.cluster engines against scikit-learn, same init and iterations.

Data: ``make_gmm(N, D, K)`` (default 1e6 × 8, 16 components). Every model starts
from the same explicit parameters (random samples as means, equal weights, identity
precisions; the same centres for k-means) and runs a fixed number of iterations
(``tol=0``; k-means may still stop early when no label changes, as scikit-learn's).
A fit's fixed costs (input checks, scikit-learn's parameter initialisation, the
final labelling pass) are removed by timing ``max_iter=1`` and ``max_iter=1+n``
fits: seconds per iteration = difference / (iterations run - 1); "fit s" is the
whole ``max_iter=1+n`` fit (input checks and the final labels included), and "fit ×
sklearn" scikit-learn's over it. Timings are the best of ``--repeat`` rounds, in each of
which every engine runs once (so that load from other jobs hits them alike). Prints one
JSON line per measurement and a Markdown table at the end, with the time of reading
the data once beside (a parallel sum of ``X``: the memory floor of one pass).

Usage: ``python benchmarks/cluster.py [--n 1000000] [--d 8] [--k 16] [--iters 8]
[--methods gmm,kmeans]``; the first line says which instruction set numba compiled for
(``benchmarks/isa.py`` says how to measure AVX2 on an AVX-512 machine).
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings

import numpy as np
from numba import njit, prange


@njit(parallel=True, cache=True)
def _read_once(X):
    total = 0.0
    for i in prange(X.shape[0]):
        for j in range(X.shape[1]):
            total += X[i, j]
    return total


def best_time(function, repeat):
    best = np.inf
    result = None
    for _ in range(repeat):
        start = time.perf_counter()
        result = function()
        best = min(best, time.perf_counter() - start)
    return best, result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--d", type=int, default=8)
    parser.add_argument("--k", type=int, default=16)
    parser.add_argument("--iters", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--methods", default="gmm,kmeans", help="comma-separated: gmm, kmeans")
    parser.add_argument("--covariance", default="full", help="GMM covariance type: full, diag, tied or spherical")
    parser.add_argument("--engines", default="reference,cpu",
                        help="comma-separated tscube engines (add cuda on a GPU machine)")
    args = parser.parse_args()

    from sklearn.cluster import KMeans as SklearnKMeans
    from sklearn.mixture import GaussianMixture as SklearnGaussianMixture

    from tscube.cluster import GaussianMixture, KMeans
    from tscube.datasets._gmm import make_gmm

    from isa import target  # this folder's

    warnings.simplefilter("ignore")
    print(json.dumps(dict(machine=True, cpus=os.cpu_count(), **target())), flush=True)
    X, _ = make_gmm(args.n, args.d, args.k, random_state=0)
    rng = np.random.default_rng(1)
    means = X[rng.choice(args.n, args.k, replace=False)]
    precisions = {"full": np.array([np.eye(args.d)] * args.k), "diag": np.ones((args.k, args.d)),
                  "tied": np.eye(args.d), "spherical": np.ones(args.k)}[args.covariance]
    init = dict(weights_init=np.full(args.k, 1.0 / args.k), means_init=means, precisions_init=precisions,
                covariance_type=args.covariance)
    engines = [e for e in args.engines.split(",") if e]
    # warm-up: numba compilation (cached on disk after the first run) is not timed
    for engine in engines:
        GaussianMixture(args.k, max_iter=1, tol=0, engine=engine, **init).fit(X[:2000])
        KMeans(args.k, init=means, max_iter=1, tol=0, engine=engine).fit(X[:2000])

    makers = {
        "gmm": {
            "sklearn": lambda it: SklearnGaussianMixture(
                args.k, max_iter=it, tol=0, init_params="random_from_data", **init),
            **{engine: (lambda it, e=engine: GaussianMixture(
                args.k, max_iter=it, tol=0, engine=e, **init)) for engine in engines},
        },
        "kmeans": {
            "sklearn": lambda it: SklearnKMeans(args.k, init=means, n_init=1, max_iter=it, tol=0),
            **{engine: (lambda it, e=engine: KMeans(
                args.k, init=means, max_iter=it, tol=0, engine=e)) for engine in engines},
        },
    }
    _read_once(X)
    read_seconds, _ = best_time(lambda: _read_once(X), 5)
    print(json.dumps(dict(read_once_seconds=round(read_seconds, 4), bytes=X.nbytes,
                          gigabytes_per_second=round(X.nbytes / read_seconds / 1e9, 1))), flush=True)
    methods = [m for m in args.methods.split(",") if m]
    rows = []
    for method, by_engine in ((m, makers[m]) for m in methods):
        baseline = None
        reference_value = None
        # the engines take turns in every round, so that a change of the machine's load
        # (shared machines) hits them alike; best of the rounds per engine
        repeat = args.repeat + (1 if method == "kmeans" else 0)  # short runs: noisier
        timings = {engine: [np.inf, np.inf, None] for engine in by_engine}
        for _ in range(repeat):
            for engine, make in by_engine.items():
                t_one, _ = best_time(lambda: make(1).fit(X), 1)
                t_all, model = best_time(lambda: make(1 + args.iters).fit(X), 1)
                best = timings[engine]
                best[:] = min(best[0], t_one), min(best[1], t_all), model
        for engine, (t_one, t_all, model) in timings.items():
            # k-means stops early when no label changes, whatever tol
            per_iter = max(t_all - t_one, 1e-9) / max(model.n_iter_ - 1, 1)
            value = model.lower_bound_ if method == "gmm" else model.inertia_
            if engine == "sklearn":
                baseline, baseline_fit, reference_value = per_iter, t_all, value
            row = dict(
                method=method, engine=engine, n=args.n, d=args.d, k=args.k,
                iterations=int(model.n_iter_), fit_seconds=round(t_all, 3),
                fit_speedup_vs_sklearn=round(baseline_fit / t_all, 2),
                seconds_per_iteration=round(per_iter, 5),
                samples_per_second=round(args.n / per_iter),
                speedup_vs_sklearn=round(baseline / per_iter, 2),
                rel_diff_vs_sklearn=float(abs(value - reference_value) / abs(reference_value)),
                iteration_over_read_once=round(per_iter / read_seconds, 2),
                threads=int(os.environ.get("NUMBA_NUM_THREADS", os.cpu_count())),
            )
            rows.append(row)
            print(json.dumps(row), flush=True)
    print()
    print(f"Reading X once ({X.nbytes / 1e6:.0f} MB): {read_seconds * 1e3:.2f} ms "
          f"({X.nbytes / read_seconds / 1e9:.1f} GB/s)")
    print()
    print("| method | engine | ms / iteration | samples / s | × sklearn | × read-once | fit s "
          "| fit × sklearn | rel. diff. vs sklearn |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['method']} | {r['engine']} | {r['seconds_per_iteration'] * 1e3:.2f} | "
              f"{r['samples_per_second']:.3g} | {r['speedup_vs_sklearn']:.2f} | "
              f"{r['iteration_over_read_once']:.1f} | {r['fit_seconds']:.3f} | "
              f"{r['fit_speedup_vs_sklearn']:.2f} | {r['rel_diff_vs_sklearn']:.1e} |")


if __name__ == "__main__":
    main()
