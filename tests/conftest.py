"""Shared test setup: real JAX, on CPU, small shapes."""

import os

# The suite runs on CPU wherever it runs (set before JAX is first imported).
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax.numpy as jnp  # noqa: E402
import pytest  # noqa: E402


@pytest.fixture
def vec():
    """A small float32 vector with distinct, well-scaled entries."""
    return jnp.linspace(-0.5, 0.7, 3, dtype=jnp.float32)
