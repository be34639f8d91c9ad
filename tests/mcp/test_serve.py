"""`carryall mcp serve` through the `mcp` SDK's own client, over a store a real run wrote."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the MCP tests need the mcp extra: pip install 'carryall[mcp]'")

import anyio
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client

from carryall import local
from tests.support.local import PNG_1X1, local_env

pytestmark = pytest.mark.slow

_STATUS = local.status()


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A store holding one session that a real `carryall run` on the local backend recorded."""
    if not _STATUS.ready:
        pytest.skip("the local backend is not installed; run `carryall local install`")
    tmp_path = tmp_path_factory.mktemp("served")
    env = local_env(tmp_path)
    (tmp_path / "shot.png").write_bytes(PNG_1X1)
    done = subprocess.run(
        [sys.executable, "-m", "carryall", "run", "--tools", "none", "--max-tokens", "8"]
        + ["-i", str(tmp_path / "shot.png"), "Name a fruit like a pineapple."],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    return Path(env["CARRYALL_HOME"]) / "sessions", env


def _served(store: Path, env: dict[str, str], *calls: tuple[str, dict[str, Any]]) -> list[Any]:
    async def talk() -> list[Any]:
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "carryall", "mcp", "serve", "--store", str(store)],
            env={k: v for k, v in env.items() if k in ("PATH", "HOME", "CARRYALL_HOME")},
            cwd=os.getcwd(),
        )
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            listed = await session.list_tools()
            out: list[Any] = [sorted(t.name for t in listed.tools)]
            for name, arguments in calls:
                out.append(await session.call_tool(name, arguments))
            return out

    return anyio.run(talk)


def test_recall_finds_a_message_a_real_run_recorded(recorded: tuple[Path, dict[str, str]]) -> None:
    store, env = recorded
    names, found, listed, shown, one = _served(
        store,
        env,
        ("recall", {"query": "pineapple"}),
        ("sessions_list", {}),
        ("session_show", {"session_id": "", "message": 0}),
        ("session_show", {"session_id": "", "message": 0, "images": True}),
    )
    assert names == ["recall", "session_show", "session_usage", "sessions_list"]
    assert not found.is_error
    (hit,) = found.content
    assert isinstance(hit, types.TextContent)
    session_id = hit.text.split(" ", 1)[0]
    assert " #0 user " in hit.text and "pineapple" in hit.text
    assert listed.content[0].text.startswith(session_id)
    # An empty id is no session: the error comes back as a result, not a crash.
    assert shown.is_error and one.is_error


def test_session_show_gives_text_with_placeholders_and_the_images_on_request(
    recorded: tuple[Path, dict[str, str]],
) -> None:
    store, env = recorded
    (session_id,) = [p.stem for p in store.glob("*.jsonl")]
    _, whole, with_images = _served(
        store,
        env,
        ("session_show", {"session_id": session_id}),
        ("session_show", {"session_id": session_id, "message": 0, "images": True}),
    )
    (text,) = whole.content
    assert f"Session {session_id}" in text.text
    assert "[image: shot.png (image/png)]" in text.text
    assert base64.b64encode(PNG_1X1).decode() not in text.text
    heading, image = with_images.content
    assert "Name a fruit like a pineapple." in heading.text
    assert isinstance(image, types.ImageContent) and image.mime_type == "image/png"
    assert base64.b64decode(image.data) == PNG_1X1


@pytest.mark.parametrize("evil", ["../../../etc/passwd", "/etc/passwd", "..", "a/../../b"])
def test_a_path_traversal_session_id_is_refused(
    recorded: tuple[Path, dict[str, str]], evil: str
) -> None:
    store, env = recorded
    _, shown, searched = _served(
        store,
        env,
        ("session_show", {"session_id": evil}),
        ("recall", {"query": "pineapple", "session": evil}),
    )
    for result in (shown, searched):
        assert result.is_error
        assert (
            "is not a session id" in result.content[0].text
            or "no session" in result.content[0].text
        )
        assert "root:" not in result.content[0].text
