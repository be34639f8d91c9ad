"""Every example in README.md and docs/ runs as written, or says in its page why not.

The collector finds every fenced ```python, ```sh, ```bash and ```console
block. A Python block runs in a fresh interpreter; a shell block runs in
bash with `-e` and `pipefail`, so every line of it must succeed, with the
venv's `carryall` first on PATH (and `.venv` in the folder pointing at that
venv, so the README's `.venv/bin/carryall` lines run too). Each runs in an
empty folder with its own `CARRYALL_HOME` and no API keys. Its config file
names an OpenAI-compatible server on loopback, the suite's scripted server
answering every request with a recorded OpenAI stream
(tests/fixtures/sse/openai_text.sse), so `open_backend()` and `carryall run`
go through the real config reader, transport and session store in seconds,
not at the pace of a model on a shared machine.

An HTML comment right before a block changes that, and is the only way to:

- `<!-- example: skip because REASON -->`: not run; the reason is the
  page's own and is the skip's reason here;
- `<!-- example: needs the local backend -->`: run on the embedded local
  backend (llama-server with SmolLM2), skipped only when it is not installed.

Any other comment of that form is an error, so a typo never skips a block.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import msgspec
import pytest

from carryall import local
from carryall.config import BackendSettings, Config, RedactSettings, load_config
from carryall.sessions import Store
from tests.support.scripted import Reply, served

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PAGES = (README, *sorted((ROOT / "docs").rglob("*.md")))
README_MAX_LINES = 150

RUNNERS = {"python": "python", "sh": "shell", "bash": "shell", "console": "shell"}
_FENCE = re.compile(r"^```([\w-]*)[^\n]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
# The comment that ends right where the block begins (blank lines allowed), and only that one.
_MARK = re.compile(r"<!--\s*example:\s*((?:(?!-->).)*?)\s*-->\s*\Z", re.DOTALL)
_SKIP = re.compile(r"skip because (\S.*)", re.DOTALL)
NEEDS_LOCAL = "needs the local backend"

# Keys a block must never find: an example runs on the scripted server or not at all.
_KEYS = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY")
_MOVED = ("ANTHROPIC_BASE_URL", "OPENAI_BASE_URL", "CARRYALL_STORE", "AWS_BEARER_TOKEN_BEDROCK")


@dataclass(frozen=True)
class Example:
    page: str
    line: int
    language: str
    body: str
    mark: str | None
    """The `example:` comment right before the block, if there is one."""

    @property
    def runner(self) -> str | None:
        return RUNNERS.get(self.language)

    @property
    def skip_reason(self) -> str | None:
        if self.mark is None or self.mark == NEEDS_LOCAL:
            return None
        found = _SKIP.fullmatch(self.mark)
        return " ".join(found.group(1).split()) if found else None


def fenced_blocks(path: Path) -> Iterator[Example]:
    text = path.read_text(encoding="utf-8")
    for found in _FENCE.finditer(text):
        before = text[: found.start()]
        mark = _MARK.search(before)
        yield Example(
            page=str(path.relative_to(ROOT)),
            line=before.count("\n") + 1,
            language=found.group(1),
            body=found.group(2),
            mark=" ".join(mark.group(1).split()) if mark else None,
        )


ALL_BLOCKS = [block for page in PAGES for block in fenced_blocks(page)]
EXAMPLES = [block for block in ALL_BLOCKS if block.runner is not None]


def test_the_collector_finds_the_pages_and_their_examples() -> None:
    # The collector proves it can see: the README's API example and a page's
    # shell example are among what it found, and a skip's reason is read.
    assert README in PAGES and any(p.parent.name == "guides" for p in PAGES)
    assert any(e.page == "README.md" and "open_backend()" in e.body for e in EXAMPLES)
    assert any(e.runner == "shell" and e.page.startswith("docs/") for e in EXAMPLES)
    sample = (
        "<!-- example: skip because of the first block -->\n```sh\nls\n```\ntext\n"
        "<!-- example: skip because it needs\n a GPU -->\n\n```sh\nnvidia-smi\n```\n"
    )
    first, second = _FENCE.finditer(sample)
    mark = _MARK.search(sample[: second.start()])
    assert mark is not None and mark.group(1) == "skip because it needs\n a GPU"
    assert _MARK.search(sample[: first.start()]) is not None
    assert _MARK.search("<!-- example: skip because x -->\ntext\n") is None
    assert Example("x.md", 1, "sh", "nvidia-smi\n", "skip because it needs a GPU").skip_reason


def test_every_example_comment_is_a_known_one_with_a_reason() -> None:
    for block in ALL_BLOCKS:
        if block.mark is None:
            continue
        where = f"{block.page}:{block.line}"
        assert block.runner is not None, f"{where}: an example comment on a block never run"
        assert block.mark == NEEDS_LOCAL or block.skip_reason, (
            f"{where}: unknown example comment {block.mark!r}; "
            f"use 'skip because REASON' or {NEEDS_LOCAL!r}"
        )


def test_count_of_examples_run_and_skipped(capsys: pytest.CaptureFixture[str]) -> None:
    skipped = [e for e in EXAMPLES if e.skip_reason]
    local_only = [e for e in EXAMPLES if e.mark == NEEDS_LOCAL]
    with capsys.disabled():
        print(
            f"\nexamples: {len(EXAMPLES)} fenced python/shell blocks in {len(PAGES)} pages: "
            f"{len(EXAMPLES) - len(skipped)} run ({len(local_only)} of them on the local "
            f"backend), {len(skipped)} skipped with the reason stated in the page"
        )
    assert len(EXAMPLES) - len(skipped) > len(skipped)


def test_the_readme_is_short() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md is {len(lines)} lines"


def _environment(tmp_path: Path, home: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in (*_KEYS, *_MOVED)}
    bin_dir = str(Path(sys.executable).parent)
    env.update(
        CARRYALL_HOME=str(home),
        NO_COLOR="1",
        PATH=os.pathsep.join([bin_dir, env.get("PATH", "")]),
        TERM="dumb",
        COLUMNS="100",
    )
    return env


def _local_ready() -> bool:
    return local.status().ready


# Each example is a fresh interpreter, and some start the local model: slow as a whole.
@pytest.mark.slow
@pytest.mark.parametrize(
    "example", EXAMPLES, ids=[f"{e.page}:{e.line}:{e.language}" for e in EXAMPLES]
)
def test_example_runs_as_written(example: Example, tmp_path: Path) -> None:
    if example.skip_reason:
        pytest.skip(f"{example.page}:{example.line}: {example.skip_reason}")
    on_local = example.mark == NEEDS_LOCAL
    if on_local and not _local_ready():
        pytest.skip("the local backend is not installed (`carryall local install`)")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    # The README's lines name `.venv/bin/...` as a clone has it.
    (workspace / ".venv").symlink_to(sys.prefix, target_is_directory=True)
    env = _environment(tmp_path, home)
    if example.runner == "python":
        script = tmp_path / "example.py"
        command = [sys.executable, str(script)]
    else:
        script = tmp_path / "example.sh"
        command = ["bash", "-e", "-o", "pipefail", str(script)]
    script.write_text(example.body, encoding="utf-8")
    with served([Reply(sse="openai_text.sse") for _ in range(32)]) as server:
        if not on_local:
            (home / "config.toml").write_text(
                f'backend = "openai"\n[backends.openai]\nbase_url = "{server.url}/v1"\n'
                'model = "gpt-4.1-mini"\n'
            )
        done = subprocess.run(
            command,
            cwd=workspace,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=600 if on_local else 180,
            check=False,
        )
    where = f"{example.page}:{example.line}"
    assert done.returncode == 0, (
        f"{where} failed ({done.returncode}):\n{example.body}\n"
        f"stdout:\n{done.stdout[-2000:]}\nstderr:\n{done.stderr[-3000:]}"
    )
    if "agent.send(" in example.body and "Store().create" in example.body:
        # What the API example promises beyond not failing: the turn went out and was recorded.
        [request] = server.requests
        prompt = request["body"]["messages"][-1]["content"]
        assert prompt in example.body
        assert [t["function"]["name"] for t in request["body"]["tools"]][-1] == "add"
        [info] = Store(home / "sessions").list()
        recorded = Store(home / "sessions").open(info.meta.id).messages()
        assert recorded[0].text() == prompt
        assert recorded[-1].role == "assistant" and recorded[-1].text() in done.stdout


def test_the_config_file_shown_is_valid_and_names_every_key(tmp_path: Path) -> None:
    tomls = [b.body for b in ALL_BLOCKS if b.language == "toml" and "[backends." in b.body]
    [config_block] = [b for b in tomls if "[redact]" in b]  # the whole file, in getting-started
    path = tmp_path / "config.toml"
    path.write_text(config_block)
    config = load_config(path)
    assert config.backend == "openai" and config.backends["openai"].native_tools is False
    for struct in (Config, BackendSettings, RedactSettings):
        for name in msgspec.structs.fields(struct):
            # A key, or a table of its own (`[redact]`, `[backends.NAME]`,
            # `[backends.NAME.options]`).
            key = re.escape(name.encode_name)  # as the file spells it (`mcpServers`)
            shown = rf"^({key} = |\[{key}[.\]]|\[backends\.[^\]]+\.{key}\])"
            assert re.search(shown, config_block, re.MULTILINE), name.encode_name


def test_every_config_file_shown_loads(tmp_path: Path) -> None:
    for block in ALL_BLOCKS:
        if block.language == "toml":
            path = tmp_path / "config.toml"
            path.write_text(block.body)
            load_config(path)  # raises, naming the key, on a file the reader refuses
