"""`autotune tune studies/real_*.py --trials 3` end to end on the studies of flax, optax and equinox
(tests/_real.py: TUNE_NN): every example tuned, no config rejected, trials isolated in the
worker, and the stored entry found by a fresh look-up. Without its library a study skips and
names the package to install.
"""

from __future__ import annotations

import pytest
from _real import TUNE_NN, cli_tunes_the_study


@pytest.mark.slow
@pytest.mark.parametrize("name", TUNE_NN)
def test_cli_tunes_the_study(name, tmp_path):
    cli_tunes_the_study(name, tmp_path)
