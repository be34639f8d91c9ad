"""The README's two set-up commands pass on a fresh clone, as a newcomer runs them.

The committed HEAD is cloned into a temporary folder; the README's first
two ```sh blocks (read from the clone's README, not copied here) run there
exactly as written, one after the other, with a fresh `HOME`, no virtual
environment active and no carryall variable set. Both must exit 0, and the
test run the second one makes must report no failed and no errored test.

Two things come from this machine through the environment only, to spare
the network and minutes, never by changing a command: `CARRYALL_CACHE_DIR`
names the local backend's cache already here (the model is found there
instead of fetched again, as `carryall local install` verifies it either
way), `PIP_CACHE_DIR` pip's cache, and `CARRYALL_LOCAL_THREADS` the thread
count the outer run gives its llama-servers (the README's `carryall run`
starts one beside this run's, where llama.cpp's default of a spinning
thread per core made it take minutes). The inner test run is told by
`CARRYALL_IN_CLONE_TEST` that it is one, so it does not clone again.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from carryall import paths

ROOT = Path(__file__).resolve().parents[2]
INSIDE = "CARRYALL_IN_CLONE_TEST"
_SH_BLOCK = re.compile(r"^```sh\n(.*?)^```$", re.MULTILINE | re.DOTALL)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]


def setup_commands(readme: str) -> list[str]:
    """The README's first two ```sh blocks: the install line and the test command."""
    blocks = [block.strip() for block in _SH_BLOCK.findall(readme)]
    if len(blocks) < 2:
        raise AssertionError(f"the README has {len(blocks)} ```sh block(s); the set-up needs two")
    return blocks[:2]


def test_the_readme_gives_the_two_setup_commands_one_line_each() -> None:
    install, test = setup_commands((ROOT / "README.md").read_text())
    assert "\n" not in install and "\n" not in test
    assert "pip install" in install and "pytest" in test


def _fresh_env(home: Path) -> dict[str, str]:
    keep = ("PATH", "LANG", "LC_ALL", "TERM", "TMPDIR", "CI")
    env = {name: os.environ[name] for name in keep if name in os.environ}
    env |= {
        "HOME": str(home),
        "CARRYALL_CACHE_DIR": str(paths.cache_dir()),
        "PIP_CACHE_DIR": os.environ.get("PIP_CACHE_DIR") or str(Path.home() / ".cache" / "pip"),
        INSIDE: "1",
    }
    threads = os.environ.get("CARRYALL_LOCAL_THREADS")
    if threads:
        env["CARRYALL_LOCAL_THREADS"] = threads
    # The venv the outer run uses must not leak in: its bin first on PATH
    # would answer `python3` instead of the machine's.
    venv = os.environ.get("VIRTUAL_ENV")
    if venv:
        env["PATH"] = os.pathsep.join(
            p for p in env["PATH"].split(os.pathsep) if not p.startswith(venv)
        )
    return env


def test_the_readme_setup_passes_on_a_fresh_clone(tmp_path: Path) -> None:
    if os.environ.get(INSIDE):
        pytest.skip("this run is the clone test's own: it does not clone again")
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: there is no committed HEAD to clone")
    clone = tmp_path / "carryall"
    subprocess.run(
        ["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(clone)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    home = tmp_path / "home"
    home.mkdir()
    env = _fresh_env(home)
    install, test = setup_commands((clone / "README.md").read_text())
    for command, limit in ((install, 1800), (test, 1800)):
        done = subprocess.run(
            ["bash", "-c", command],
            cwd=clone,
            env=env,
            capture_output=True,
            text=True,
            timeout=limit,
            stdin=subprocess.DEVNULL,
        )
        tail = (done.stdout + done.stderr)[-4000:]
        assert done.returncode == 0, f"{command!r} exited {done.returncode}:\n{tail}"
    summary = done.stdout.strip().splitlines()[-1]
    assert " passed" in summary, summary
    assert " failed" not in summary and " error" not in summary, summary
