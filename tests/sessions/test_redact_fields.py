"""Redaction by construction: every string a session stores passes one walk, on both stores.

A key in an image URL's query, a document's title or bytes, a tool result's
attachment target, a `failed` note, a downgrade reason, the `cwd` or the
origin must be cut out as the event is written; `sessions redact` must walk
the same fields afterwards and never say "nothing matched" while the string
is still stored.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from carryall.blocks import (
    Document,
    Downgrade,
    Image,
    Message,
    Opaque,
    Origin,
    Text,
    Thinking,
    ToolResult,
    ToolUse,
)
from carryall.carrier import Marker, MarkerKind
from carryall.cli import app
from carryall.sessions import render
from carryall.sessions.redact import REDACTED, Redactor
from tests.support.leaks import leaks, store_bytes

AWS = "AKIAZ7Q3MX5LP2RT8WKN"
GOOGLE = "AIza" + "SyB7xQ2mL9pR4tW8eN1jC6aH3sD5gU0iOk7"
BEDROCK = "ABSK" + "QmVkcm9ja0FQSUtleS1yZWQtdGVhbS0xMjM0NTY3ODkwOnNlY3JldA=="
CUSTOM = "hunter2zebrasecret"


def _everywhere(secret: str) -> list[Message]:
    """A history with `secret` in every kind of field a block has."""
    text_doc = Document.from_bytes(
        "text/plain", f"config\nkey = {secret}\n".encode(), f"{secret}.txt", f"notes {secret}"
    )
    return [
        Message.user(
            "look at these",
            [
                Image.from_url(f"https://bucket.example/x.png?X-Amz-Credential={secret}"),
                Image.from_bytes("image/png", b"\x89PNG\r\n\x1a\n", f"shot {secret}.png"),
                text_doc,
                Document("application/pdf", url=f"https://h.example/d.pdf?k={secret}"),
            ],
        ),
        Message.assistant(
            [
                Thinking(f"thinking of {secret}"),
                Text("calling"),
                ToolUse(f"c.{secret}", f"tool {secret}", {secret: [f"v {secret}"]}),
                Opaque("web_search", f'{{"q": "{secret}"}}', Origin("a", "h", "m"), f"q {secret}"),
            ]
        ),
        Message.tool_results(
            [
                ToolResult(
                    f"c.{secret}",
                    f"done {secret}",
                    attachments=(Marker(MarkerKind.AUDIO, f"/tmp/{secret}.wav"),),
                )
            ]
        ),
        Message("system", (Text(f"mind {secret}"),)),
    ]


def _write(store: Any, secret: str) -> Any:
    session = store.create(
        backend="fake",
        model=f"m {secret}",
        cwd=f"/work/{secret}",
        title=f"about {secret}",
        system=f"use {secret}",
        origin=f"openai messages from {secret}.json",
        tools=[f"t {secret}"],
    )
    history = _everywhere(secret)
    session.record([], history, [Downgrade(0, "image", f"cannot fetch ?k={secret}")])
    session.append([Message.user(f"again {secret}")], failed=f"401: bad key {secret}")
    return session


def _readers(store: Any, session_id: str) -> str:
    """Every reader format of a session, and what a listing shows."""
    session = store.open(session_id)
    out = [
        render(fmt, session.meta, session.messages(), downgrades=session.downgrades())
        for fmt in ("text", "markdown", "json", "html")
    ]
    out.append(repr([(i.meta, i.failed) for i in store.list()]))
    return "\n".join(out)


@pytest.mark.parametrize("secret", [AWS, GOOGLE, BEDROCK])
def test_a_key_in_any_field_never_reaches_the_store_or_a_reader(
    home: Path, store_location: str, open_any: Callable[[], Any], secret: str
) -> None:
    store = open_any()
    session = _write(store, secret)
    assert not leaks(secret, store_bytes(store_location))
    assert not leaks(secret, _readers(store, session.id))
    back = store.open(session.id)
    text_doc = back.messages()[0].documents()[0]
    assert text_doc.plain_text() == f"config\nkey = {REDACTED}\n"
    # A call and its result stay paired when their id is cut out.
    call = back.messages()[1].tool_uses()[0]
    result = back.messages()[2].tool_results_in()[0]
    assert call.id == result.tool_use_id != f"c.{secret}"


def test_signed_thinking_whose_text_holds_a_key_is_stored_unsigned(
    home: Path, open_any: Callable[[], Any]
) -> None:
    store = open_any()
    session = store.create(cwd="/w")
    origin = Origin("anthropic", "api.anthropic.com", "m")
    signed = Thinking(f"the key is {AWS}", "sig-opaque", origin)
    history = [Message.user("hi"), Message.assistant([signed, Text("ok")])]
    session.record([], history)
    stored = store.open(session.id).messages()[1].content[0]
    assert stored == Thinking(f"the key is {REDACTED}")
    # The run keeps what it holds, so its next recording is still an append.
    assert session.record(history, [*history, Message.user("next")]) == "append"


def _unredacted(home: Path) -> None:
    """The config asks for no redaction on write, so strings land as they are."""
    (home / "config.toml").write_text("[redact]\nbuiltin = false\n")


def test_sessions_redact_walks_every_field_a_write_does(
    home: Path, store_location: str, open_any: Callable[[], Any]
) -> None:
    _unredacted(home)
    store = open_any()
    session = _write(store, CUSTOM)
    assert leaks(CUSTOM, store_bytes(store_location))  # the check can fail
    changed = store.redact(session.id, CUSTOM)
    assert changed >= 3  # the header and both events
    assert not leaks(CUSTOM, store_bytes(store_location))
    assert not leaks(CUSTOM, _readers(store, session.id))
    assert store.redact(session.id, CUSTOM) == 0


def test_cli_redact_never_says_nothing_matched_while_the_string_is_stored(
    home: Path, store_location: str, open_any: Callable[[], Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    _unredacted(home)
    monkeypatch.setenv("CARRYALL_STORE", store_location)
    store = open_any()
    # Only the header's working folder and a failed note hold it.
    session = store.create(cwd=f"/srv/{CUSTOM}")
    session.append([Message.user("hello")], failed=f"refused: {CUSTOM}")
    runner = CliRunner()
    result = runner.invoke(app, ["sessions", "redact", session.id, "-p", CUSTOM, "-y"])
    assert result.exit_code == 0, result.output
    assert "nothing matched" not in result.stderr
    assert not leaks(CUSTOM, store_bytes(store_location))
    result = runner.invoke(app, ["sessions", "redact", session.id, "-p", CUSTOM, "-y"])
    assert "nothing matched" in result.stderr


def test_redact_replaces_a_text_documents_blob_and_drops_the_old_one(
    home: Path, store_location: str, open_any: Callable[[], Any]
) -> None:
    _unredacted(home)
    store = open_any()
    session = store.create(cwd="/w")
    doc = Document.from_bytes("text/plain", f"token {CUSTOM}\n".encode(), "n.txt")
    session.record([], [Message.user("read", [doc])])
    assert leaks(CUSTOM, store_bytes(store_location))
    assert store.redact(session.id, CUSTOM) == 1
    assert not leaks(CUSTOM, store_bytes(store_location))
    [back] = store.open(session.id).messages()[0].documents()
    assert back.plain_text() == f"token {REDACTED}\n"


def test_the_walk_reaches_a_field_of_any_struct_it_is_given() -> None:
    # No list of cases: a struct the walk has never heard of is walked whole.
    import msgspec

    class Future(msgspec.Struct, frozen=True):
        note: str
        parts: tuple[Marker, ...]
        extra: dict[str, Any]

    value = Future(f"n {AWS}", (Marker(MarkerKind.VIDEO, f"/v/{AWS}.mp4"),), {AWS: [AWS, 1]})
    clean = Redactor().walk(value)
    assert AWS not in repr(clean)
    assert clean.extra == {REDACTED: [REDACTED, 1]}
    nothing = Future("plain", (), {})
    assert Redactor().walk(nothing) is nothing


def test_chat_line_history_is_written_redacted(home: Path) -> None:
    from carryall._commands.chat import redacted_history

    path = home / "history"
    history = redacted_history(path)
    history.append_string(f"my key is {GOOGLE}")
    written = path.read_text()
    assert GOOGLE not in written
    assert f"my key is {REDACTED}" in written


def test_redact_reaches_a_field_no_reader_knows(
    home: Path, store_location: str, open_any: Callable[[], Any]
) -> None:
    # A hand-edited line with an extra field: the walk never sees it, the bytes do.
    import json

    from carryall.sessions._transcript import _with_crc

    _unredacted(home)
    store = open_any()
    session = store.create(cwd="/w")
    session.record([], [Message.user("hello")])
    event = {
        "event": "append",
        "time": "2026-01-01T00:00:00.000000Z",
        "n": 2,
        "start": 1,
        "note": CUSTOM,
        "messages": [{"role": "assistant", "content": [{"type": "text", "text": "hi"}]}],
    }
    line = _with_crc(json.dumps(event, separators=(",", ":")).encode())
    if store_location.startswith("postgresql"):
        import psycopg

        with psycopg.connect(store_location, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO carryall_events (session_id, seq, token, body)"
                " VALUES (%s, 2, gen_random_uuid(), %s)",
                (session.id, line[:-1]),
            )
            conn.execute("UPDATE carryall_sessions SET seq = 2 WHERE id = %s", (session.id,))
    else:
        with session.path.open("ab") as f:
            f.write(line)
    assert leaks(CUSTOM, store_bytes(store_location))
    assert store.redact(session.id, CUSTOM) == 1
    assert not leaks(CUSTOM, store_bytes(store_location))
    assert [m.text() for m in store.open(session.id).messages()] == ["hello", "hi"]


def test_a_key_escaped_inside_a_native_blocks_json_is_found() -> None:
    escaped = "\\u0041" + AWS[1:]
    block = Opaque("web_search_tool_result", f'{{"url": "{escaped}"}}', None, "results")
    assert Redactor().block(block) == Text("results")
