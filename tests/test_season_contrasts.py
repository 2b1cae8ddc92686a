"""The season dummies carry R's own ``contr.poly(f)`` values, bit for bit, f = 2..64
(``fixtures/r_contr_poly``), and the engines' rank rule for them (a history fits the
dummies exactly when it holds every season level) holds on those values.

Run as a script, this module writes the package's copy of R's values,
``src/tscube/data/contr_poly.npz``, from the fixture (after R's outputs changed):

    python tests/test_season_contrasts.py
"""

from __future__ import annotations

import io
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from tscube.bfast.core.design import MAX_SEASON_FREQ, build_design, season_contrasts, season_names
from tscube.bfast.core.ols import LM_FIT_TOL, fit_in_order_qr
from tscube.timeaxis import build_time_axis

from conftest import open_fixture

FREQS = range(2, MAX_SEASON_FREQ + 1)


def r_contr_poly() -> dict[int, tuple[np.ndarray, list[str]]]:
    """R's ``contr.poly(f)`` of the fixture, ``f -> (values (f, f - 1), column names)``;
    every value parsed from its 17 significant digits (the double R held)."""
    with open_fixture("r_contr_poly/contr_poly.csv") as file:
        header = file.readline().strip()
        assert header == "freq,level,column,value"
        rows = [line.rstrip("\n").split(",") for line in file if line.strip()]
    table: dict[int, tuple[np.ndarray, list[str]]] = {}
    for freq in sorted({int(row[0]) for row in rows}):
        table[freq] = (np.full((freq, freq - 1), np.nan), [])
    for freq, level, column, value in rows:
        values, names = table[int(freq)]
        if column not in names:
            names.append(column)
        values[int(level) - 1, names.index(column)] = float(value)
    return table


def test_shipped_contrasts_equal_r_bit_for_bit():
    table = r_contr_poly()
    assert sorted(table) == list(FREQS)
    for freq, (expected, names) in table.items():
        assert not np.isnan(expected).any()
        ours = season_contrasts(freq)
        assert ours.dtype == np.float64 and ours.shape == (freq, freq - 1)
        # bit for bit: the same doubles, signed zeros and all
        np.testing.assert_array_equal(ours.view(np.int64), expected.view(np.int64), err_msg=f"freq {freq}")
        assert season_names(freq) == names


def test_r_values_are_not_the_exact_polynomials():
    """What makes R's values matter: up to degree 20 they are the orthonormal polynomials
    (to 1e-9), from degree 21 on (f >= 23) they are not. At f = 23 R's degree-21 column has
    the opposite sign (0.89 from the polynomial) and, even turned around, its last two
    columns are 0.11 and 0.12 away; at f = 24 the degree-23 column is turned around and
    the last three are up to 0.044 away. They stay orthonormal and sum to zero: at full
    rank they span the same space."""
    for freq in (12, 20, 23, 24):
        ours = season_contrasts(freq)
        exact = _exact_polynomials(freq)
        low = min(freq - 1, 20)  # degrees 1..20
        np.testing.assert_allclose(ours[:, :low], exact[:, :low], rtol=0, atol=1e-9)
        np.testing.assert_allclose(ours.T @ ours, np.eye(freq - 1), atol=1e-15)
        np.testing.assert_allclose(ours.sum(axis=0), 0.0, atol=1e-15)
    deviation = {}
    for freq in (23, 24):
        ours, exact = season_contrasts(freq), _exact_polynomials(freq)
        signs = np.sign(np.sum(ours * exact, axis=0))
        deviation[freq] = (np.abs(ours - exact).max(), np.abs(ours - exact * signs).max(axis=0)[20:], signs[20:])
    assert 0.89 < deviation[23][0] < 0.9 and list(deviation[23][2]) == [-1, 1]
    assert np.all(deviation[23][1] > 0.11)
    assert list(deviation[24][2]) == [1, 1, -1] and 0.04 < deviation[24][1].max() < 0.05


