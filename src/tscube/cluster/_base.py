"""scikit-learn's estimator base classes when scikit-learn is installed (the ``cluster``
extra), else minimal stand-ins with the same protocol: ``get_params``/``set_params``
from the ``__init__`` signature (so ``clone``, ``Pipeline`` and grid searches work with
scikit-learn, and the parameters are introspectable without it).

:class:`EstimatorChecks` adds what both tscube estimators share on top: the fitted-state
and feature-count checks of the inference methods (scikit-learn's errors and messages)
and the tags that tell scikit-learn how the estimators treat their input.
"""

from __future__ import annotations

import inspect

import numpy as np

from ._streaming import n_features_of

try:
    from sklearn.base import (
        BaseEstimator,
        ClassNamePrefixFeaturesOutMixin,
        ClusterMixin,
        DensityMixin,
        TransformerMixin,
    )
    from sklearn.exceptions import NotFittedError
except ImportError:  # scikit-learn is optional: the same protocol, minimal

    class NotFittedError(ValueError, AttributeError):
        """An inference method was called before ``fit`` (scikit-learn's exception)."""

    class BaseEstimator:
        """Parameters are the ``__init__`` arguments, stored under their own names."""

        @classmethod
        def _get_param_names(cls):
            signature = inspect.signature(cls.__init__)
            return sorted(p.name for p in signature.parameters.values()
                          if p.name != "self" and p.kind != p.VAR_KEYWORD)

        def get_params(self, deep=True):
            return {name: getattr(self, name) for name in self._get_param_names()}

        def set_params(self, **params):
            valid = self._get_param_names()
            for name, value in params.items():
                if name not in valid:
                    raise ValueError(f"invalid parameter {name!r} for {type(self).__name__}; "
                                     f"valid ones: {', '.join(valid)}")
                setattr(self, name, value)
            return self

        def __repr__(self):
            defaults = {p.name: p.default for p in inspect.signature(type(self).__init__).parameters.values()}
            changed = [f"{k}={v!r}" for k, v in self.get_params().items()
                       if not (isinstance(v, type(defaults.get(k))) and v == defaults.get(k))]
            return f"{type(self).__name__}({', '.join(changed)})"

    class ClusterMixin:
        _estimator_type = "clusterer"

    class DensityMixin:
        _estimator_type = "DensityEstimator"

    class TransformerMixin:
        def fit_transform(self, X, y=None, **fit_params):
            return self.fit(X, y, **fit_params).transform(X)

    class ClassNamePrefixFeaturesOutMixin:
        def get_feature_names_out(self, input_features=None):
            """Output names: the lower-case class name and the output's index."""
            prefix = type(self).__name__.lower()
            return np.asarray([f"{prefix}{i}" for i in range(self._n_features_out)], dtype=object)


class EstimatorChecks:
    """Shared by KMeans and GaussianMixture (put before scikit-learn's base classes)."""

    #: an attribute that only ``fit`` sets
    _fitted_attribute = "n_features_in_"

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # samples with a NaN/inf feature are ignored by fit and flagged by the inference
        # methods (label -1, NaN) instead of raising: documented in docs/cluster.md
        tags.input_tags.allow_nan = True
        return tags

    def _check_fitted_input(self, X=None):
        """Raise NotFittedError before ``fit``, and scikit-learn's ValueError when ``X``
        has another number of features than the data of ``fit``."""
        if not hasattr(self, self._fitted_attribute):
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet: call fit first")
        if X is None:
            return
        n_features = n_features_of(X, self.feature_dim)
        if n_features != self.n_features_in_:
            raise ValueError(f"X has {n_features} features, but {type(self).__name__} is "
                             f"expecting {self.n_features_in_} features as input")


__all__ = ["BaseEstimator", "ClassNamePrefixFeaturesOutMixin", "ClusterMixin", "DensityMixin",
           "EstimatorChecks", "NotFittedError", "TransformerMixin"]
