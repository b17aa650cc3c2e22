"""A throw-away PostgreSQL server for the scale-out tests (and benchmarks/workers.py).

`PgServer.start()` finds the server binaries (``initdb``, ``pg_ctl``), initialises a
cluster in a temporary folder, starts it on a free port of 127.0.0.1 only (no Unix
socket, trust auth: nothing outside this machine can reach it) and `stop()` shuts
it down and deletes the folder. PostgreSQL refuses to run as root, so under root the
server runs as an unprivileged user (``autotune_pg``, created with ``useradd`` when
missing, else ``nobody``).

Set ``AUTOTUNE_TEST_POSTGRES_URL=postgresql://user@host:port/db`` to use an existing
server instead (each test then creates its own database there).

Everything that can go wrong raises `PgUnavailable` with the precise reason, which the
fixtures turn into a loud ``pytest.skip``.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from contextlib import closing

ENV_URL = "AUTOTUNE_TEST_POSTGRES_URL"
PG_USER = "autotune_pg"  # the OS user that runs the server when we are root
DB_USER = "postgres"  # the database superuser created by initdb


class PgUnavailable(RuntimeError):
    """PostgreSQL cannot be used here; the message says why."""


def find_bin(name: str) -> str | None:
    """The newest ``name`` among /usr/lib/postgresql/*/bin, else on PATH."""
    candidates = sorted(
        glob.glob(f"/usr/lib/postgresql/*/bin/{name}"),
        key=lambda p: [int(x) if x.isdigit() else 0 for x in p.split("/")[4].split(".")],
    )
    if candidates:
        return candidates[-1]
    return shutil.which(name)


def _free_port() -> int:
    with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run_as_user() -> str | None:
    """None when we are not root; else an unprivileged user name to run the server as."""
    if os.geteuid() != 0:
        return None
    for name in (PG_USER,):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            pass
    useradd = shutil.which("useradd")
    if useradd:
        r = subprocess.run(
            [useradd, "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", PG_USER],
            capture_output=True,
            text=True,
        )
        try:
            pwd.getpwnam(PG_USER)
            return PG_USER
        except KeyError:
            why = (r.stderr or r.stdout).strip()
    else:
        why = "useradd not found"
    try:
        pwd.getpwnam("nobody")
        return "nobody"
    except KeyError:
        raise PgUnavailable(
            f"running as root, and no unprivileged user to run PostgreSQL as "
            f"(could not create {PG_USER!r}: {why}; no 'nobody' user)"
        ) from None


def _as_user(user: str | None, cmd: list[str]) -> list[str]:
    if user is None:
        return cmd
    if shutil.which("runuser"):
        return ["runuser", "-u", user, "--", *cmd]
    if shutil.which("setpriv"):
        pw = pwd.getpwnam(user)
        return ["setpriv", f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}", "--clear-groups", *cmd]
    raise PgUnavailable(f"running as root, and neither runuser nor setpriv is available to run PostgreSQL as {user!r}")


def _connect(url: str, dbname: str | None = None):
    try:
        import psycopg
    except ImportError as e:
        raise PgUnavailable(
            f"the PostgreSQL driver psycopg is not installed ({e}); pip install 'psycopg[binary]'"
        ) from None
    from sqlalchemy.engine import make_url

    u = make_url(url)
    return psycopg.connect(
        host=u.host or "127.0.0.1",
        port=u.port or 5432,
        user=u.username,
        password=u.password,
        dbname=dbname or u.database or "postgres",
        autocommit=True,
        connect_timeout=10,
    )


