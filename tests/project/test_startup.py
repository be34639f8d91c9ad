"""Start-up in proportion to the command: what `import carryall` and each command load.

Each check runs in a fresh interpreter, so what is pinned is the modules a
user's process really loads, not what an earlier test already imported.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

# What only running an agent, or installing and serving the local backend, needs.
AGENT_AND_BACKENDS = (
    "anthropic",
    "openai",
    "httpx2",
    "asyncio",
    "tarfile",
    "carryall.backends",
    "carryall.transport._sdk",
    "carryall.local.installer",
    "carryall.local.server",
)
COMMAND_LINE = ("typer", "rich", "carryall.cli", "carryall.sessions")
TOOL_LOOP = ("carryall.agent", "carryall.tools", "carryall.providers", "textual")

_LOADED = """
import atexit, json, sys
watched = json.loads(sys.argv[1])
found = lambda: [m for m in watched if m in sys.modules]
atexit.register(lambda: print(json.dumps(found()), file=sys.stderr))
sys.argv = ["carryall", *sys.argv[2:]]
{body}
"""


def loaded(body: str, watched: tuple[str, ...], *argv: str, home: Path) -> list[str]:
    """The modules of `watched` loaded once `body` ran with `argv`, in a fresh interpreter."""
    done = subprocess.run(
        [sys.executable, "-c", _LOADED.format(body=body), json.dumps(watched), *argv],
        capture_output=True,
        text=True,
        env={"CARRYALL_HOME": str(home), "PATH": "/usr/bin:/bin"},
        timeout=60,
        check=False,
    )
    last = done.stderr.strip().splitlines()[-1]
    found: list[str] = json.loads(last)
    return found


def test_import_carryall_loads_no_command_line_agent_or_backend(tmp_path: Path) -> None:
    watched = AGENT_AND_BACKENDS + COMMAND_LINE + TOOL_LOOP
    assert loaded("import carryall", watched, home=tmp_path) == []


@pytest.mark.parametrize(
    "argv",
    [("sessions", "list"), ("recall", "WORD"), ("sessions", "show", "nope"), ("paths",)],
)
def test_session_readers_load_no_agent_backend_or_sdk(
    tmp_path: Path, argv: tuple[str, ...]
) -> None:
    body = "from carryall.cli import main\ntry:\n    main()\nexcept SystemExit:\n    pass"
    watched = AGENT_AND_BACKENDS + TOOL_LOOP
    assert loaded(body, watched, *argv, home=tmp_path) == []


# What a reader of an empty store has no use for: pydantic (typer 0.29 builds a
# pydantic adapter per parameter, about 0.4 s of CPU), rich (only a table, a
# hit or an error prints through it), the HTTP stack behind urllib.request,
# the file lock (writers only), the TOML parser (no config file here), the
# platform folders ($CARRYALL_HOME is set) and the HTML escaper; then what
# loads on first use (`carryall._lazy`): logging (only a failure logs),
# SQLite (an empty store has no index to open), hashlib with OpenSSL's
# library (nothing is hashed) and the credential patterns (no error printed).
READER_NEEDS_NONE_OF = (
    "pydantic",
    "rich",
    "urllib.request",
    "http.client",
    "filelock",
    "tomllib",
    "platformdirs",
    "html",
    "importlib.metadata",
    "logging",
    "sqlite3",
    "hashlib",
    "_hashlib",
    "carryall._secrets",
)


@pytest.mark.parametrize("argv", [("sessions", "list"), ("recall", "WORD")])
def test_empty_store_readers_load_no_pydantic_rich_or_http_stack(
    tmp_path: Path, argv: tuple[str, ...]
) -> None:
    body = "from carryall.cli import main\ntry:\n    main()\nexcept SystemExit:\n    pass"
    assert loaded(body, READER_NEEDS_NONE_OF, *argv, home=tmp_path) == []


def test_the_reader_watch_sees_each_module_it_names(tmp_path: Path) -> None:
    # A misspelt name would never be found and would pin nothing: importing
    # every watched module must make the same watch see every one.
    body = "import importlib\n" + "\n".join(
        f"importlib.import_module({name!r})" for name in READER_NEEDS_NONE_OF
    )
    assert loaded(body, READER_NEEDS_NONE_OF, home=tmp_path) == list(READER_NEEDS_NONE_OF)


_DECODERS = """
import gc, json, sys, typing
sys.argv = ["carryall", *sys.argv[1:]]
from carryall.cli import main
try:
    main()