def _exact_polynomials(freq):
    """Orthonormal polynomials in 1..freq of degree 1..freq-1 (Gram–Schmidt in extended
    precision is not needed at the sizes compared here: twice is enough)."""
    x = np.arange(1, freq + 1) - (freq + 1) / 2.0
    basis = np.empty((freq, freq))
    basis[:, 0] = 1.0 / np.sqrt(freq)
    for j in range(1, freq):
        v = x * basis[:, j - 1]
        for _ in range(2):
            v -= basis[:, :j] @ (basis[:, :j].T @ v)
        basis[:, j] = v / np.linalg.norm(v)
    return basis[:, 1:]


def test_bfastlite_fixture_used_the_same_values():
    """``r_bfastlite/season_contrasts.csv`` (f = 23, 24), the values behind the BFAST Lite
    fixtures, are the shipped ones: all but one bit for bit. That file writes each double
    with the fewest of 15..17 digits that R's own parser reads back to it; for one value
    (f = 23, level 11, season^9) 16 digits satisfied R's parser, which is not correctly
    rounded, while a correctly rounded one (Python's) reads them 1 ulp away. The 17
    digits of ``r_contr_poly`` leave no such doubt."""
    with open_fixture("r_bfastlite/season_contrasts.csv") as file:
        table = np.genfromtxt(file, delimiter=",", names=True, dtype=None, encoding=None)
    for freq in (23, 24):
        rows = table[table["freq"] == freq]
        columns = list(dict.fromkeys(rows["column"]))
        r = np.zeros((freq, len(columns)))
        r[rows["level"] - 1, [columns.index(c) for c in rows["column"]]] = rows["value"]
        ours = season_contrasts(freq)
        ulps = np.abs(ours.view(np.int64) - r.view(np.int64))
        expected = [(10, 8)] if freq == 23 else []
        assert list(zip(*np.nonzero(ulps))) == expected and ulps.max() <= 1


@pytest.mark.parametrize("freq", [1, 65, 365])
def test_frequencies_without_r_values_are_refused(freq):
    with pytest.raises(ValueError, match=r"season dummies need 2 <= freq <= 64"):
        season_contrasts(freq)
    axis = build_time_axis(2000 + np.arange(3 * freq) / freq, freq=freq)
    with pytest.raises(ValueError, match=rf"season dummies need 2 <= freq <= 64 .*got freq = {freq}"):
        build_design(axis, 0, True, season=True)


def test_shipped_values_are_read_only():
    with pytest.raises(ValueError):
        season_contrasts(23)[0, 0] = 1.0


def _in_order_ratios(X):
    """R's ``lm.fit`` decision for every column in order: the norm of its part orthogonal
    to the columns kept before it, relative to its own norm (kept when >= 1e-7)."""
    keep, ratios = [], []
    for j in range(X.shape[1]):
        r = np.linalg.qr(X[:, keep + [j]], mode="r")
        ratios.append(abs(r[-1, -1]) / np.linalg.norm(X[:, j]))
        if ratios[-1] >= LM_FIT_TOL:
            keep.append(j)
    return np.array(ratios), keep


