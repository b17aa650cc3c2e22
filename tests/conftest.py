"""Shared test setup: real JAX, on CPU."""

import os

# The suite runs on CPU wherever it runs (set before JAX is first imported).
os.environ.setdefault("JAX_PLATFORMS", "cpu")
