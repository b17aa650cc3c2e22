"""``python -m autotune.worker._load_child REQUEST CACHE_DIR``: compile one exported program in
this fresh process with JAX's persistent compilation cache on in ``CACHE_DIR``, and print the
compile's CPU and wall seconds and whether the cache served it, as one JSON line.

Run twice on one directory by :func:`autotune.measuring.process._load_probe.measure_load`: the first process
compiles and writes the entry, the second loads it, as a later process of a user with the cache on.
This module is an entry point, the top of the import graph (like ``_child``).
"""

from __future__ import annotations

import base64
import json
import sys
import time


def main(argv: list[str]) -> int:
    request_path, cache_dir = argv
    with open(request_path, encoding="utf-8") as f:
        req = json.load(f)
    import jax
    import numpy as np

    from autotune.program import _compat

    _compat.cache_everything_in(cache_dir)
    exported = jax.export.deserialize(bytearray(base64.b64decode(req["program"])))
    in_tree = exported.in_tree

    def flat_call(*leaves):
        a, k = jax.tree_util.tree_unflatten(in_tree, leaves)
        return exported.call(*a, **k)

    options: dict = {"donate_argnums": tuple(req.get("donate") or ())}
    if req.get("compiler_options"):
        options["compiler_options"] = req["compiler_options"]
    structs = [
        jax.ShapeDtypeStruct(tuple(shape), np.dtype(dtype), weak_type=weak) for shape, dtype, weak in req["avals"]
    ]
    lowered = jax.jit(flat_call, **options).lower(*structs)
    counts = _compat.count_cache_events()  # this compile's events only
    cpu, wall = time.process_time(), time.perf_counter()
    lowered.compile()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    print(json.dumps({"compile_cpu_s": cpu, "compile_s": wall, **counts}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
