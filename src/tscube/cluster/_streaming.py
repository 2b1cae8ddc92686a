"""Input handling: NumPy arrays in memory, dask arrays and xarray objects streamed.

Every estimator talks to its data through one of two small classes with the same
methods, so the EM/Lloyd loops are written once:

``InMemorySamples``
    a NumPy (N, D) array, rows with any non-finite feature removed once.
``StreamedSamples``
    a dask (N, D) array. Each call maps the engine over the row-chunks (the rows
    of a chunk with a non-finite feature are dropped inside the task) and adds
    up the small per-chunk statistics; the full array is never materialised.

Rule for missing values (both): a sample with any NaN/inf feature is ignored
when fitting; ``predict`` gives it label -1 and ``predict_proba``/
``score_samples`` give NaN.
"""

from __future__ import annotations

import threading

import numpy as np

from ._rows import column_moments, finite_rows


def _is_dask(array):
    return type(array).__module__.split(".")[0] == "dask"


def _is_xarray(obj):
    return type(obj).__module__.split(".")[0] == "xarray"


def as_feature_dataarray(obj, feature_dim):
    """An xarray Dataset becomes a DataArray with its variables along ``feature_dim``."""
    import xarray as xr

    if isinstance(obj, xr.Dataset):
        obj = obj.to_array(dim=feature_dim)
    if feature_dim not in obj.dims:
        raise ValueError(
            f"feature_dim={feature_dim!r} is not a dimension of the input (dims: {obj.dims})"
        )
    return obj.transpose(..., feature_dim)


def as_sample_matrix(X, feature_dim="band"):
    """Return an (N, D) NumPy or dask array from NumPy/dask/xarray input.

    Input that cannot be samples × features is refused with scikit-learn's error types
    (and the words its estimator checks look for): sparse matrices, complex or
    non-numeric values, arrays that are not 2-D, no sample or no feature.
    """
    if _is_xarray(X):
        X = as_feature_dataarray(X, feature_dim)
        data = X.data
        if _is_dask(data):
            data = data.rechunk({data.ndim - 1: -1})
        return _check_shape(data.reshape(-1, data.shape[-1]))
    if _is_dask(X):
        return _check_shape(X).rechunk({1: -1})
    if type(X).__module__.startswith("scipy.sparse"):
        raise TypeError("sparse input is not supported: pass a dense array (X.toarray())")
    X = np.asarray(X)
    if X.dtype == object:  # numbers stored as objects are numbers
        try:
            X = X.astype(np.float64)
        except (TypeError, ValueError) as error:
            raise TypeError(f"X must hold real numbers: {error}") from None
    if np.iscomplexobj(X):
        raise ValueError("Complex data not supported: X must hold real numbers")
    if not (np.issubdtype(X.dtype, np.floating) or np.issubdtype(X.dtype, np.integer)):
        raise TypeError(f"X must hold real numbers, got dtype {X.dtype}")
    return _check_shape(X)


def _check_shape(X):
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D (n_samples, n_features), got shape {X.shape}; "
                         "Reshape your data: X.reshape(-1, 1) for one feature, "
                         "X.reshape(1, -1) for one sample")
    for axis, what in enumerate(("sample", "feature")):
        if X.shape[axis] == 0:
            raise ValueError(f"Found array with 0 {what}(s) (shape={X.shape}) while a "
                             "minimum of 1 is required.")
    return X


def n_features_of(X, feature_dim="band"):
    """Number of features of any accepted input, without loading it."""
    if _is_xarray(X):
        return as_feature_dataarray(X, feature_dim).sizes[feature_dim]
    return as_sample_matrix(X, feature_dim).shape[1]


class InMemorySamples:
    """Finite rows of a NumPy array, prepared once for the engine."""

    def __init__(self, X, engine):
        X = np.ascontiguousarray(X, dtype=np.float64)  # C order once, for the finite-row kernel and the engine
        keep = finite_rows(X)
        self.engine = engine
        self.n_features = X.shape[1]
        self._kept = None if keep.all() else keep
        self.host = X if self._kept is None else X[keep]
        self.n_samples = self.host.shape[0]
        self.data = engine.prepare(self.host)
        self._moments = None

    def moments(self):
        """Per-feature mean and variance of the finite rows (computed once)."""
        if self._moments is None:
            n, mean, m2 = column_moments(self.host)
            self._moments = mean, m2 / n
        return self._moments

    def at_rows(self, values, fill):
        """``values`` of the finite rows put back at their rows of the input, ``fill``
        at the others."""
        if self._kept is None:
            return values
        out = np.full(self._kept.shape + values.shape[1:], fill, dtype=values.dtype)
        out[self._kept] = values
        return out

    def subsample(self, n, rng):
        if n >= self.n_samples:
            return self.host
        return self.host[np.sort(rng.choice(self.n_samples, size=n, replace=False))]

    def gmm_statistics(self, *params):
        return self.engine.gmm_statistics(self.data, *params)

    def kmeans_statistics(self, centers, sums_only=False):
        return self.engine.kmeans_statistics(self.data, centers, sums_only)


def _chunk_moments(block):
    block = np.asarray(block, dtype=np.float64)
    return column_moments(block[finite_rows(block)])


def _chunk_subsample(block, fraction, seed):
    block = np.asarray(block, dtype=np.float64)
    block = block[finite_rows(block)]
    keep = np.random.default_rng(seed).random(block.shape[0]) < fraction
    return block[keep]


#: Engine calls from dask's worker threads take turns: the cpu kernels already use
#: every core; loading and decoding the chunks still overlaps.
_ENGINE_LOCK = threading.Lock()


def _chunk_call(block, engine_name, function, params):
    from ._common import resolve_engine

    engine = resolve_engine(engine_name)
    block = np.asarray(block, dtype=np.float64)
    block = block[finite_rows(block)]
    if block.shape[0] == 0:
        return None
    with _ENGINE_LOCK:
        result = getattr(engine, function)(engine.prepare(block), *params)
    if function == "kmeans_statistics":
        result = (None,) + tuple(result[1:])  # labels are per chunk: not kept
    return result


def _add_results(results):
    results = [r for r in results if r is not None]
    if not results:
        raise ValueError("X has no sample with all features finite")
    total = list(results[0])
    for result in results[1:]:
        for i, value in enumerate(result):
            if value is not None:
                total[i] = total[i] + value
    return tuple(total)


class StreamedSamples:
    """A dask (N, D) array, reduced chunk by chunk at every pass."""

    def __init__(self, X, engine_name, scheduler=None):
        import dask

        self.dask = dask
        self.engine_name = engine_name
        self.scheduler = scheduler
        self.n_features = X.shape[1]
        self.blocks = list(X.to_delayed().ravel())
        parts = self._compute([dask.delayed(_chunk_moments)(b) for b in self.blocks])
        counts = np.array([p[0] for p in parts], dtype=np.float64)
        self.n_samples = int(counts.sum())
        if self.n_samples == 0:
            raise ValueError("X has no sample with all features finite")
        means = np.array([p[1] for p in parts])
        self._mean = (counts[:, None] * means).sum(axis=0) / self.n_samples
        # Chan et al.: pooled sum of squares = Σ M2_b + Σ n_b (mean_b - mean)²
        m2 = sum(p[2] for p in parts) + (counts[:, None] * (means - self._mean) ** 2).sum(axis=0)
        self._var = m2 / self.n_samples

    def _compute(self, tasks):
        return self.dask.compute(*tasks, scheduler=self.scheduler)

    def moments(self):
        return self._mean, self._var

    def subsample(self, n, rng):
        fraction = min(1.0, n / self.n_samples)
        seeds = rng.integers(2**63, size=len(self.blocks))
        parts = self._compute([
            self.dask.delayed(_chunk_subsample)(b, fraction, int(s))
            for b, s in zip(self.blocks, seeds)
        ])
        return np.concatenate(parts, axis=0)

    def _reduce(self, function, params):
        call = self.dask.delayed(_chunk_call)
        return _add_results(self._compute(
            [call(b, self.engine_name, function, params) for b in self.blocks]
        ))

    def gmm_statistics(self, *params):
        return self._reduce("gmm_statistics", params)

    def kmeans_statistics(self, centers, sums_only=False):
        return self._reduce("kmeans_statistics", (centers, sums_only))


def make_samples(X, engine_name, engine, feature_dim="band", scheduler=None):
    """Wrap any accepted input in ``InMemorySamples`` or ``StreamedSamples``."""
    matrix = as_sample_matrix(X, feature_dim)
    if _is_dask(matrix):
        return StreamedSamples(matrix, engine_name, scheduler)
    return InMemorySamples(matrix, engine)


def apply_per_sample(X, function, n_outputs_per_sample, dtype, fill, feature_dim="band"):
    """Apply ``function`` ((n, D) finite rows -> (n,) or (n, m)) to every sample of X.

    NumPy input gives NumPy output, dask gives dask (lazy, chunk-wise), xarray gives
    an xarray object with the input's non-feature coords/attrs (CRS included).
    Rows with a non-finite feature get ``fill``.
    """

    def on_rows(rows):
        rows = np.ascontiguousarray(rows, dtype=np.float64)
        shape = (rows.shape[0],) if n_outputs_per_sample is None else (
            rows.shape[0], n_outputs_per_sample)
        out = np.full(shape, fill, dtype=dtype)
        keep = finite_rows(rows)
        if keep.any():
            with _ENGINE_LOCK:
                out[keep] = function(rows[keep])  # a C-ordered copy
        return out

    def on_block(block):  # (..., D) -> (...) or (..., m)
        rows = block.reshape(-1, block.shape[-1])
        out = on_rows(rows)
        return out.reshape(block.shape[:-1] + out.shape[1:])

    if _is_xarray(X):
        import xarray as xr

        da = as_feature_dataarray(X, feature_dim)
        if _is_dask(da.data):
            da = da.chunk({feature_dim: -1})
        kwargs = dict(input_core_dims=[[feature_dim]], dask="parallelized",
                      output_dtypes=[dtype], keep_attrs=True)
        if n_outputs_per_sample is None:
            return xr.apply_ufunc(on_block, da, **kwargs)
        kwargs["output_core_dims"] = [["component"]]
        kwargs["dask_gufunc_kwargs"] = {"output_sizes": {"component": n_outputs_per_sample}}
        return xr.apply_ufunc(on_block, da, **kwargs)
    matrix = as_sample_matrix(X, feature_dim)
    if _is_dask(matrix):
        if n_outputs_per_sample is None:
            return matrix.map_blocks(on_rows, drop_axis=1, dtype=dtype)
        return matrix.map_blocks(on_rows, dtype=dtype,
                                 chunks=(matrix.chunks[0], (n_outputs_per_sample,)))
    return on_rows(matrix)
