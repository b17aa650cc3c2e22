"""How long `Cache.import_json` holds the cache's write lock, and whether a concurrent `put` gets through.

Writes an export file of N entries (default 100,000), then imports it into a fresh SQLite
cache while two other processes work on the same cache: a *prober* that tries to take the
write lock without waiting (``BEGIN IMMEDIATE``, busy_timeout 0) every 5 ms and records the
longest stretch it could not, and a *writer* that calls `Cache.put` every 0.2 s while the
import runs. Prints the figures as JSON (and a line for people).

    python -m benchmarks.import_time [--entries 100000] [--dir /tmp/bench]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _make_entry(*args):
    """``tests/_entries.make_entry`` (the tests' cache entry), loaded from its file."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_entries", REPO / "tests" / "_entries.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.make_entry(*args)


PROBER = textwrap.dedent("""
    import json, sqlite3, sys, time, os
    path, stop = sys.argv[1], sys.argv[2]
    con = sqlite3.connect(path, isolation_level=None, timeout=0)
    longest, blocked_since, tries, blocked = 0.0, None, 0, 0
    print("ready", flush=True)
    while not os.path.exists(stop):
        tries += 1
        try:
            con.execute("BEGIN IMMEDIATE")
            con.execute("ROLLBACK")
            if blocked_since is not None:
                longest = max(longest, time.monotonic() - blocked_since)
                blocked_since = None
        except sqlite3.OperationalError:
            blocked += 1
            if blocked_since is None:
                blocked_since = time.monotonic()
        time.sleep(0.005)
    if blocked_since is not None:
        longest = max(longest, time.monotonic() - blocked_since)
    print(json.dumps({"longest_lock_s": longest, "tries": tries, "blocked": blocked}), flush=True)
""")

WRITER = textwrap.dedent("""
    import json, os, sys, time
    from autotune.cache import Cache
    from _entries import make_entry  # the tests folder is on PYTHONPATH
    path, start, stop = sys.argv[1], sys.argv[2], sys.argv[4]
    while not os.path.exists(start):
        time.sleep(0.005)
    cache, times, errors, i = Cache(path), [], [], 0
    while not os.path.exists(stop):  # a put every 0.2 s for as long as the import runs
        t0 = time.monotonic()
        try:
            cache.put(make_entry(f"concurrent:put{i}"))
        except Exception as e:
            errors.append(str(e))
        times.append(time.monotonic() - t0)
        i += 1
        time.sleep(0.2)
    print(json.dumps({"puts": len(times), "failed": len(errors), "slowest_put_s": max(times, default=0.0),
                      "errors": errors[:3]}))
""")


def make_export(path: Path, n: int) -> None:
    """An export file of ``n`` entries, the same but for their function keys: one entry written as
    JSON once, its key replaced (the file ``json.dumps`` of the whole document would write)."""
    one = json.dumps({**_make_entry().to_dict(), "function_key": "\0key"})
    head = json.dumps({"format": "jax-autotune-cache", "schema_version": 2, "pending": [], "values": {}})
    entries = ", ".join(one.replace('"\\u0000key"', json.dumps(f"bulk:f{i}")) for i in range(n))
    path.write_text(f'{head[:-1]}, "entries": [{entries}]}}')


def count_entries(db: Path) -> int:
    """The rows of the entries table, counted by SQLite: every imported entry and every
    concurrent put is a row (reading 100,000 rows back as entries would double the run)."""
    import sqlite3

    from autotune.cache._layout import ENTRIES_TABLE

    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
        return con.execute(f"SELECT COUNT(*) FROM {ENTRIES_TABLE}").fetchone()[0]


def run(n: int, folder: Path) -> dict:
    from autotune.cache import Cache

    export, db = folder / "export.json", folder / "cache.db"
    make_export(export, n)
    Cache(db).put(_make_entry("seed:f"))  # the file exists (WAL mode) before the processes start
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tests")]), "JAX_PLATFORMS": "cpu"}
    stop, start = folder / "stop", folder / "start"
    prober = subprocess.Popen([sys.executable, "-c", PROBER, str(db), str(stop)], stdout=subprocess.PIPE, text=True)
    assert prober.stdout.readline().strip() == "ready"
    done = folder / "done"
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(db), str(start), str(REPO / "tests"), str(done)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    time.sleep(3.0)  # the writer has imported autotune
    t0 = time.perf_counter()
    start.touch()
    count = Cache(db).import_json(export)
    total = time.perf_counter() - t0
    done.touch()
    put = json.loads(writer.communicate(timeout=300)[0])
    stop.touch()
    probe = json.loads(prober.communicate(timeout=60)[0])
    entries = count_entries(db)
    return {
        "entries": n,
        "imported": int(count),
        "export_mib": round(export.stat().st_size / 2**20, 1),
        "import_total_s": round(total, 2),
        "longest_lock_s": round(probe["longest_lock_s"], 3),
        "concurrent_put": put,
        "entries_after": entries,
        "max_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--entries", type=int, default=100_000)
    p.add_argument("--dir", default=None, help="work folder (default: a temporary one)")
    a = p.parse_args()
    with tempfile.TemporaryDirectory(dir=a.dir) as tmp:
        r = run(a.entries, Path(tmp))
    print(json.dumps(r, indent=2))
    print(
        f"{r['entries']} entries ({r['export_mib']} MiB): import {r['import_total_s']} s, write lock held at most "
        f"{r['longest_lock_s']} s; {r['concurrent_put']['puts']} concurrent puts, {r['concurrent_put']['failed']} "
        f"failed, the slowest took {r['concurrent_put']['slowest_put_s']:.2f} s"
    )


if __name__ == "__main__":
    main()
