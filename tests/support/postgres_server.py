"""A real PostgreSQL server for the tests: initdb into a temporary folder, started, stopped.

Built from the machine's own binaries (`/usr/lib/postgresql/*/bin`, Debian's
`postgresql` package, which `.ci/run` installs), listening on 127.0.0.1 at a
free port and on a Unix socket in the same folder. PostgreSQL refuses to
run as root, so as root every server command runs as the `postgres` user.

`fsync=off`: the faults these tests make are processes killed (the server,
a writer), which the kernel's page cache survives, so what a commit has
handed to the kernel is what a restart reads back; syncing would only slow
a shared 2-core machine. `benchmarks/sessions.py` runs its own server with
`fsync=on`, as the JSONL store syncs.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path


def binaries() -> Path | None:
    """The newest PostgreSQL server's bin folder on this machine, if any."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: (
            int(Path(p).parent.parent.name) if Path(p).parent.parent.name.isdigit() else 0
        ),
    )
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).resolve().parent if initdb else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Server:
    """One PostgreSQL cluster in a temporary folder, under the tests' control."""

    def __init__(self, bin_dir: Path, *, fsync: bool = False) -> None:
        self.bin = bin_dir
        self.fsync = fsync
        self.folder = Path(tempfile.mkdtemp(prefix="carryall-pg-"))
        self.data = self.folder / "data"
        self.port = _free_port()
        self.root = os.geteuid() == 0
        if self.root:
            shutil.chown(self.folder, "postgres", "postgres")
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "carryall",
                  "-E", "UTF8", "--locale=C", "--no-sync")  # fmt: skip
        self.start()

    def url(self, database: str = "postgres") -> str:
        """A connection URL for one database of this server."""
        return f"postgresql://carryall@127.0.0.1:{self.port}/{database}"

    def _run(self, tool: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        command = [str(self.bin / tool), *args]
        if self.root:
            command = ["runuser", "-u", "postgres", "--", *command]
        return subprocess.run(
            command, capture_output=True, text=True, check=check, timeout=120, cwd=self.folder
        )

    def start(self) -> None:
        """Start the server (after `kill`, it recovers from its WAL first) and wait for it."""
        options = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 "
            f"-c unix_socket_directories={self.folder} -c fsync={'on' if self.fsync else 'off'} "
            "-c max_connections=60 -c shared_buffers=32MB"
        )
        log = self.folder / "server.log"
        result = self._run(
            "pg_ctl", "-D", str(self.data), "-l", str(log), "-w", "-t", "60", "-o", options,
            "start", check=False,
        )  # fmt: skip
        if result.returncode != 0:
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"PostgreSQL did not start: {result.stderr}\n{tail}")

    def pid(self) -> int:
        """The postmaster's process id."""
        return int((self.data / "postmaster.pid").read_text().split()[0])

    def kill(self) -> None:
        """SIGKILL the postmaster and every backend of it, as a crash would end them."""
        main = self.pid()
        children = list(_children(main))
        os.kill(main, signal.SIGKILL)
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and any(_alive(p) for p in [main, *children]):
            time.sleep(0.05)
        # A killed postmaster may stay a zombie (its parent is whatever adopted
        # it), which would make its lock file look held: it is dead, so drop it.
        for lock in [self.data / "postmaster.pid", *self.folder.glob(".s.PGSQL.*.lock")]:
            with contextlib.suppress(FileNotFoundError):
                lock.unlink()

    def create_database(self, name: str) -> str:
        """A new, empty database; returns its URL."""
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')  # type: ignore[arg-type]
        return self.url(name)

    def stop(self) -> None:
        """Stop the server at once and remove its folder."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "stop", check=False)
        shutil.rmtree(self.folder, ignore_errors=True)


def _children(parent: int) -> Iterator[int]:
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            fields = Path(stat).read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == parent:
            yield int(Path(stat).parent.name)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
