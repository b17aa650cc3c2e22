"""Export files (autotune/cache/_transfer.py): what `import` refuses before reading, hostile
numbers and nesting, old export files, file modes, and a 100k-entry import beside a writer."""

from __future__ import annotations

import importlib.util
import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_cache import make_entry

from autotune._errors import CacheError, CacheImportError
from autotune.cache import MAX_IMPORT_BYTES, Cache
from autotune.cache._transfer import read_bounded

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
       "JAX_PLATFORMS": "cpu"}


def cli(*args, timeout=120):
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "autotune", *args], env=ENV, capture_output=True, text=True,
                       timeout=timeout)
    return r, time.monotonic() - t0


def an_export(tmp_path: Path, n: int = 2) -> Path:
    cache = Cache(tmp_path / "src.db")
    for i in range(n):
        cache.put(make_entry(f"m:f{i}"))
    cache.export_json(tmp_path / "x.json")
    return tmp_path / "x.json"


def test_the_default_cap_is_256_mib():
    assert MAX_IMPORT_BYTES == 256 * 2**20


def test_a_fifo_is_refused_at_once_not_waited_on(tmp_path):
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    r, took = cli("import", str(fifo), "--cache", str(tmp_path / "c.db"), timeout=60)
    assert r.returncode == 2 and "is a FIFO (named pipe), not a regular file" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "c.db").exists()


@pytest.mark.parametrize("what,words", [("/dev/zero", "is a device"), ("dir", "is a directory")])
def test_devices_and_directories_are_refused(tmp_path, what, words):
    path = tmp_path if what == "dir" else Path(what)
    with pytest.raises(CacheImportError, match=f"{words}, not a regular file.*Nothing was imported"):
        Cache(tmp_path / "c.db").import_json(path)
    assert not (tmp_path / "c.db").exists()


def test_a_huge_sparse_file_is_refused_by_its_size_before_reading(tmp_path):
    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate(2 * 2**30)  # 2 GiB of nothing: no disk, and no memory unless read
    r, took = cli("import", str(big), "--cache", str(tmp_path / "c.db"), timeout=60)
    assert r.returncode == 2 and "is 2147483648 bytes, more than the import limit of 268435456 bytes" in r.stderr
    assert "--max-size" in r.stderr and "Traceback" not in r.stderr
    assert took < 30, took  # refused from its size; reading 2 GiB would take far longer and ~4 GiB of memory


def test_the_size_cap_can_be_raised_or_lowered(tmp_path):
    path = an_export(tmp_path)
    size = path.stat().st_size
    with pytest.raises(CacheImportError, match=rf"is {size} bytes, more than the import limit of {size - 1} bytes"):
        Cache(tmp_path / "c.db").import_json(path, max_bytes=size - 1)
    assert Cache(tmp_path / "c.db").import_json(path, max_bytes=size) == 2
    for bad in (0, -1, 1.5, True):
        with pytest.raises(CacheImportError, match="must be a positive whole number of bytes"):
            read_bounded(path, bad)
    r, _ = cli("import", str(path), "--cache", str(tmp_path / "d.db"), "--max-size", "0.0001")
    assert r.returncode == 2 and "more than the import limit of 104 bytes" in r.stderr, r.stderr
    r, _ = cli("import", str(path), "--cache", str(tmp_path / "d.db"), "--max-size", "1")
    assert r.returncode == 0 and "imported 2 entries and 0 pending records into sqlite:///" in r.stdout, r.stderr


def _doc_with(tmp_path: Path, raw_cost: str) -> Path:
    doc = json.loads(an_export(tmp_path).read_text())
    text = json.dumps(doc).replace('"cost": 0.75', f'"cost": {raw_cost}', 1)
    assert raw_cost in text
    path = tmp_path / "hostile.json"
    path.write_text(text)
    return path


@pytest.mark.parametrize("raw,words", [
    ("9" * 5000, "holds an integer with 5000 digits"),
    ("9" * 400, "holds an integer with 400 digits"),
    ("9" * 400 + ".5", r"Entry 0 .*'cost' must be a finite number"),
    ("-" + "1" * 5000, "holds an integer with 5000 digits"),
])
def test_huge_numbers_are_one_clear_error(tmp_path, raw, words):
    path = _doc_with(tmp_path, raw)
    target = Cache(tmp_path / "t.db")
    with pytest.raises(CacheImportError, match=words) as info:
        target.import_json(path)
    assert "Nothing was imported" in str(info.value) and len(str(info.value)) < 600
    assert target.entries() == []


def test_deeply_nested_json_is_one_clear_error(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text('{"format": "jax-autotune-cache", "schema_version": 2, "entries": ' + "[" * 200_000
                    + "]" * 200_000 + "}")
    with pytest.raises(CacheImportError, match="cannot be read: it is nested too deeply"):
        Cache(tmp_path / "t.db").import_json(path)


def test_an_export_of_schema_version_1_still_imports(tmp_path):
    e = make_entry()
    doc = {"format": "jax-autotune-cache", "schema_version": 1, "entries": [e.to_dict() | {
        k: None for k in ("default_config", "complete_range", "retune")}]}
    for k in ("default_config", "complete_range", "retune"):
        del doc["entries"][0][k]  # as the previous release wrote them
    (tmp_path / "v1.json").write_text(json.dumps(doc))
    target = Cache(tmp_path / "t.db")
    assert target.import_json(tmp_path / "v1.json") == 1 and target.entries() == [e]


def test_an_export_is_private_and_atomic(tmp_path):
    old = os.umask(0)
    try:
        path = an_export(tmp_path)
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".autotune")) == []
    with pytest.raises(CacheError, match=r"export file .*/missing/x.json: its directory does not exist"):
        Cache(tmp_path / "src.db").export_json(tmp_path / "missing" / "x.json")


def _import_bench():
    spec = importlib.util.spec_from_file_location("import_bench", REPO / "scripts" / "import_bench.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_a_100k_entry_import_lets_a_concurrent_writer_through(tmp_path):
    """Validated before the write lock, written in bulk: puts every 0.2 s during the import all succeed."""
    r = _import_bench().run(100_000, tmp_path)
    print(json.dumps(r))  # the lock-hold figure (scripts/import_bench.py prints it too)
    put = r["concurrent_put"]
    assert put["failed"] == 0 and put["puts"] >= 1, put
    assert r["imported"] == 100_000 and r["entries_after"] == 100_000 + 1 + put["puts"], r
