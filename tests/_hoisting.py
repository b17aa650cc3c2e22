"""A program whose constants jax.jit passes as arguments (jax >= 0.12) and jax.export embeds:
the study file, the variable that turns hoisting on for jax 0.10 too, and a Python child to run it in."""

import os
import subprocess
import sys

# A study whose loop body closes over a 2 KB table, above jax_embedded_constants_max_bytes.
TABLE_STUDY = """
import jax.numpy as jnp, numpy as np
import autotune as at

TABLE = np.linspace(0.0, 1.0, 512, dtype=np.float32)

@at.autotuned
def with_table(x):
    body = lambda c, t: (c * 0.5 + jnp.sin(t * TABLE).sum(), None)
    return at.loop(body, x, np.arange(4.0, dtype=np.float32), name="l")[0]

def examples():
    return [(with_table, (jnp.ones(3),))]
"""
HOISTING = {"JAX_USE_SIMPLIFIED_JAXPR_CONSTANTS": "1"}  # jax >= 0.12's default; jax 0.10 reads it at import
# Every constant embedded, on any line: a documented limit (the flag above is marked temporary).
EMBEDDING = {"JAX_EMBEDDED_CONSTANTS_MAX_BYTES": str(1 << 30)}


def run_python(code: str, *args: str, env: dict[str, str]) -> str:
    """Run ``code`` in a fresh Python with ``env`` added; its stdout (it must exit 0)."""
    full = {**os.environ, **env}
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=full, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout
