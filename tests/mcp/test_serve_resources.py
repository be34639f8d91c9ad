"""`carryall mcp serve` over stdio and streamable HTTP, driven by the `mcp` SDK's own client.

The store is a real one written through the session API (no model needed);
the server is the real `carryall mcp serve` process, and the client the
SDK's `ClientSession`, so what is checked is what any MCP client reads.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import pytest

pytest.importorskip("mcp", reason="the MCP tests need the mcp extra: pip install 'carryall[mcp]'")

import anyio
import httpx2
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

import carryall
from carryall.blocks import Image, Message, Text
from carryall.config import McpServer
from carryall.mcp import McpToolbox
from carryall.sessions import open_store
from carryall.sessions.render import USAGE_HEADING
from carryall.usage import RequestUsage, Usage

PNG_1X1 = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
T = TypeVar("T")

USED = RequestUsage(
    time=datetime(2026, 3, 1, 9, 30, tzinfo=UTC),
    backend="local",
    wire="llama-server",
    model="m1",
    usage=Usage(input_tokens=321, output_tokens=12),
    raw={"prompt_tokens": 321, "completion_tokens": 12, "total_tokens": 333},
    duration=0.75,
)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A CARRYALL_HOME whose store holds one session with text, an image and its usage."""
    root = tmp_path_factory.mktemp("served")
    store = open_store(root / "sessions")
    session = store.create(backend="fake", model="m1", cwd=str(root))
    shot = Image.from_bytes("image/png", PNG_1X1, source="shot.png")
    session.record(
        [],
        [
            Message.user("Which fruit looks like a pineapple?", [shot]),
            Message.assistant([Text("A pinecone, from a distance.")]),
        ],
        usage=[USED],
    )
    return root, session.id


def _env(root: Path) -> dict[str, str]:
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("CARRYALL_")},
        "CARRYALL_HOME": str(root),
    }


def _stdio(root: Path, work: Callable[[ClientSession], Awaitable[T]]) -> T:
    async def talk() -> T:
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "carryall", "mcp", "serve", "--store", str(root / "sessions")],
            cwd=os.getcwd(),
        )
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            return await work(session)

    return anyio.run(talk)


async def _everything(session: ClientSession, session_id: str) -> dict[str, Any]:
    """Every read the served store offers, gathered for the tests below."""
    init = session.initialize_result
    assert init is not None
    listed = await session.list_resources()
    templates = await session.list_resource_templates()
    read = await session.read_resource(f"carryall://sessions/{session_id}")
    search = await session.read_resource("carryall://search/pineapple")
    prompts = await session.list_prompts()
    cont = await session.get_prompt("continue_session", {"session_id": session_id})
    summary = await session.get_prompt("summarise_session", {"session_id": session_id})
    usage = await session.call_tool("session_usage", {"session_id": session_id[:10]})
    no_usage = await session.call_tool("session_usage", {"session_id": "no-such-session"})
    try:
        await session.read_resource("carryall://sessions/..%2F..%2Fetc%2Fpasswd")
    except MCPError as exc:
        refused = str(exc)
    else:
        refused = ""
    return {
        "init": init,
        "listed": listed,
        "templates": templates,
        "read": read,
        "search": search,
        "prompts": prompts,
        "continue": cont,
        "summary": summary,
        "usage": usage,
        "no usage": no_usage,
        "refused": refused,
    }


@pytest.fixture(scope="module")
def over_stdio(home: tuple[Path, str]) -> dict[str, Any]:
    root, session_id = home
    return _stdio(root, lambda s: _everything(s, session_id))


def test_server_info_names_carryalls_own_version(over_stdio: dict[str, Any]) -> None:
    info = over_stdio["init"].server_info
    assert (info.name, info.version) == ("carryall-sessions", carryall.__version__)


def test_sessions_are_listed_as_resources(
    over_stdio: dict[str, Any], home: tuple[Path, str]
) -> None:
    _, session_id = home
    (resource,) = over_stdio["listed"].resources
    assert str(resource.uri) == f"carryall://sessions/{session_id}"
    assert resource.mime_type == "text/markdown"
    assert "fake/m1" in (resource.description or "")
    templates = {t.uri_template for t in over_stdio["templates"].resource_templates}
    assert templates == {"carryall://sessions/{session_id}", "carryall://search/{query}"}


def test_a_session_reads_as_markdown_json_and_its_image(
    over_stdio: dict[str, Any], home: tuple[Path, str]
) -> None:
    _, session_id = home
    markdown, exported, image = over_stdio["read"].contents
    assert isinstance(markdown, types.TextResourceContents)
    assert markdown.mime_type == "text/markdown"
    assert "Which fruit looks like a pineapple?" in markdown.text
    assert "A pinecone, from a distance." in markdown.text
    assert isinstance(exported, types.TextResourceContents)
    assert exported.mime_type == "application/json"
    data = json.loads(exported.text)
    assert session_id in json.dumps(data)
    assert isinstance(image, types.BlobResourceContents) and image.mime_type == "image/png"
    assert base64.b64decode(image.blob) == PNG_1X1


def test_the_search_template_finds_the_session(
    over_stdio: dict[str, Any], home: tuple[Path, str]
) -> None:
    _, session_id = home
    (found,) = over_stdio["search"].contents
    assert isinstance(found, types.TextResourceContents) and found.mime_type == "text/markdown"
    assert f"(carryall://sessions/{session_id})" in found.text
    assert "pineapple" in found.text


def test_the_prompts_carry_the_transcript_and_the_request(over_stdio: dict[str, Any]) -> None:
    names = {p.name: p for p in over_stdio["prompts"].prompts}
    assert set(names) == {"continue_session", "summarise_session"}
    assert names["continue_session"].title == "Continue this session"
    for key, asks in (("continue", "Continue it"), ("summary", "Summarise the conversation")):
        (message,) = over_stdio[key].messages
        assert message.role == "user"
        assert "Which fruit looks like a pineapple?" in message.content.text
        assert asks in message.content.text


