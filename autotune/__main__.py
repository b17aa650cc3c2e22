"""``python -m autotune``: the ``autotune`` command."""

import sys

from autotune.cli import main

if __name__ == "__main__":
    sys.exit(main())
