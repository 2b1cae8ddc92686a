"""What every BFAST method shares and no method owns: the inputs' checks and missing
values (:mod:`.inputs`), the season-trend design of R's ``bfastpp`` (:mod:`.design`),
least squares with R's aliasing rules (:mod:`.ols`, numba kernels in :mod:`.ols_cpu`),
the Bai–Perron segment-RSS triangle and dynamic programme (:mod:`.bai_perron`, numba
kernels in :mod:`.bai_perron_cpu`; R's segment-size and pre-test rules, :mod:`.rules`) and the pixel-block reader of the per-pixel cpu
kernels (:mod:`.series_cpu`). Imports nothing of ``monitor``, ``lite``, ``classic`` or ``nrt``."""
