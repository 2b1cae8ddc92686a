"""Writes ``src/tscube/bfast/core/start_lanes_8_cpu.py``: the eight-regressor lane
kernels of :mod:`tscube.bfast.core.start_lanes_cpu`, written out.

numba's LLVM vectorises loops, not straight-line code (its SLP vectorizer is off), and
only a loop whose every per-lane value sits at a constant distance from the others:
so each kernel is one loop over the lanes whose body is the whole computation for one
lane, every loop over the eight regressors unrolled here, every intermediate a local.
Each line repeats the operation order of the one-start code in
:mod:`tscube.bfast.core.bai_perron_cpu` (``_cholesky_of_sums``, ``_inverse_from_sums``,
``_rss_from_sums``, ``_update``), except that the set-up multiplies by each pivot's
reciprocal where that code divides by the pivot (the bits differ by rounding); the updates keep
``(X'X)^{-1}`` symmetric (one triangle) and fuse the multiply-adds of the products that
the memo records (a fifth faster), so there the bits differ by rounding. What a replay
recomputes (each row's prediction and RSS) keeps the replay's operations.

    python tools/write_start_lanes.py            # rewrite the module
    python tools/write_start_lanes.py --check    # exit 1 if it is not what this writes
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

TARGET = Path(__file__).resolve().parents[1] / "src/tscube/bfast/core/start_lanes_8_cpu.py"
K = 8
I1, I2 = " " * 8, " " * 12


def tri(a: int, b: int) -> int:
    """Row of entry (a, b) of a symmetric matrix in ``W`` (its lower triangle)."""
    a, b = max(a, b), min(a, b)
    return a * (a + 1) // 2 + b


def w(row) -> str:
    return f"W[{row} * S + l]" if row != 0 else "W[l]"


def grouped(statements: list[str], indent: str, per_line: int = 4) -> list[str]:
    return [indent + "; ".join(statements[i:i + per_line]) for i in range(0, len(statements), per_line)]


def gram(indent: str) -> list[str]:
    out = []
    for a in range(K):
        out += grouped([f"g{a}{b} = {w(f'(W_GRAM + {tri(a, b)})')}" for b in range(a + 1)], indent)
    return out


def gather(indent: str, u: bool) -> list[str]:
    """Each lane's Gram (and the sums of X'y), from the prefix sums into rows of ``W``:
    one short loop per entry, so that the big loop reads only ``W``."""
    out = [indent + "# flat views from the first start: every index below is >= 0",
           indent + "lo = S_sums.reshape(-1)[i0 * 64:]",
           indent + "hi = S_sums.reshape(-1)[(i0 + width) * 64:]",
           indent + "for a in range(8):",
           indent + "    for b in range(a + 1):",
           indent + "        row = (W_GRAM + a * (a + 1) // 2 + b) * S",
           indent + "        entry = 8 * a + b",
           indent + "        for l in range(nl):",
           indent + "            W[row + l] = hi[l * 64 + entry] - lo[l * 64 + entry]"]
    if u:
        out += [indent + "U_lo = U.reshape(-1)[i0 * 8:]",
                indent + "U_hi = U.reshape(-1)[(i0 + width) * 8:]",
                indent + "for a in range(8):",
                indent + "    for l in range(nl):",
                indent + "        W[(W_LOW + a) * S + l] = U_lo[l * 8 + a]",
                indent + "        W[(W_DIFF + a) * S + l] = U_hi[l * 8 + a] - U_lo[l * 8 + a]"]
    return out


def cholesky(indent: str, whole: bool = True) -> list[str]:
    """The factor ``L{a}{b}`` of ``g{a}{b}`` (without its last pivot unless ``whole``) and
    the reciprocals ``R{a}`` of its pivots; ``good`` False past a small pivot. A column
    is scaled by its pivot's reciprocal: one division a column, not one an entry (each a
    vector division, the set-up's slowest operation; the factor differs from
    ``bai_perron_cpu._cholesky_of_sums``'s by rounding)."""
    out = [indent + "good = True"]
    for a in range(K):
        for b in range(a + 1):
            out.append(indent + f"s = g{a}{b}")
            out += grouped([f"s -= L{a}{m} * L{b}{m}" for m in range(b)], indent)
            if a == b:
                out.append(indent + f"good = good and s >= min_pivot * g{a}{a} and s > 0.0")
                if whole or a < K - 1:
                    out.append(indent + f"L{a}{a} = math.sqrt(s) if s > 0.0 else 1.0")
                    out.append(indent + f"R{a} = 1.0 / L{a}{a}")
            else:
                out.append(indent + f"L{a}{b} = s * R{b}")
    return out