except SystemExit:
    pass
import msgspec
decoders = [o for o in gc.get_objects() if type(o) is msgspec.json.Decoder]
typed = sorted(repr(d.type) for d in decoders if d.type is not typing.Any)
print(json.dumps(typed), file=sys.stderr)
"""


def typed_decoders(*argv: str, home: Path) -> list[str]:
    """The types of the typed msgspec JSON decoders alive once `argv` ran, in a fresh process."""
    done = subprocess.run(
        [sys.executable, "-c", _DECODERS, *argv],
        capture_output=True,
        text=True,
        env={"CARRYALL_HOME": str(home), "PATH": "/usr/bin:/bin"},
        timeout=60,
        check=False,
    )
    found: list[str] = json.loads(done.stderr.strip().splitlines()[-1])
    return found


@pytest.mark.parametrize("argv", [("sessions", "list"), ("recall", "WORD")])
def test_empty_store_readers_build_no_typed_decoder(tmp_path: Path, argv: tuple[str, ...]) -> None:
    # A typed decoder reads every type it decodes into when it is built;
    # the transcript's are built on their first decode (`_lazy.lazy_decoder`).
    assert typed_decoders(*argv, home=tmp_path) == []


def test_the_decoder_watch_sees_the_decoders_a_listing_uses(tmp_path: Path) -> None:
    # With one session to list, its header is decoded: the same watch must
    # see that decoder, or it would pin nothing.
    from carryall.sessions import Store

    Store(tmp_path / "sessions").create(backend="anthropic", model="m", cwd=".")
    found = typed_decoders("sessions", "list", home=tmp_path)
    assert any("SessionMeta" in kind for kind in found), found


def test_a_command_line_builds_only_the_command_it_names() -> None:
    import typer.main

    from carryall.cli import AREAS, build_app, narrow

    def commands(argv: list[str]) -> dict[str, list[str]]:
        group = typer.main.get_command(narrow(build_app(AREAS), argv))
        out = {}
        for name, command in group.commands.items():  # type: ignore[attr-defined]
            out[name] = sorted(getattr(command, "commands", {}))
        return out

    assert commands(["sessions", "list", "--json"]) == {"sessions": ["list"]}
    assert commands(["recall", "WORD"]) == {"recall": []}
    # A name that matches nothing at its level keeps that level whole, so
    # the usage error and its "did you mean" see every command.
    everything = commands([])
    assert commands(["sessions", "lst"])["sessions"] == everything["sessions"]
    assert commands(["--version"]) == everything
    assert commands(["sessions", "--help"]) == {"sessions": everything["sessions"]}


def test_help_loads_no_backend_or_sdk(tmp_path: Path) -> None:
    body = "from carryall.cli import main\ntry:\n    main()\nexcept SystemExit:\n    pass"
    assert loaded(body, AGENT_AND_BACKENDS, "--help", home=tmp_path) == []


def test_the_watch_sees_what_run_loads(tmp_path: Path) -> None:
    # The same watch on `run --help` must see the agent: a watch that saw
    # nothing anywhere would pin nothing.
    body = "from carryall.cli import main\ntry:\n    main()\nexcept SystemExit:\n    pass"
    assert "carryall.agent" in loaded(body, TOOL_LOOP, "run", "--help", home=tmp_path)


def test_the_whole_app_still_has_every_command() -> None:
    import typer.main

    from carryall.cli import app

    assert set(typer.main.get_command(app).commands) == {  # type: ignore[attr-defined]
        "run",
        "chat",
        "local",
        "mcp",
        "sessions",
        "recall",
        "models",
        "tui",
        "paths",
    }


# The MCP SDK and image decoding: only a run with MCP servers configured needs them.
MCP_AND_IMAGES = ("mcp", "carryall.mcp._client", "PIL", "anyio")


@pytest.mark.parametrize("argv", [("run", "--help"), ("mcp", "--help"), ("sessions", "list")])
def test_no_command_loads_the_mcp_sdk_until_a_server_is_configured(
    tmp_path: Path, argv: tuple[str, ...]
) -> None:
    body = "from carryall.cli import main\ntry:\n    main()\nexcept SystemExit:\n    pass"
    assert loaded(body, MCP_AND_IMAGES, *argv, home=tmp_path) == []
