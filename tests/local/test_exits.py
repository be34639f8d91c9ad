"""A `carryall run` killed mid-request leaves no llama-server behind: real processes only.

Each test starts a real `carryall run` on the local backend, waits until its
llama-server is busy with the request (its `/slots` says a slot is
processing), sends the signal and then looks for the server process. SIGTERM,
SIGHUP and SIGINT go through carryall's own unwinding (the server is closed
on the way out); SIGKILL leaves Python no say, and the kernel's parent-death
signal ends the server instead. Each installed server runs it (the wheel's
runner names itself `llama-server` too). Skipped when the local backend is
not installed, or off Linux, where `/proc` is how the processes are found.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from carryall import local
from tests.support.local import local_env

_STATUS = local.status()
# The installs there are to test: the wheel's runner and the compiled build.
_KINDS = [
    kind
    for kind, there in (("wheel", _STATUS.wheel_installed), ("build", _STATUS.build_installed))
    if there
]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not _STATUS.ready, reason="the local backend is not installed"),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="processes read from /proc"),
    pytest.mark.timeout(300),
]


def _children_named(parent: int, name: str) -> list[int]:
    """Live processes called `name` whose parent is `parent`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # The command name is in parentheses and may hold spaces; the rest follows it.
        command = stat[stat.index("(") + 1 : stat.rindex(")")]
        state, ppid = stat[stat.rindex(")") + 2 :].split()[:2]
        if command == name and int(ppid) == parent and state != "Z":
            found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    """The process exists and is not a zombie waiting for a parent to reap it."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2 :].split()[0] != "Z"


def _port_of(pid: int) -> int:
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    return int(argv[argv.index(b"--port") + 1])


def _busy(port: int) -> bool:
    """The server's one slot is working on a request."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/slots", timeout=2) as answer:
            slots = json.load(answer)
    except OSError:
        return False
    return any(slot.get("is_processing") for slot in slots)


@pytest.mark.parametrize("kind", _KINDS)
@pytest.mark.parametrize(
    ("signum", "code"),
    [
        (signal.SIGTERM, 128 + signal.SIGTERM),
        (signal.SIGHUP, 128 + signal.SIGHUP),
        (signal.SIGINT, 130),
        (signal.SIGKILL, -signal.SIGKILL),
    ],
    ids=["SIGTERM", "SIGHUP", "SIGINT", "SIGKILL"],
)
def test_signal_mid_request_leaves_no_llama_server(
    tmp_path: Path, signum: signal.Signals, code: int, kind: str
) -> None:
    env = {**local_env(tmp_path), "CARRYALL_LOCAL_SERVER": kind}
    run = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "carryall",
            "run",
            "Write a very long story about a lighthouse keeper, chapter by chapter.",
            "--backend",
            "local",
            "--tools",
            "none",
            "--max-tokens",
            "4000",
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
    )
    servers: list[int] = []
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and run.poll() is None:
            servers = _children_named(run.pid, "llama-server")
            if servers and _busy(_port_of(servers[0])):
                break
            time.sleep(0.2)
        else:
            pytest.fail(f"no busy llama-server under carryall run (exit {run.poll()})")
        [server] = servers
        run.send_signal(signum)
        _, stderr = run.communicate(timeout=60)
        assert run.returncode == code, stderr.decode(errors="replace")
        assert "Traceback" not in stderr.decode(errors="replace")
        deadline = time.monotonic() + 15
        while _alive(server) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(server), f"llama-server {server} outlived carryall run ({signum.name})"
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        # A failing run must not leave its own orphan for the next test to trip over.
        for pid in servers:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