def inverse(indent: str) -> list[str]:
    """``V`` = L^{-1} (lower), then ``P{a}{b}`` (a >= b) = (L^{-T} L^{-1})[a, b]."""
    out = []
    for c in range(K):
        out.append(indent + f"V{c}{c} = R{c}")
        for a in range(c + 1, K):
            out.append(indent + "s = 0.0")
            out += grouped([f"s -= L{a}{m} * V{m}{c}" for m in range(c, a)], indent)
            out.append(indent + f"V{a}{c} = s * R{a}")
    for a in range(K):
        for b in range(a + 1):
            out.append(indent + "s = 0.0")
            out += grouped([f"s += V{m}{a} * V{m}{b}" for m in range(a, K)], indent)
            out.append(indent + f"P{a}{b} = s")
    return out


def P(a: int, b: int) -> str:
    return f"P{max(a, b)}{min(a, b)}"


def module() -> str:
    lines = ['''"""The eight-regressor lane kernels of :mod:`tscube.bfast.core.start_lanes_cpu` (the
default trend and three harmonics), written out by ``tools/write_start_lanes.py``: edit
that script, not this file (``tests/test_bfast_lite.py`` checks that they agree).

Each kernel is one loop over the lanes (segment starts) whose body is one lane's whole
computation, so that the compiler vectorises it across lanes; see the script for why it
is written out and :mod:`tscube.bfast.core.start_lanes_cpu` for the layout of ``W``.
"""

from __future__ import annotations

import math

from ..._jit import CONTRACT, jit
from .start_lanes_cpu import LANES as S
from .start_lanes_cpu import W_DIFF, W_FULL, W_GRAM, W_INV, W_LOW, W_OK, W_PX, W_TOTAL


@jit(error_model="numpy", allocates=False)
def full_rank_lanes_8(S_sums, i0, nl, min_pivot, W):
    """``W[W_FULL, l]`` = 1.0 where the Gram of the 8 compacted rows from ``i0 + l``
    (``l < nl``; the difference of the prefix sums ``S_sums``) has a Cholesky factor whose
    equilibrated pivots are all at least ``min_pivot``, else 0.0 (as
    ``bai_perron_cpu._cholesky_of_sums``)."""
    width = 8''']
    lines += gather(" " * 4, u=False)
    lines.append("    for l in range(nl):")
    lines += gram(I1) + cholesky(I1, whole=False)
    lines.append(I1 + "W[W_FULL * S + l] = 1.0 if good else 0.0")
    lines.append("")
    lines.append('''
@jit(error_model="numpy", allocates=False)
def first_fits_lanes_8(S_sums, U, YY, i0, width, nl, min_pivot, W):
    """The fit of the ``width`` compacted rows from ``i0 + l`` (``l < nl``) from the prefix
    sums, as ``bai_perron_cpu._inverse_from_sums`` and ``_rss_from_sums``: into ``W``'s
    lane ``l`` the inverse Gram (its triangle), the fixed end's sums ``U[i0 + l]``
    (``W_LOW``), the RSS (``W_TOTAL``), and ``W_OK`` = 1.0 where every equilibrated pivot
    of the Gram's Cholesky factor is at least ``min_pivot`` (else 0.0, the rest
    meaningless)."""
    YY_lo = YY[i0:]
    YY_hi = YY[i0 + width:]''')
    lines += gather(" " * 4, u=True)
    lines.append("    for l in range(nl):")
    lines += gram(I1) + cholesky(I1) + inverse(I1)
    lines.append(I1 + "W[W_OK * S + l] = 1.0 if good else 0.0")
    for a in range(K):
        lines += grouped([f"{w(tri(a, b))} = P{a}{b}" for b in range(a + 1)], I1)
    lines.append(I1 + "u = YY_hi[l] - YY_lo[l]")
    for a in range(K):
        lines.append(I1 + f"d{a} = W[(W_DIFF + {a}) * S + l]")
    for a in range(K):
        lines.append(I1 + "s = 0.0")
        lines += grouped([f"s += {P(a, b)} * d{b}" for b in range(K)], I1)
        lines.append(I1 + f"u -= s * d{a}")
    lines.append(I1 + "W[W_TOTAL * S + l] = max(u, 0.0)")
    lines.append("")
    lines.append('''
@jit(fastmath=CONTRACT, error_model="numpy", allocates=False)
def _products_8(x, W, active_from, j, width):
    """``P x`` and ``1 / f`` = ``1 / (1 + x' P x)`` of row ``x`` (row ``j``) in lanes
    ``l < width`` into ``W``; ``1 / f`` zero in a lane whose first row is after ``j``.
    Fused multiply-adds: these are the recorded steps, which a replay reads back."""
    x0, x1, x2, x3, x4, x5, x6, x7 = x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7]
    for l in range(width):''')
    lines.append(I1 + "p0 = p1 = p2 = p3 = p4 = p5 = p6 = p7 = 0.0")
    for b in range(K):
        lines += grouped([f"p{a} += {w(tri(b, a))} * x{b}" for a in range(K)], I1)
    lines.append(I1 + "f = 1.0")
    lines += grouped([f"f += x{a} * p{a}" for a in range(K)], I1)
    lines += grouped([f"W[(W_PX + {a}) * S + l] = p{a}" for a in range(K)], I1)
    lines.append(I1 + "W[W_INV * S + l] = 1.0 / f if j >= active_from[l] else 0.0")
    lines.append('''

@jit(error_model="numpy", allocates=False)
def _residuals_8(u, centred, W, width):
    """Each lane's RSS (``W_TOTAL``) after the row whose sums of X'y are ``u`` and
    centred value ``centred``: its prediction from the sums, ``(P x)' (X'y)``, in
    ``bai_perron_cpu._replay_rows``'s operations (a replay's RSS has the same bits)."""
    u0, u1, u2, u3, u4, u5, u6, u7 = u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7]
    for l in range(width):''')
    lines.append(I1 + "pred = 0.0")
    lines += [I1 + f"pred += W[(W_PX + {a}) * S + l] * (u{a} - W[(W_LOW + {a}) * S + l])" for a in range(K)]
    lines.append(I1 + "err = centred - pred")
    lines.append(I1 + "W[W_TOTAL * S + l] += err * (err * W[W_INV * S + l])")
    lines.append('''

@jit(fastmath=CONTRACT, error_model="numpy", allocates=False)
def _downdate_8(W, width):
    """``P -= (P x)(P x)' / f`` (the triangle) in lanes ``l < width``."""
    for l in range(width):''')
    lines.append(I1 + "inv = W[W_INV * S + l]")
    lines += grouped([f"q{a} = W[(W_PX + {a}) * S + l]" for a in range(K)], I1)
    for a in range(K):
        lines.append(I1 + f"g = q{a} * inv")
        lines += grouped([f"{w(tri(a, b))} -= g * q{b}" for b in range(a + 1)], I1)
    lines.append('''

@jit(error_model="numpy", plain_args=True, allocates=False)  # one version for every caller's constants
def update_lanes_8(X, rows, y, mean, U, W, active_from, nl, first, stop, seg, steps, at, record):
    """Forward Sherman–Morrison updates of lanes ``l < nl`` side by side over the
    compacted rows ``first..stop-1``, as ``bai_perron_cpu._update`` does for one
    start: lane ``l`` (its inverse Gram, fixed end's sums and first RSS in ``W``) takes
    the rows from ``active_from[l]`` on (non-decreasing in ``l``, so the lanes at work are
    always the first ones); ``seg[j - first + 1, l]`` = its RSS after row ``j``. With
    ``record``, its ``P x`` and ``1 / f`` of row ``j`` go to
    ``steps[at[l] + j - active_from[l]]``.

    Every one of the ``S`` lanes of ``W`` and ``active_from`` must hold finite values
    (lanes past ``nl``: zeros, and a first row past ``stop``): the lanes run in whole
    vectors of eight, and a lane before its first row takes its rows with a factor of
    zero, which leaves it as it is (scalar code for the rest of a vector would cost
    more). (The update of ``P`` in the same pass as the next row's ``P x``, which reads
    ``P`` once a row, ran 7 % slower.)"""
    active = 0
    for j in range(first, stop):
        while active < nl and active_from[active] <= j:
            active += 1
        width = min(S, (active + 7) // 8 * 8)
        _products_8(X[rows[j]], W, active_from, j, width)
        _residuals_8(U[j], y[j] - mean, W, width)
        c = j - first + 1
        for l in range(width):
            seg[c, l] = W[W_TOTAL * S + l]
        if record:
            for l in range(active):
                s = at[l] + j - active_from[l]
                for a in range(8):
                    steps[s, a] = W[(W_PX + a) * S + l]
                steps[s, 8] = W[W_INV * S + l]
        _downdate_8(W, width)''')
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check that the module is up to date")
    args = parser.parse_args(argv)
    text = module()
    if args.check:
        if not TARGET.exists() or TARGET.read_text() != text:
            print(f"{TARGET} is not what {Path(__file__).name} writes: run it", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
