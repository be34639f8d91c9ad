"""Fixtures shared by the tests: a fresh carryall home, a real PostgreSQL server, every store."""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.environment import foreign
from tests.support.peers import peer_missing
from tests.support.postgres_server import Server, binaries

_databases = itertools.count()

# One thread for each llama-server the run starts, in this process or in a
# `carryall` child (which inherits the variable): with a server per worker,
# and the fresh-clone test's own run beside, llama.cpp's spinning threads
# outnumber the cores, and a 128-token answer took 60 s instead of 4.
# A developer's own value wins.
os.environ.setdefault("CARRYALL_LOCAL_THREADS", "1")


# The longest files first: the fresh-clone test runs the whole suite a
# second time inside a clone, so started first it overlaps the rest instead
# of running alone at the end. Then the files measured longest (their
# real-model rounds), then the other files with a real server, then the
# quick ones, so that what is left at the end is short and the workers
# finish together; each file's tests stay in their own order. pyproject's
# `--dist worksteal` starts each worker on a run of this order and lets an
# idle one take over what another has not started.
_FIRST = "tests/project/test_fresh_clone.py"
_LONGEST = (
    "tests/project/test_examples.py",
    "tests/local/test_e2e.py",
    "tests/providers/test_real_server.py",
    "tests/local/test_structured.py",
    "tests/providers/test_responses_real_server.py",
    "tests/sessions/test_redact_everywhere.py",
    "tests/sessions/test_postgres.py",
    "tests/sessions/test_conformance.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Order the files longest first, keeping each file's tests in their order."""

    def rank(item: pytest.Item) -> tuple[int, int]:
        path = item.nodeid.split("::", 1)[0]
        if path == _FIRST:
            return (0, 0)
        if path in _LONGEST:
            return (1, _LONGEST.index(path))
        return (2, 0) if path in slow_files else (3, 0)

    slow_files = {i.nodeid.split("::", 1)[0] for i in items if i.get_closest_marker("slow")}
    items.sort(key=rank)


@pytest.fixture(autouse=True)
def _no_inherited_width(monkeypatch: pytest.MonkeyPatch) -> None:
    """No `COLUMNS`/`LINES` from the runner: an xdist worker has them set to 80x24.

    A test that wants a width says so; one that wants none must see none,
    however the suite is run.
    """
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh, empty `$CARRYALL_HOME` folder (`tmp_path / "home"`); nothing else from the shell.

    Every other `CARRYALL_*` variable (a developer's `CARRYALL_STORE` above
    all, which would send the test's sessions into their own store) and
    every provider key variable is cleared, so a test sees what a new
    user would. A test that wants one sets it after this.
    """
    for name in list(os.environ):
        if foreign(name):
            monkeypatch.delenv(name)
    path = tmp_path / "home"
    path.mkdir()
    monkeypatch.setenv("CARRYALL_HOME", str(path))
    return path


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Server]:
    """One PostgreSQL server for the whole run, from the machine's packages, stopped at the end."""
    bin_dir = binaries()
    if bin_dir is None:
        peer_missing(
            "no PostgreSQL server binaries (initdb) on this machine",
            "apt-get install postgresql",
        )
    pytest.importorskip("psycopg", reason="the PostgreSQL store needs carryall[postgres]")
    server = Server(bin_dir)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def postgres_url(postgres_server: Server) -> str:
    """A fresh, empty database on the test server (its URL)."""
    return postgres_server.create_database(f"t{next(_databases)}")


@pytest.fixture
def shared_postgres(postgres_server: Server) -> str:
    """The server's one reused database, emptied of carryall's tables: cheaper than a new one."""
    import psycopg

    url = postgres_server.url("conformance")
    try:
        conn = psycopg.connect(url, autocommit=True)
    except psycopg.OperationalError:
        postgres_server.create_database("conformance")
        conn = psycopg.connect(url, autocommit=True)
    with conn:
        tables = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' "
            "AND tablename LIKE 'carryall%'"
        ).fetchall()
        if tables:
            names = ", ".join(f'"{t[0]}"' for t in tables)
            conn.execute(f"DROP TABLE {names} CASCADE")  # type: ignore[arg-type]
    return url


@pytest.fixture(params=["jsonl", "postgres"])
def store_location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty store's location, once for every kind of store: a folder, a postgresql:// URL."""
    if request.param == "jsonl":
        return str(tmp_path / "sessions")
    url: str = request.getfixturevalue("shared_postgres")
    return url


@pytest.fixture
def open_any(store_location: str) -> Callable[[], object]:
    """Open (again) the store at `store_location`, as `carryall.sessions.open_store` does."""
    from carryall.sessions import open_store

    return lambda: open_store(store_location)


@pytest.fixture
def recording_proxy() -> Iterator[tuple[str, list[bytes]]]:
    """A loopback proxy in front of the shared local server: what the loop really sent."""
    from tests.support import local

    with local.recording_proxy() as proxy:
        yield proxy
