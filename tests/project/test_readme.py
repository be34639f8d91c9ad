"""The README as a newcomer follows it: its Python runs as written, its config file is real.

Each ```python block runs unchanged in a fresh interpreter in an empty
folder with its own `CARRYALL_HOME` and no API keys. `open_backend()` there
reads the config file, as the README says it does; the test's config file
names an OpenAI-compatible server on loopback that answers with a recorded
OpenAI stream (tests/fixtures/sse/openai_text.sse), so the agent block goes
through the real config reader, transport and session store in seconds,
not at the pace of a model on a shared machine (the local backend's
end-to-end runs are tests/local/test_e2e.py).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from carryall.config import BackendSettings, Config, RedactSettings, load_config
from carryall.sessions import Store
from tests.support.local import local_env
from tests.support.scripted import Reply, served

README = Path(__file__).resolve().parents[2] / "README.md"
_BLOCK = re.compile(r"^```(\w+)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def _blocks(language: str) -> list[str]:
    return [body for lang, body in _BLOCK.findall(README.read_text()) if lang == language]


PYTHON = _blocks("python")


def test_the_readme_has_the_tour_blocks() -> None:
    assert len(PYTHON) >= 2
    assert any("open_backend()" in block for block in PYTHON)


@pytest.mark.parametrize("number", range(len(PYTHON)))
def test_every_python_block_runs_as_written(number: int, tmp_path: Path) -> None:
    block = PYTHON[number]
    script = tmp_path / f"block{number}.py"
    script.write_text(block)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    env = {**local_env(tmp_path), "CARRYALL_HOME": str(home)}
    with served([Reply(sse="openai_text.sse")]) as server:
        (home / "config.toml").write_text(
            f'backend = "openai"\n[backends.openai]\nbase_url = "{server.url}/v1"\n'
            'model = "gpt-4.1-mini"\n'
        )
        done = subprocess.run(
            [sys.executable, str(script)],
            cwd=workspace,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode == 0, f"README block {number}:\n{block}\n{done.stderr[-3000:]}"
    if "Store().create" in block:
        # What the tour promises beyond not failing: the turn went out and was recorded.
        [request] = server.requests
        assert request["body"]["messages"][-1]["content"] == "Read notes.txt and summarise it."
        assert [t["function"]["name"] for t in request["body"]["tools"]][-1] == "add"
        [info] = Store(home / "sessions").list()
        recorded = Store(home / "sessions").open(info.meta.id).messages()
        assert recorded[0].text() == "Read notes.txt and summarise it."
        assert recorded[-1].role == "assistant" and recorded[-1].text() in done.stdout
        assert done.stdout.rstrip().startswith(recorded[-1].text())


def test_the_config_file_shown_is_valid_and_names_every_key(tmp_path: Path) -> None:
    [config_block] = [b for b in _blocks("toml") if "[backends." in b]
    path = tmp_path / "config.toml"
    path.write_text(config_block)
    config = load_config(path)
    assert config.backend == "openai" and config.backends["openai"].native_tools is False
    for struct in (Config, BackendSettings, RedactSettings):
        for name in msgspec.structs.fields(struct):
            # A key, or a table of its own (`[redact]`, `[backends.NAME]`).
            key = re.escape(name.encode_name)  # as the file spells it (`mcpServers`)
            shown = rf"^({key} = |\[{key}[.\]])"
            assert re.search(shown, config_block, re.MULTILINE), name.encode_name
