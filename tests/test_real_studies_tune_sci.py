"""`autotune tune studies/real_*.py --trials 2` end to end on the studies of blackjax, numpyro, diffrax and optimistix
(tests/_real.py: TUNE_SCI): every example tuned, no config rejected, trials isolated in the
worker, and the stored entry found by a fresh look-up. Without its library a study skips and
names the package to install.
"""

from _real import TUNE_SCI, tune_test

test_cli_tunes_the_study = tune_test(TUNE_SCI)
