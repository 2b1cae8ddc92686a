"""scikit-learn's estimator base classes when scikit-learn is installed (the ``cluster``
extra), else minimal stand-ins with the same protocol: ``get_params``/``set_params``
from the ``__init__`` signature (so ``clone``, ``Pipeline`` and grid searches work with
scikit-learn, and the parameters are introspectable without it)."""

from __future__ import annotations

import inspect

try:
    from sklearn.base import BaseEstimator, ClusterMixin, DensityMixin, TransformerMixin
except ImportError:  # scikit-learn is optional: the same protocol, minimal

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


__all__ = ["BaseEstimator", "ClusterMixin", "DensityMixin", "TransformerMixin"]