@pytest.mark.parametrize("trend", [True, False])
def test_a_history_fits_the_dummies_exactly_when_it_holds_every_level(trend):
    """The rule every engine applies by a level count (SINGULAR_DESIGN for a history that
    misses a season level), checked against R's pivoting on R's values for every f: a
    history holding every level keeps every column by a wide margin (R's columns are
    orthonormal over the levels); one missing a level aliases at least one column (its
    rank is one less), so R predicts NA."""
    rng = np.random.default_rng(7)
    for freq in FREQS:
        contrasts = season_contrasts(freq)
        for trial in range(3):
            n = 3 * freq + 5
            if trial == 0:  # consecutive dates: every level three or four times
                rows = np.arange(n)
                levels = rows % freq
            else:  # every level, some many times, some once
                rows = np.sort(rng.choice(np.arange(6 * freq), n, replace=False))
                levels = rng.integers(0, freq, n)
                levels[:freq] = rng.permutation(freq)
            columns = [np.ones(n)] + ([(rows - rows.mean()) / np.ptp(rows)] if trend else [])
            X = np.column_stack(columns + [contrasts[levels]])
            ratios, keep = _in_order_ratios(X)
            assert len(keep) == X.shape[1] and ratios.min() > 1e-3, (freq, trial, ratios.min())
            missing = rng.integers(freq)
            some = levels != missing
            ratios, keep = _in_order_ratios(X[some])
            assert len(keep) == X.shape[1] - 1, (freq, trial, len(keep))
            _, _, kept = fit_in_order_qr(X[some], rng.normal(size=some.sum()))
            assert kept.sum() == X.shape[1] - 1



def _kept_column_by_column(X):
    """R's in-order rule one column at a time (``lm.fit``, LINPACK ``dqrdc2``): column j is
    kept when |r_jj| of the QR of the kept columns and j is at least LM_FIT_TOL of its norm."""
    norms = np.linalg.norm(X, axis=0)
    keep = []
    for j in range(X.shape[1]):
        if norms[j] > 0 and abs(np.linalg.qr(X[:, keep + [j]], mode="r")[-1, -1]) >= LM_FIT_TOL * norms[j]:
            keep.append(j)
    return keep


@pytest.mark.parametrize("trial", range(40))
def test_in_order_fit_keeps_what_a_qr_per_column_keeps(trial):
    """fit_in_order_qr runs one QR over the kept and remaining columns until a column is
    aliased: the same columns as one QR per column, on designs with exact, near and repeated
    aliasing and zero columns; the coefficients are those of the kept columns' least squares.
    (Its callers fit at least as many rows as columns.)"""
    rng = np.random.default_rng(trial)
    k = int(rng.integers(2, 14))
    n = k + int(rng.integers(0, 20))
    X = rng.normal(size=(n, k))
    for j in rng.choice(k, size=int(rng.integers(0, k)), replace=False):
        kind = rng.integers(4)
        if kind == 0:
            X[:, j] = 0.0
        elif kind == 1 and j > 0:  # exactly in the span of earlier columns
            X[:, j] = X[:, :j] @ rng.normal(size=j)
        elif kind == 2 and j > 0:  # aliased up to rounding-sized noise
            X[:, j] = X[:, :j] @ rng.normal(size=j) + 1e-12 * rng.normal(size=n)
        elif kind == 3 and j > 0:  # a repeat of an earlier column, scaled
            X[:, j] = 3.0 * X[:, rng.integers(j)]
    y = rng.normal(size=n)
    beta, inverse, kept = fit_in_order_qr(X, y)
    keep = _kept_column_by_column(X)
    assert np.flatnonzero(kept).tolist() == keep
    assert np.all(beta[~kept] == 0) and np.all(inverse[~kept] == 0)
    if keep:
        expected = np.linalg.lstsq(X[:, keep], y, rcond=None)[0]
        np.testing.assert_allclose(beta[keep], expected, rtol=1e-7, atol=1e-9)


def write_package_data(path: Path) -> None:
    """R's values as float64 arrays ``f2`` .. ``f64`` of a zip-deflated ``.npz`` with fixed
    timestamps (the same bytes on every run)."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        for freq, (values, _) in r_contr_poly().items():
            buffer = io.BytesIO()
            np.lib.format.write_array(buffer, np.ascontiguousarray(values, dtype="<f8"), allow_pickle=False)
            info = zipfile.ZipInfo(f"f{freq}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, buffer.getvalue(), compresslevel=9)


if __name__ == "__main__":
    target = Path(__file__).resolve().parents[1] / "src" / "tscube" / "data" / "contr_poly.npz"
    write_package_data(target)
    print(f"wrote {target} ({target.stat().st_size} bytes)")
    sys.exit(0)
