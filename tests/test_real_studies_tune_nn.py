"""`autotune tune studies/real_*.py --trials 2` end to end on the studies of flax, optax and equinox
(tests/_real.py: TUNE_NN): every example tuned, no config rejected, trials isolated in the
worker, and the stored entry found by a fresh look-up. Without its library a study skips and
names the package to install.
"""

from _real import TUNE_NN, tune_test

test_cli_tunes_the_study = tune_test(TUNE_NN)