def test_session_usage_gives_each_request_and_the_total_and_the_resource_shows_them(
    over_stdio: dict[str, Any], home: tuple[Path, str]
) -> None:
    _, session_id = home
    (content,) = over_stdio["usage"].content
    data = json.loads(content.text)
    assert data["session"] == session_id
    (request,) = data["requests"]
    assert request["raw"] == USED.raw and request["usage"]["input_tokens"] == 321
    assert request["cost"] == "free (local model)"
    assert data["total"]["requests"] == 1 and data["total"]["output_tokens"] == 12
    assert over_stdio["no usage"].is_error
    markdown, exported, _ = over_stdio["read"].contents
    assert USAGE_HEADING in markdown.text and "321 in, 12 out" in markdown.text
    assert json.loads(exported.text)["usage"]["total"]["input_tokens"] == 321
    # The prompts ask a model about the conversation: its bill stays out.
    assert USAGE_HEADING not in over_stdio["continue"].messages[0].content.text


def test_a_path_in_a_session_uri_is_refused(over_stdio: dict[str, Any]) -> None:
    assert "session id" in over_stdio["refused"] or "no session" in over_stdio["refused"]
    assert "root:" not in over_stdio["refused"]


def test_mcp_serve_started_as_a_server_reads_the_store_carryall_home_names(
    home: tuple[Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, session_id = home
    for name in [k for k in os.environ if k.startswith("CARRYALL_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("CARRYALL_HOME", str(root))
    server = McpServer(command=sys.executable, args=["-m", "carryall", "mcp", "serve"])
    with McpToolbox({"carryall": server}) as box:
        (started,) = box.start()
        assert started.error is None, started.error
        listing = next(t for t in box.tools if t.name == "carryall__sessions_list")
        out = listing.function()
    assert out.text.startswith(session_id)


# -- streamable HTTP ----------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def http_server(home: tuple[Path, str], request: pytest.FixtureRequest) -> Iterator[str]:
    """`carryall mcp serve --http HOST:PORT` (HOST and token from the test's parameter)."""
    root, _ = home
    host, token = request.param
    port = _free_port()
    env = _env(root)
    if token:
        env["CARRYALL_MCP_TOKEN"] = token
    process = subprocess.Popen(
        [sys.executable, "-m", "carryall", "mcp", "serve", "--http", f"{host}:{port}"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"mcp serve did not listen: {process.stderr.read()!r}")  # type: ignore[union-attr]
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=15)


@asynccontextmanager
async def _http_session(url: str, token: str | None) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {token}"} if token else None
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=60)) as client,
        streamable_http_client(url, http_client=client) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


@pytest.mark.parametrize("http_server", [("127.0.0.1", None)], indirect=True)
def test_over_http_on_loopback_the_official_client_reads_everything(
    http_server: str, home: tuple[Path, str]
) -> None:
    _, session_id = home

    async def talk() -> dict[str, Any]:
        async with _http_session(http_server, None) as session:
            return await _everything(session, session_id)

    seen = anyio.run(talk)
    assert seen["init"].server_info.version == carryall.__version__
    assert [str(r.uri) for r in seen["listed"].resources] == [f"carryall://sessions/{session_id}"]
    assert [c.mime_type for c in seen["read"].contents] == [
        "text/markdown",
        "application/json",
        "image/png",
    ]
    assert "pineapple" in seen["search"].contents[0].text
    assert {p.name for p in seen["prompts"].prompts} == {"continue_session", "summarise_session"}


@pytest.mark.parametrize("http_server", [("0.0.0.0", "s3cret-token")], indirect=True)
def test_beyond_loopback_a_request_without_the_token_is_refused(http_server: str) -> None:
    refused = httpx2.post(
        http_server,
        json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
        headers={"Accept": "application/json, text/event-stream"},
    )
    assert refused.status_code == 401
    assert refused.headers["www-authenticate"] == "Bearer"
    wrong = httpx2.post(http_server, json={}, headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401

    async def talk() -> list[str]:
        async with _http_session(http_server, "s3cret-token") as session:
            listed = await session.list_tools()
            return sorted(t.name for t in listed.tools)

    assert anyio.run(talk) == ["recall", "session_show", "session_usage", "sessions_list"]


def test_binding_beyond_loopback_without_a_token_does_not_start(
    home: tuple[Path, str],
) -> None:
    root, _ = home
    done = subprocess.run(
        [sys.executable, "-m", "carryall", "mcp", "serve", "--http", f"0.0.0.0:{_free_port()}"],
        env=_env(root),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert "give a bearer token" in done.stderr


@pytest.mark.parametrize("http_server", [("0.0.0.0", "s3cret-token")], indirect=True)
def test_carryalls_own_http_client_sends_the_entrys_headers(
    http_server: str, home: tuple[Path, str]
) -> None:
    _, session_id = home
    entry = McpServer(url=http_server, headers={"Authorization": "Bearer s3cret-token"})
    with McpToolbox({"served": entry}) as box:
        (started,) = box.start()
        assert started.error is None, started.error
        listing = next(t for t in box.tools if t.name == "served__sessions_list")
        assert listing.function().text.startswith(session_id)
    refused = McpServer(url=http_server, headers={"Authorization": "Bearer wrong"})
    with McpToolbox({"served": refused}, start_timeout=20) as box:
        (failed,) = box.start()
    assert failed.tools == ()
    assert failed.error == (
        "unauthorized: this server needs its bearer token (Authorization: Bearer TOKEN)"
    )
