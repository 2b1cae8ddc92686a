"""The eight-regressor lane kernels of :mod:`tscube.bfast.core.start_lanes_cpu` (the
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
    width = 8
    # flat views from the first start: every index below is >= 0
    lo = S_sums.reshape(-1)[i0 * 64:]
    hi = S_sums.reshape(-1)[(i0 + width) * 64:]
    for a in range(8):
        for b in range(a + 1):
            row = (W_GRAM + a * (a + 1) // 2 + b) * S
            entry = 8 * a + b
            for l in range(nl):
                W[row + l] = hi[l * 64 + entry] - lo[l * 64 + entry]
    for l in range(nl):
        g00 = W[(W_GRAM + 0) * S + l]
        g10 = W[(W_GRAM + 1) * S + l]; g11 = W[(W_GRAM + 2) * S + l]
        g20 = W[(W_GRAM + 3) * S + l]; g21 = W[(W_GRAM + 4) * S + l]; g22 = W[(W_GRAM + 5) * S + l]
        g30 = W[(W_GRAM + 6) * S + l]; g31 = W[(W_GRAM + 7) * S + l]; g32 = W[(W_GRAM + 8) * S + l]; g33 = W[(W_GRAM + 9) * S + l]
        g40 = W[(W_GRAM + 10) * S + l]; g41 = W[(W_GRAM + 11) * S + l]; g42 = W[(W_GRAM + 12) * S + l]; g43 = W[(W_GRAM + 13) * S + l]
        g44 = W[(W_GRAM + 14) * S + l]
        g50 = W[(W_GRAM + 15) * S + l]; g51 = W[(W_GRAM + 16) * S + l]; g52 = W[(W_GRAM + 17) * S + l]; g53 = W[(W_GRAM + 18) * S + l]
        g54 = W[(W_GRAM + 19) * S + l]; g55 = W[(W_GRAM + 20) * S + l]
        g60 = W[(W_GRAM + 21) * S + l]; g61 = W[(W_GRAM + 22) * S + l]; g62 = W[(W_GRAM + 23) * S + l]; g63 = W[(W_GRAM + 24) * S + l]
        g64 = W[(W_GRAM + 25) * S + l]; g65 = W[(W_GRAM + 26) * S + l]; g66 = W[(W_GRAM + 27) * S + l]
        g70 = W[(W_GRAM + 28) * S + l]; g71 = W[(W_GRAM + 29) * S + l]; g72 = W[(W_GRAM + 30) * S + l]; g73 = W[(W_GRAM + 31) * S + l]
        g74 = W[(W_GRAM + 32) * S + l]; g75 = W[(W_GRAM + 33) * S + l]; g76 = W[(W_GRAM + 34) * S + l]; g77 = W[(W_GRAM + 35) * S + l]
        good = True
        s = g00
        good = good and s >= min_pivot * g00 and s > 0.0
        L00 = math.sqrt(s) if s > 0.0 else 1.0
        R0 = 1.0 / L00
        s = g10
        L10 = s * R0
        s = g11
        s -= L10 * L10
        good = good and s >= min_pivot * g11 and s > 0.0
        L11 = math.sqrt(s) if s > 0.0 else 1.0
        R1 = 1.0 / L11
        s = g20
        L20 = s * R0
        s = g21
        s -= L20 * L10
        L21 = s * R1
        s = g22
        s -= L20 * L20; s -= L21 * L21
        good = good and s >= min_pivot * g22 and s > 0.0
        L22 = math.sqrt(s) if s > 0.0 else 1.0
        R2 = 1.0 / L22
        s = g30
        L30 = s * R0
        s = g31
        s -= L30 * L10
        L31 = s * R1
        s = g32
        s -= L30 * L20; s -= L31 * L21
        L32 = s * R2
        s = g33
        s -= L30 * L30; s -= L31 * L31; s -= L32 * L32
        good = good and s >= min_pivot * g33 and s > 0.0
        L33 = math.sqrt(s) if s > 0.0 else 1.0
        R3 = 1.0 / L33
        s = g40
        L40 = s * R0
        s = g41
        s -= L40 * L10
        L41 = s * R1
        s = g42
        s -= L40 * L20; s -= L41 * L21
        L42 = s * R2
        s = g43
        s -= L40 * L30; s -= L41 * L31; s -= L42 * L32
        L43 = s * R3
        s = g44
        s -= L40 * L40; s -= L41 * L41; s -= L42 * L42; s -= L43 * L43
        good = good and s >= min_pivot * g44 and s > 0.0
        L44 = math.sqrt(s) if s > 0.0 else 1.0
        R4 = 1.0 / L44
        s = g50
        L50 = s * R0
        s = g51
        s -= L50 * L10
        L51 = s * R1
        s = g52
        s -= L50 * L20; s -= L51 * L21
        L52 = s * R2
        s = g53
        s -= L50 * L30; s -= L51 * L31; s -= L52 * L32
        L53 = s * R3
        s = g54
        s -= L50 * L40; s -= L51 * L41; s -= L52 * L42; s -= L53 * L43
        L54 = s * R4
        s = g55
        s -= L50 * L50; s -= L51 * L51; s -= L52 * L52; s -= L53 * L53
        s -= L54 * L54
        good = good and s >= min_pivot * g55 and s > 0.0
        L55 = math.sqrt(s) if s > 0.0 else 1.0
        R5 = 1.0 / L55
        s = g60
        L60 = s * R0
        s = g61
        s -= L60 * L10
        L61 = s * R1
        s = g62
        s -= L60 * L20; s -= L61 * L21
        L62 = s * R2
        s = g63
        s -= L60 * L30; s -= L61 * L31; s -= L62 * L32
        L63 = s * R3
        s = g64
        s -= L60 * L40; s -= L61 * L41; s -= L62 * L42; s -= L63 * L43
        L64 = s * R4
        s = g65
        s -= L60 * L50; s -= L61 * L51; s -= L62 * L52; s -= L63 * L53
        s -= L64 * L54
        L65 = s * R5
        s = g66
        s -= L60 * L60; s -= L61 * L61; s -= L62 * L62; s -= L63 * L63
        s -= L64 * L64; s -= L65 * L65
        good = good and s >= min_pivot * g66 and s > 0.0
        L66 = math.sqrt(s) if s > 0.0 else 1.0
        R6 = 1.0 / L66
        s = g70
        L70 = s * R0
        s = g71
        s -= L70 * L10
        L71 = s * R1
        s = g72
        s -= L70 * L20; s -= L71 * L21
        L72 = s * R2
        s = g73
        s -= L70 * L30; s -= L71 * L31; s -= L72 * L32
        L73 = s * R3
        s = g74
        s -= L70 * L40; s -= L71 * L41; s -= L72 * L42; s -= L73 * L43
        L74 = s * R4
        s = g75
        s -= L70 * L50; s -= L71 * L51; s -= L72 * L52; s -= L73 * L53
        s -= L74 * L54
        L75 = s * R5
        s = g76
        s -= L70 * L60; s -= L71 * L61; s -= L72 * L62; s -= L73 * L63
        s -= L74 * L64; s -= L75 * L65
        L76 = s * R6
        s = g77
        s -= L70 * L70; s -= L71 * L71; s -= L72 * L72; s -= L73 * L73
        s -= L74 * L74; s -= L75 * L75; s -= L76 * L76
        good = good and s >= min_pivot * g77 and s > 0.0
        W[W_FULL * S + l] = 1.0 if good else 0.0


@jit(error_model="numpy", allocates=False)
def first_fits_lanes_8(S_sums, U, YY, i0, width, nl, min_pivot, W):
    """The fit of the ``width`` compacted rows from ``i0 + l`` (``l < nl``) from the prefix
    sums, as ``bai_perron_cpu._inverse_from_sums`` and ``_rss_from_sums``: into ``W``'s
    lane ``l`` the inverse Gram (its triangle), the fixed end's sums ``U[i0 + l]``
    (``W_LOW``), the RSS (``W_TOTAL``), and ``W_OK`` = 1.0 where every equilibrated pivot
    of the Gram's Cholesky factor is at least ``min_pivot`` (else 0.0, the rest
    meaningless)."""
    YY_lo = YY[i0:]
    YY_hi = YY[i0 + width:]
    # flat views from the first start: every index below is >= 0
    lo = S_sums.reshape(-1)[i0 * 64:]
    hi = S_sums.reshape(-1)[(i0 + width) * 64:]
    for a in range(8):
        for b in range(a + 1):
            row = (W_GRAM + a * (a + 1) // 2 + b) * S
            entry = 8 * a + b
            for l in range(nl):
                W[row + l] = hi[l * 64 + entry] - lo[l * 64 + entry]
    U_lo = U.reshape(-1)[i0 * 8:]
    U_hi = U.reshape(-1)[(i0 + width) * 8:]
    for a in range(8):
        for l in range(nl):
            W[(W_LOW + a) * S + l] = U_lo[l * 8 + a]
            W[(W_DIFF + a) * S + l] = U_hi[l * 8 + a] - U_lo[l * 8 + a]
    for l in range(nl):
        g00 = W[(W_GRAM + 0) * S + l]
        g10 = W[(W_GRAM + 1) * S + l]; g11 = W[(W_GRAM + 2) * S + l]
        g20 = W[(W_GRAM + 3) * S + l]; g21 = W[(W_GRAM + 4) * S + l]; g22 = W[(W_GRAM + 5) * S + l]
        g30 = W[(W_GRAM + 6) * S + l]; g31 = W[(W_GRAM + 7) * S + l]; g32 = W[(W_GRAM + 8) * S + l]; g33 = W[(W_GRAM + 9) * S + l]
        g40 = W[(W_GRAM + 10) * S + l]; g41 = W[(W_GRAM + 11) * S + l]; g42 = W[(W_GRAM + 12) * S + l]; g43 = W[(W_GRAM + 13) * S + l]
        g44 = W[(W_GRAM + 14) * S + l]
        g50 = W[(W_GRAM + 15) * S + l]; g51 = W[(W_GRAM + 16) * S + l]; g52 = W[(W_GRAM + 17) * S + l]; g53 = W[(W_GRAM + 18) * S + l]
        g54 = W[(W_GRAM + 19) * S + l]; g55 = W[(W_GRAM + 20) * S + l]
        g60 = W[(W_GRAM + 21) * S + l]; g61 = W[(W_GRAM + 22) * S + l]; g62 = W[(W_GRAM + 23) * S + l]; g63 = W[(W_GRAM + 24) * S + l]
        g64 = W[(W_GRAM + 25) * S + l]; g65 = W[(W_GRAM + 26) * S + l]; g66 = W[(W_GRAM + 27) * S + l]
        g70 = W[(W_GRAM + 28) * S + l]; g71 = W[(W_GRAM + 29) * S + l]; g72 = W[(W_GRAM + 30) * S + l]; g73 = W[(W_GRAM + 31) * S + l]
        g74 = W[(W_GRAM + 32) * S + l]; g75 = W[(W_GRAM + 33) * S + l]; g76 = W[(W_GRAM + 34) * S + l]; g77 = W[(W_GRAM + 35) * S + l]
        good = True
        s = g00
        good = good and s >= min_pivot * g00 and s > 0.0
        L00 = math.sqrt(s) if s > 0.0 else 1.0
        R0 = 1.0 / L00
        s = g10
        L10 = s * R0
        s = g11
        s -= L10 * L10
        good = good and s >= min_pivot * g11 and s > 0.0
        L11 = math.sqrt(s) if s > 0.0 else 1.0
        R1 = 1.0 / L11
        s = g20
        L20 = s * R0
        s = g21
        s -= L20 * L10
        L21 = s * R1
        s = g22
        s -= L20 * L20; s -= L21 * L21
        good = good and s >= min_pivot * g22 and s > 0.0
        L22 = math.sqrt(s) if s > 0.0 else 1.0
        R2 = 1.0 / L22
        s = g30
        L30 = s * R0
        s = g31
        s -= L30 * L10
        L31 = s * R1
        s = g32
        s -= L30 * L20; s -= L31 * L21
        L32 = s * R2
        s = g33
        s -= L30 * L30; s -= L31 * L31; s -= L32 * L32
        good = good and s >= min_pivot * g33 and s > 0.0
        L33 = math.sqrt(s) if s > 0.0 else 1.0
        R3 = 1.0 / L33
        s = g40
        L40 = s * R0
        s = g41
        s -= L40 * L10
        L41 = s * R1
        s = g42
        s -= L40 * L20; s -= L41 * L21
        L42 = s * R2
        s = g43
        s -= L40 * L30; s -= L41 * L31; s -= L42 * L32
        L43 = s * R3
        s = g44
        s -= L40 * L40; s -= L41 * L41; s -= L42 * L42; s -= L43 * L43
        good = good and s >= min_pivot * g44 and s > 0.0
        L44 = math.sqrt(s) if s > 0.0 else 1.0
        R4 = 1.0 / L44
        s = g50
        L50 = s * R0
        s = g51
        s -= L50 * L10
        L51 = s * R1
        s = g52
        s -= L50 * L20; s -= L51 * L21
        L52 = s * R2
        s = g53
        s -= L50 * L30; s -= L51 * L31; s -= L52 * L32
        L53 = s * R3
        s = g54
        s -= L50 * L40; s -= L51 * L41; s -= L52 * L42; s -= L53 * L43
        L54 = s * R4
        s = g55
        s -= L50 * L50; s -= L51 * L51; s -= L52 * L52; s -= L53 * L53
        s -= L54 * L54
        good = good and s >= min_pivot * g55 and s > 0.0
        L55 = math.sqrt(s) if s > 0.0 else 1.0
        R5 = 1.0 / L55
        s = g60
        L60 = s * R0
        s = g61
        s -= L60 * L10
        L61 = s * R1
        s = g62
        s -= L60 * L20; s -= L61 * L21
        L62 = s * R2
        s = g63
        s -= L60 * L30; s -= L61 * L31; s -= L62 * L32
        L63 = s * R3
        s = g64
        s -= L60 * L40; s -= L61 * L41; s -= L62 * L42; s -= L63 * L43
        L64 = s * R4
        s = g65
        s -= L60 * L50; s -= L61 * L51; s -= L62 * L52; s -= L63 * L53
        s -= L64 * L54
        L65 = s * R5
        s = g66
        s -= L60 * L60; s -= L61 * L61; s -= L62 * L62; s -= L63 * L63
        s -= L64 * L64; s -= L65 * L65
        good = good and s >= min_pivot * g66 and s > 0.0
        L66 = math.sqrt(s) if s > 0.0 else 1.0
        R6 = 1.0 / L66
        s = g70
        L70 = s * R0
        s = g71
        s -= L70 * L10
        L71 = s * R1
        s = g72
        s -= L70 * L20; s -= L71 * L21
        L72 = s * R2
        s = g73
        s -= L70 * L30; s -= L71 * L31; s -= L72 * L32
        L73 = s * R3
        s = g74
        s -= L70 * L40; s -= L71 * L41; s -= L72 * L42; s -= L73 * L43
        L74 = s * R4
        s = g75
        s -= L70 * L50; s -= L71 * L51; s -= L72 * L52; s -= L73 * L53
        s -= L74 * L54
        L75 = s * R5
        s = g76
        s -= L70 * L60; s -= L71 * L61; s -= L72 * L62; s -= L73 * L63
        s -= L74 * L64; s -= L75 * L65
        L76 = s * R6
        s = g77
        s -= L70 * L70; s -= L71 * L71; s -= L72 * L72; s -= L73 * L73
        s -= L74 * L74; s -= L75 * L75; s -= L76 * L76
        good = good and s >= min_pivot * g77 and s > 0.0
        L77 = math.sqrt(s) if s > 0.0 else 1.0
        R7 = 1.0 / L77
        V00 = R0
        s = 0.0
        s -= L10 * V00
        V10 = s * R1
        s = 0.0
        s -= L20 * V00; s -= L21 * V10
        V20 = s * R2
        s = 0.0
        s -= L30 * V00; s -= L31 * V10; s -= L32 * V20
        V30 = s * R3
        s = 0.0
        s -= L40 * V00; s -= L41 * V10; s -= L42 * V20; s -= L43 * V30
        V40 = s * R4
        s = 0.0
        s -= L50 * V00; s -= L51 * V10; s -= L52 * V20; s -= L53 * V30
        s -= L54 * V40
        V50 = s * R5
        s = 0.0
        s -= L60 * V00; s -= L61 * V10; s -= L62 * V20; s -= L63 * V30
        s -= L64 * V40; s -= L65 * V50
        V60 = s * R6
        s = 0.0
        s -= L70 * V00; s -= L71 * V10; s -= L72 * V20; s -= L73 * V30
        s -= L74 * V40; s -= L75 * V50; s -= L76 * V60
        V70 = s * R7
        V11 = R1
        s = 0.0
        s -= L21 * V11
        V21 = s * R2
        s = 0.0
        s -= L31 * V11; s -= L32 * V21
        V31 = s * R3
        s = 0.0
        s -= L41 * V11; s -= L42 * V21; s -= L43 * V31
        V41 = s * R4
        s = 0.0
        s -= L51 * V11; s -= L52 * V21; s -= L53 * V31; s -= L54 * V41
        V51 = s * R5
        s = 0.0
        s -= L61 * V11; s -= L62 * V21; s -= L63 * V31; s -= L64 * V41
        s -= L65 * V51
        V61 = s * R6
        s = 0.0
        s -= L71 * V11; s -= L72 * V21; s -= L73 * V31; s -= L74 * V41
        s -= L75 * V51; s -= L76 * V61
        V71 = s * R7
        V22 = R2
        s = 0.0
        s -= L32 * V22
        V32 = s * R3
        s = 0.0
        s -= L42 * V22; s -= L43 * V32
        V42 = s * R4
        s = 0.0
        s -= L52 * V22; s -= L53 * V32; s -= L54 * V42
        V52 = s * R5
        s = 0.0
        s -= L62 * V22; s -= L63 * V32; s -= L64 * V42; s -= L65 * V52
        V62 = s * R6
        s = 0.0
        s -= L72 * V22; s -= L73 * V32; s -= L74 * V42; s -= L75 * V52
        s -= L76 * V62
        V72 = s * R7
        V33 = R3
        s = 0.0
        s -= L43 * V33
        V43 = s * R4
        s = 0.0
        s -= L53 * V33; s -= L54 * V43
        V53 = s * R5
        s = 0.0
        s -= L63 * V33; s -= L64 * V43; s -= L65 * V53
        V63 = s * R6
        s = 0.0
        s -= L73 * V33; s -= L74 * V43; s -= L75 * V53; s -= L76 * V63
        V73 = s * R7
        V44 = R4
        s = 0.0
        s -= L54 * V44
        V54 = s * R5
        s = 0.0
        s -= L64 * V44; s -= L65 * V54
        V64 = s * R6
        s = 0.0
        s -= L74 * V44; s -= L75 * V54; s -= L76 * V64
        V74 = s * R7
        V55 = R5
        s = 0.0
        s -= L65 * V55
        V65 = s * R6
        s = 0.0
        s -= L75 * V55; s -= L76 * V65
        V75 = s * R7
        V66 = R6
        s = 0.0
        s -= L76 * V66
        V76 = s * R7
        V77 = R7
        s = 0.0
        s += V00 * V00; s += V10 * V10; s += V20 * V20; s += V30 * V30
        s += V40 * V40; s += V50 * V50; s += V60 * V60; s += V70 * V70
        P00 = s
        s = 0.0
        s += V11 * V10; s += V21 * V20; s += V31 * V30; s += V41 * V40
        s += V51 * V50; s += V61 * V60; s += V71 * V70
        P10 = s
        s = 0.0
        s += V11 * V11; s += V21 * V21; s += V31 * V31; s += V41 * V41
        s += V51 * V51; s += V61 * V61; s += V71 * V71
        P11 = s
        s = 0.0
        s += V22 * V20; s += V32 * V30; s += V42 * V40; s += V52 * V50
        s += V62 * V60; s += V72 * V70
        P20 = s
        s = 0.0
        s += V22 * V21; s += V32 * V31; s += V42 * V41; s += V52 * V51
        s += V62 * V61; s += V72 * V71
        P21 = s
        s = 0.0
        s += V22 * V22; s += V32 * V32; s += V42 * V42; s += V52 * V52
        s += V62 * V62; s += V72 * V72
        P22 = s
        s = 0.0
        s += V33 * V30; s += V43 * V40; s += V53 * V50; s += V63 * V60
        s += V73 * V70
        P30 = s
        s = 0.0
        s += V33 * V31; s += V43 * V41; s += V53 * V51; s += V63 * V61
        s += V73 * V71
        P31 = s
        s = 0.0
        s += V33 * V32; s += V43 * V42; s += V53 * V52; s += V63 * V62
        s += V73 * V72
        P32 = s
        s = 0.0
        s += V33 * V33; s += V43 * V43; s += V53 * V53; s += V63 * V63
        s += V73 * V73
        P33 = s
        s = 0.0
        s += V44 * V40; s += V54 * V50; s += V64 * V60; s += V74 * V70
        P40 = s
        s = 0.0
        s += V44 * V41; s += V54 * V51; s += V64 * V61; s += V74 * V71
        P41 = s
        s = 0.0
        s += V44 * V42; s += V54 * V52; s += V64 * V62; s += V74 * V72
        P42 = s
        s = 0.0
        s += V44 * V43; s += V54 * V53; s += V64 * V63; s += V74 * V73
        P43 = s
        s = 0.0
        s += V44 * V44; s += V54 * V54; s += V64 * V64; s += V74 * V74
        P44 = s
        s = 0.0
        s += V55 * V50; s += V65 * V60; s += V75 * V70
        P50 = s
        s = 0.0
        s += V55 * V51; s += V65 * V61; s += V75 * V71
        P51 = s
        s = 0.0
        s += V55 * V52; s += V65 * V62; s += V75 * V72
        P52 = s
        s = 0.0
        s += V55 * V53; s += V65 * V63; s += V75 * V73
        P53 = s
        s = 0.0
        s += V55 * V54; s += V65 * V64; s += V75 * V74
        P54 = s
        s = 0.0
        s += V55 * V55; s += V65 * V65; s += V75 * V75
        P55 = s
        s = 0.0
        s += V66 * V60; s += V76 * V70
        P60 = s
        s = 0.0
        s += V66 * V61; s += V76 * V71
        P61 = s
        s = 0.0
        s += V66 * V62; s += V76 * V72
        P62 = s
        s = 0.0
        s += V66 * V63; s += V76 * V73
        P63 = s
        s = 0.0
        s += V66 * V64; s += V76 * V74
        P64 = s
        s = 0.0
        s += V66 * V65; s += V76 * V75
        P65 = s
        s = 0.0
        s += V66 * V66; s += V76 * V76
        P66 = s
        s = 0.0
        s += V77 * V70
        P70 = s
        s = 0.0
        s += V77 * V71
        P71 = s
        s = 0.0
        s += V77 * V72
        P72 = s
        s = 0.0
        s += V77 * V73
        P73 = s
        s = 0.0
        s += V77 * V74
        P74 = s
        s = 0.0
        s += V77 * V75
        P75 = s
        s = 0.0
        s += V77 * V76
        P76 = s
        s = 0.0
        s += V77 * V77
        P77 = s
        W[W_OK * S + l] = 1.0 if good else 0.0
        W[l] = P00
        W[1 * S + l] = P10; W[2 * S + l] = P11
        W[3 * S + l] = P20; W[4 * S + l] = P21; W[5 * S + l] = P22
        W[6 * S + l] = P30; W[7 * S + l] = P31; W[8 * S + l] = P32; W[9 * S + l] = P33
        W[10 * S + l] = P40; W[11 * S + l] = P41; W[12 * S + l] = P42; W[13 * S + l] = P43
        W[14 * S + l] = P44
        W[15 * S + l] = P50; W[16 * S + l] = P51; W[17 * S + l] = P52; W[18 * S + l] = P53
        W[19 * S + l] = P54; W[20 * S + l] = P55
        W[21 * S + l] = P60; W[22 * S + l] = P61; W[23 * S + l] = P62; W[24 * S + l] = P63
        W[25 * S + l] = P64; W[26 * S + l] = P65; W[27 * S + l] = P66
        W[28 * S + l] = P70; W[29 * S + l] = P71; W[30 * S + l] = P72; W[31 * S + l] = P73
        W[32 * S + l] = P74; W[33 * S + l] = P75; W[34 * S + l] = P76; W[35 * S + l] = P77
        u = YY_hi[l] - YY_lo[l]
        d0 = W[(W_DIFF + 0) * S + l]
        d1 = W[(W_DIFF + 1) * S + l]
        d2 = W[(W_DIFF + 2) * S + l]
        d3 = W[(W_DIFF + 3) * S + l]
        d4 = W[(W_DIFF + 4) * S + l]
        d5 = W[(W_DIFF + 5) * S + l]
        d6 = W[(W_DIFF + 6) * S + l]
        d7 = W[(W_DIFF + 7) * S + l]
        s = 0.0
        s += P00 * d0; s += P10 * d1; s += P20 * d2; s += P30 * d3
        s += P40 * d4; s += P50 * d5; s += P60 * d6; s += P70 * d7
        u -= s * d0
        s = 0.0
        s += P10 * d0; s += P11 * d1; s += P21 * d2; s += P31 * d3
        s += P41 * d4; s += P51 * d5; s += P61 * d6; s += P71 * d7
        u -= s * d1
        s = 0.0
        s += P20 * d0; s += P21 * d1; s += P22 * d2; s += P32 * d3
        s += P42 * d4; s += P52 * d5; s += P62 * d6; s += P72 * d7
        u -= s * d2
        s = 0.0
        s += P30 * d0; s += P31 * d1; s += P32 * d2; s += P33 * d3
        s += P43 * d4; s += P53 * d5; s += P63 * d6; s += P73 * d7
        u -= s * d3
        s = 0.0
        s += P40 * d0; s += P41 * d1; s += P42 * d2; s += P43 * d3
        s += P44 * d4; s += P54 * d5; s += P64 * d6; s += P74 * d7
        u -= s * d4
        s = 0.0
        s += P50 * d0; s += P51 * d1; s += P52 * d2; s += P53 * d3
        s += P54 * d4; s += P55 * d5; s += P65 * d6; s += P75 * d7
        u -= s * d5
        s = 0.0
        s += P60 * d0; s += P61 * d1; s += P62 * d2; s += P63 * d3
        s += P64 * d4; s += P65 * d5; s += P66 * d6; s += P76 * d7
        u -= s * d6
        s = 0.0
        s += P70 * d0; s += P71 * d1; s += P72 * d2; s += P73 * d3
        s += P74 * d4; s += P75 * d5; s += P76 * d6; s += P77 * d7
        u -= s * d7
        W[W_TOTAL * S + l] = max(u, 0.0)


@jit(fastmath=CONTRACT, error_model="numpy", allocates=False)
def _products_8(x, W, active_from, j, width):
    """``P x`` and ``1 / f`` = ``1 / (1 + x' P x)`` of row ``x`` (row ``j``) in lanes
    ``l < width`` into ``W``; ``1 / f`` zero in a lane whose first row is after ``j``.
    Fused multiply-adds: these are the recorded steps, which a replay reads back."""
    x0, x1, x2, x3, x4, x5, x6, x7 = x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7]
    for l in range(width):
        p0 = p1 = p2 = p3 = p4 = p5 = p6 = p7 = 0.0
        p0 += W[l] * x0; p1 += W[1 * S + l] * x0; p2 += W[3 * S + l] * x0; p3 += W[6 * S + l] * x0
        p4 += W[10 * S + l] * x0; p5 += W[15 * S + l] * x0; p6 += W[21 * S + l] * x0; p7 += W[28 * S + l] * x0
        p0 += W[1 * S + l] * x1; p1 += W[2 * S + l] * x1; p2 += W[4 * S + l] * x1; p3 += W[7 * S + l] * x1
        p4 += W[11 * S + l] * x1; p5 += W[16 * S + l] * x1; p6 += W[22 * S + l] * x1; p7 += W[29 * S + l] * x1
        p0 += W[3 * S + l] * x2; p1 += W[4 * S + l] * x2; p2 += W[5 * S + l] * x2; p3 += W[8 * S + l] * x2
        p4 += W[12 * S + l] * x2; p5 += W[17 * S + l] * x2; p6 += W[23 * S + l] * x2; p7 += W[30 * S + l] * x2
        p0 += W[6 * S + l] * x3; p1 += W[7 * S + l] * x3; p2 += W[8 * S + l] * x3; p3 += W[9 * S + l] * x3
        p4 += W[13 * S + l] * x3; p5 += W[18 * S + l] * x3; p6 += W[24 * S + l] * x3; p7 += W[31 * S + l] * x3
        p0 += W[10 * S + l] * x4; p1 += W[11 * S + l] * x4; p2 += W[12 * S + l] * x4; p3 += W[13 * S + l] * x4
        p4 += W[14 * S + l] * x4; p5 += W[19 * S + l] * x4; p6 += W[25 * S + l] * x4; p7 += W[32 * S + l] * x4
        p0 += W[15 * S + l] * x5; p1 += W[16 * S + l] * x5; p2 += W[17 * S + l] * x5; p3 += W[18 * S + l] * x5
        p4 += W[19 * S + l] * x5; p5 += W[20 * S + l] * x5; p6 += W[26 * S + l] * x5; p7 += W[33 * S + l] * x5
        p0 += W[21 * S + l] * x6; p1 += W[22 * S + l] * x6; p2 += W[23 * S + l] * x6; p3 += W[24 * S + l] * x6
        p4 += W[25 * S + l] * x6; p5 += W[26 * S + l] * x6; p6 += W[27 * S + l] * x6; p7 += W[34 * S + l] * x6
        p0 += W[28 * S + l] * x7; p1 += W[29 * S + l] * x7; p2 += W[30 * S + l] * x7; p3 += W[31 * S + l] * x7
        p4 += W[32 * S + l] * x7; p5 += W[33 * S + l] * x7; p6 += W[34 * S + l] * x7; p7 += W[35 * S + l] * x7
        f = 1.0
        f += x0 * p0; f += x1 * p1; f += x2 * p2; f += x3 * p3
        f += x4 * p4; f += x5 * p5; f += x6 * p6; f += x7 * p7
        W[(W_PX + 0) * S + l] = p0; W[(W_PX + 1) * S + l] = p1; W[(W_PX + 2) * S + l] = p2; W[(W_PX + 3) * S + l] = p3
        W[(W_PX + 4) * S + l] = p4; W[(W_PX + 5) * S + l] = p5; W[(W_PX + 6) * S + l] = p6; W[(W_PX + 7) * S + l] = p7
        W[W_INV * S + l] = 1.0 / f if j >= active_from[l] else 0.0


@jit(error_model="numpy", allocates=False)
def _residuals_8(u, centred, W, width):
    """Each lane's RSS (``W_TOTAL``) after the row whose sums of X'y are ``u`` and
    centred value ``centred``: its prediction from the sums, ``(P x)' (X'y)``, in
    ``bai_perron_cpu._replay_rows``'s operations (a replay's RSS has the same bits)."""
    u0, u1, u2, u3, u4, u5, u6, u7 = u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7]
    for l in range(width):
        pred = 0.0
        pred += W[(W_PX + 0) * S + l] * (u0 - W[(W_LOW + 0) * S + l])
        pred += W[(W_PX + 1) * S + l] * (u1 - W[(W_LOW + 1) * S + l])
        pred += W[(W_PX + 2) * S + l] * (u2 - W[(W_LOW + 2) * S + l])
        pred += W[(W_PX + 3) * S + l] * (u3 - W[(W_LOW + 3) * S + l])
        pred += W[(W_PX + 4) * S + l] * (u4 - W[(W_LOW + 4) * S + l])
        pred += W[(W_PX + 5) * S + l] * (u5 - W[(W_LOW + 5) * S + l])
        pred += W[(W_PX + 6) * S + l] * (u6 - W[(W_LOW + 6) * S + l])
        pred += W[(W_PX + 7) * S + l] * (u7 - W[(W_LOW + 7) * S + l])
        err = centred - pred
        W[W_TOTAL * S + l] += err * (err * W[W_INV * S + l])


@jit(fastmath=CONTRACT, error_model="numpy", allocates=False)
def _downdate_8(W, width):
    """``P -= (P x)(P x)' / f`` (the triangle) in lanes ``l < width``."""
    for l in range(width):
        inv = W[W_INV * S + l]
        q0 = W[(W_PX + 0) * S + l]; q1 = W[(W_PX + 1) * S + l]; q2 = W[(W_PX + 2) * S + l]; q3 = W[(W_PX + 3) * S + l]
        q4 = W[(W_PX + 4) * S + l]; q5 = W[(W_PX + 5) * S + l]; q6 = W[(W_PX + 6) * S + l]; q7 = W[(W_PX + 7) * S + l]
        g = q0 * inv
        W[l] -= g * q0
        g = q1 * inv
        W[1 * S + l] -= g * q0; W[2 * S + l] -= g * q1
        g = q2 * inv
        W[3 * S + l] -= g * q0; W[4 * S + l] -= g * q1; W[5 * S + l] -= g * q2
        g = q3 * inv
        W[6 * S + l] -= g * q0; W[7 * S + l] -= g * q1; W[8 * S + l] -= g * q2; W[9 * S + l] -= g * q3
        g = q4 * inv
        W[10 * S + l] -= g * q0; W[11 * S + l] -= g * q1; W[12 * S + l] -= g * q2; W[13 * S + l] -= g * q3
        W[14 * S + l] -= g * q4
        g = q5 * inv
        W[15 * S + l] -= g * q0; W[16 * S + l] -= g * q1; W[17 * S + l] -= g * q2; W[18 * S + l] -= g * q3
        W[19 * S + l] -= g * q4; W[20 * S + l] -= g * q5
        g = q6 * inv
        W[21 * S + l] -= g * q0; W[22 * S + l] -= g * q1; W[23 * S + l] -= g * q2; W[24 * S + l] -= g * q3
        W[25 * S + l] -= g * q4; W[26 * S + l] -= g * q5; W[27 * S + l] -= g * q6
        g = q7 * inv
        W[28 * S + l] -= g * q0; W[29 * S + l] -= g * q1; W[30 * S + l] -= g * q2; W[31 * S + l] -= g * q3
        W[32 * S + l] -= g * q4; W[33 * S + l] -= g * q5; W[34 * S + l] -= g * q6; W[35 * S + l] -= g * q7


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
        _downdate_8(W, width)