class PgServer:
    """One PostgreSQL cluster (ours, or the one named by $AUTOTUNE_TEST_POSTGRES_URL)."""

    def __init__(self) -> None:
        self.base_url: str | None = None  # postgresql://user@127.0.0.1:port (no database)
        self.root: str | None = None
        self.user: str | None = None
        self.pg_ctl: str | None = None
        self.external = False
        self._admin_db = "postgres"

    # ---------------------------------------------------------------- lifecycle
    def start(self) -> PgServer:
        try:
            import psycopg  # noqa: F401
        except ImportError as e:
            raise PgUnavailable(
                f"the PostgreSQL driver psycopg is not installed ({e}); "
                "pip install 'psycopg[binary]' (the test extra lists it)"
            ) from None
        external = os.environ.get(ENV_URL, "").strip()
        if external:
            self.external = True
            self.base_url = external.rsplit("/", 1)[0] if external.count("/") >= 3 else external
            try:
                _connect(external).close()
            except Exception as e:
                raise PgUnavailable(f"${ENV_URL}={external!r} is not reachable: {type(e).__name__}: {e}") from None
            self._admin_db = make_db_name(external)
            return self
        initdb, pg_ctl = find_bin("initdb"), find_bin("pg_ctl")
        if not initdb or not pg_ctl:
            raise PgUnavailable(
                "PostgreSQL server binaries (initdb, pg_ctl) not found in /usr/lib/postgresql/*/bin "
                "or on PATH; install the 'postgresql' package (.ci/postgres-install does)"
            )
        self.pg_ctl = pg_ctl
        self.user = _run_as_user()
        base = tempfile.gettempdir()
        if self.user is not None and not _traversable_by_all(base):
            base = "/tmp"
        self.root = tempfile.mkdtemp(prefix="autotune-pg-", dir=base)
        data, log = os.path.join(self.root, "data"), os.path.join(self.root, "server.log")
        if self.user is not None:
            pw = pwd.getpwnam(self.user)
            os.chown(self.root, pw.pw_uid, pw.pw_gid)
        r = subprocess.run(
            _as_user(
                self.user, [initdb, "-D", data, "-U", DB_USER, "--auth=trust", "-E", "UTF8", "--no-locale", "--no-sync"]
            ),
            capture_output=True,
            text=True,
            timeout=120,
        )
        if r.returncode != 0:
            self._cleanup()
            raise PgUnavailable(
                f"initdb failed (exit {r.returncode}) as user {self.user or 'current'}: "
                f"{(r.stderr or r.stdout).strip()[-800:]}"
            )
        last = ""
        for _ in range(3):  # a free port can be taken between probing and binding: try another
            port = _free_port()
            opts = (
                f"-c listen_addresses=127.0.0.1 -p {port} -c unix_socket_directories='' "
                "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=100"
            )
            r = subprocess.run(
                _as_user(self.user, [pg_ctl, "-D", data, "-l", log, "-o", opts, "-w", "-t", "60", "start"]),
                capture_output=True,
                text=True,
                timeout=120,
            )
            if r.returncode == 0:
                self.base_url = f"postgresql://{DB_USER}@127.0.0.1:{port}"
                self._admin_db = "postgres"
                return self
            last = (r.stderr or r.stdout).strip() + "\n" + _tail(log)
        self._cleanup()
        raise PgUnavailable(f"pg_ctl start failed 3 times; last output: {last.strip()[-1200:]}")

    def stop(self) -> None:
        if self.external or self.root is None:
            return
        if self.pg_ctl and os.path.isdir(os.path.join(self.root, "data")):
            subprocess.run(
                _as_user(
                    self.user,
                    [self.pg_ctl, "-D", os.path.join(self.root, "data"), "-m", "fast", "-w", "-t", "60", "stop"],
                ),
                capture_output=True,
                timeout=120,
            )
        self._cleanup()

    def _cleanup(self) -> None:
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None

    def __enter__(self) -> PgServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ---------------------------------------------------------------- databases
    def create_database(self, name: str | None = None) -> str:
        """A new empty database; returns its SQLAlchemy URL (plain postgresql:// = psycopg 3)."""
        name = name or f"autotune_{uuid.uuid4().hex[:12]}"
        with closing(_connect(self.base_url + "/" + self._admin_db)) as con:
            con.execute(f'CREATE DATABASE "{name}"')
        return f"{self.base_url}/{name}"

    def drop_database(self, url: str) -> None:
        name = url.rsplit("/", 1)[1]
        with closing(_connect(self.base_url + "/" + self._admin_db)) as con:
            con.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def make_db_name(url: str) -> str:
    return url.rsplit("/", 1)[1] if url.count("/") >= 3 else "postgres"


def _traversable_by_all(path: str) -> bool:
    path = os.path.abspath(path)
    while True:
        if not os.stat(path).st_mode & 0o001:
            return False
        parent = os.path.dirname(path)
        if parent == path:
            return True
        path = parent


def _tail(path: str, n: int = 1500) -> str:
    try:
        with open(path, errors="replace") as f:
            return f.read()[-n:]
    except OSError:
        return ""


# The pytest fixtures `pg_server` and `pg_url` are in tests/conftest.py (every test module gets them).
ENV_REQUIRE = "AUTOTUNE_REQUIRE_POSTGRES"  # "1": fail instead of skip when PostgreSQL is unavailable
