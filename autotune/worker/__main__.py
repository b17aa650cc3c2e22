"""``python -m autotune.worker``: start a worker process (the parent side starts it)."""

import sys

from autotune.worker._child import main

sys.exit(main())
