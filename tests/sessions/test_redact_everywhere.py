"""A key shape put in every string field of a random session is found in no byte a person can reach.

Random sessions (every block kind, attachments, text documents, failed notes,
downgrade reasons, the header's every field) with a random key of a random
issuer's shape in each string field; then every byte of the store (JSONL files
and blobs, or every PostgreSQL table), the recall index, every reader format
and the terminal output of `sessions show` and `sessions list` are searched
for it, raw, lowercased and as base64. The checker is first shown to find the
key when nothing is redacted, so a pass means something.
"""

from __future__ import annotations

import gc
import string
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from carryall.blocks import (
    Block,
    Document,
    Downgrade,
    Image,
    Message,
    Opaque,
    Origin,
    RedactedThinking,
    Text,
    Thinking,
    ToolResult,
    ToolUse,
)
from carryall.carrier import Marker, MarkerKind
from carryall.cli import app
from carryall.sessions import render
from tests.support.leaks import leaks, store_bytes

_ALNUM = string.ascii_letters + string.digits
_UPPER = string.ascii_uppercase + string.digits


def _shape(prefix: str, alphabet: str, size: int) -> st.SearchStrategy[str]:
    return st.text(alphabet, min_size=size, max_size=size).map(lambda tail: prefix + tail)


secrets = st.one_of(
    _shape("AKIA", _UPPER, 16),
    _shape("ASIA", _UPPER, 16),
    _shape("AIza", _ALNUM + "_-", 35),
    _shape("ABSK", _ALNUM + "+/", 44),
    _shape("ghp_", _ALNUM, 36),
    _shape("sk-ant-api03-", _ALNUM + "_-", 40),
    _shape("sk-proj-", _ALNUM, 32),
    _shape("hf_", _ALNUM, 34),
    _shape("xoxb-", _ALNUM, 24),
)
"""A key of one issuer's shape, fresh each time."""

words = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r\x00"), max_size=12
)
"""Filler around a key: anything on one line, controls and bidi marks included.

NUL is left out: a PostgreSQL `text` column (a title, a failed note) cannot
hold it, which is the store's own matter and not redaction's."""


@st.composite
def sessions(draw: st.DrawFn, secret: str) -> dict[str, Any]:
    """A session's header fields, history, downgrades and failed note, the key in every string."""

    def s() -> str:
        return f"{draw(words)} {secret} {draw(words)}"

    def url(ext: str) -> str:
        return f"https://{draw(st.sampled_from(['h.example', 'cdn.example']))}/a{ext}?k={secret}"

    def attachment() -> Image | Document:
        kind = draw(st.sampled_from(["png", "png-url", "text", "pdf", "doc-url"]))
        if kind == "png":
            return Image.from_bytes("image/png", b"\x89PNG\r\n\x1a\n" + draw(st.binary()), s())
        if kind == "png-url":
            return Image.from_url(url(".png"), s() if draw(st.booleans()) else None)
        if kind == "text":
            return Document.from_bytes(
                "text/plain", s().encode(), s(), s() if draw(st.booleans()) else None
            )
        if kind == "pdf":
            return Document.from_bytes(
                "application/pdf", b"%PDF-1.4\n" + draw(st.binary()), s(), s()
            )
        return Document("application/pdf", url=url(".pdf"), title=s(), source=s())

    history: list[Message] = []
    for round_no in range(draw(st.integers(1, 3))):
        history.append(Message.user(s(), [attachment() for _ in range(draw(st.integers(0, 2)))]))
        ids = [f"call.{round_no}.{i}.{secret}" for i in range(draw(st.integers(0, 2)))]
        blocks: list[Block] = []
        if draw(st.booleans()):
            signed = draw(st.booleans())
            origin = Origin(s(), s(), s())
            blocks.append(
                Thinking(s(), "opaque-signature" if signed else None, origin if signed else None)
            )
        if draw(st.booleans()):
            blocks.append(RedactedThinking("ZW5jcnlwdGVk", Origin(s(), s(), s())))
        blocks.append(Text(s()))
        if draw(st.booleans()):
            blocks.append(Opaque(s(), f'{{"q": "{secret}"}}', Origin(s(), s(), s()), s()))
        blocks += [ToolUse(i, s(), {s(): [s(), {"k": s()}]}) for i in ids]
        history.append(Message.assistant(blocks))
        if ids:
            markers = tuple(
                Marker(draw(st.sampled_from(list(MarkerKind))), f"/tmp/{secret}.bin")
                for _ in range(draw(st.integers(0, 1)))
            )
            results = [ToolResult(i, s(), draw(st.booleans()), markers) for i in ids]
            history.append(
                Message.tool_results(
                    results, [attachment() for _ in range(draw(st.integers(0, 1)))]
                )
            )
            history.append(Message.assistant([Text(s())]))
        if draw(st.booleans()):
            history.append(Message("system", (Text(s()),)))
    return {
        "header": {
            "backend": s(),
            "model": s(),
            "cwd": s(),
            "title": s() if draw(st.booleans()) else None,
            "system": s(),
            "origin": s(),
            "tools": [s() for _ in range(draw(st.integers(0, 2)))],
        },
        "history": history,
        "downgrades": [Downgrade(0, s(), s()) for _ in range(draw(st.integers(0, 2)))],
        "failed": s(),
    }


def _record(store: Any, drawn: dict[str, Any], secret: str) -> str:
    session = store.create(**drawn["header"])
    session.record([], drawn["history"], drawn["downgrades"])
    session.append([Message.user(f"once more {secret}")], failed=drawn["failed"])
    return str(session.id)


def _places(store: Any, location: str, session_id: str, secret: str) -> list[str]:
    """Every place a person or a process can read that holds `secret`, by name."""
    found = []
    if leaks(secret, store_bytes(location)):
        found.append("store")
    if store.recall.search(secret):
        found.append("recall")
    session = store.open(session_id)
    for fmt in ("text", "markdown", "json", "html"):
        out = render(
            fmt, session.meta, session.messages(), session.times(), downgrades=session.downgrades()
        )
        if leaks(secret, out):
            found.append(f"export {fmt}")
    runner = CliRunner()
    for args in (
        ["show", "-f", "text"],
        ["show", "-f", "markdown"],
        ["show", "-f", "html"],
        ["show", "-f", "json", "--embed-images"],
        ["list", "--json"],
        ["list"],
    ):
        if args[0] == "show":
            args.insert(1, session_id)
        result = runner.invoke(
            app, ["sessions", *args, "--store", location], env={"COLUMNS": "400"}
        )
        assert result.exit_code == 0, result.output
        if leaks(secret, result.stdout + result.stderr):
            found.append(f"sessions {' '.join(a for a in args if a != session_id)}")
    # Each command opened its own store, which holds a reference cycle (its
    # recall): collected now, so their PostgreSQL connections close here.
    gc.collect()
    return found


_SETTINGS = settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@settings(_SETTINGS, max_examples=2)
@given(data=st.data())
def test_the_checker_finds_a_key_everywhere_when_nothing_is_redacted(
    home: Path, store_location: str, open_any: Callable[[], Any], data: st.DataObject
) -> None:
    (home / "config.toml").write_text("[redact]\nbuiltin = false\n")
    secret = data.draw(secrets, label="secret")
    drawn = data.draw(sessions(secret), label="session")
    store = open_any()
    try:
        session_id = _record(store, drawn, secret)
        places = _places(store, store_location, session_id, secret)
    finally:
        _close(store)
    assert places == [
        "store",
        "recall",
        "export text",
        "export markdown",
        "export json",
        "export html",
        "sessions show -f text",
        "sessions show -f markdown",
        "sessions show -f html",
        "sessions show -f json --embed-images",
        "sessions list --json",
        "sessions list",
    ]


@_SETTINGS
@given(data=st.data())
def test_a_key_in_every_string_field_is_in_no_byte_a_person_can_reach(
    home: Path, store_location: str, open_any: Callable[[], Any], data: st.DataObject
) -> None:
    secret = data.draw(secrets, label="secret")
    drawn = data.draw(sessions(secret), label="session")
    store = open_any()
    try:
        session_id = _record(store, drawn, secret)
        assert _places(store, store_location, session_id, secret) == []
    finally:
        _close(store)


def _close(store: Any) -> None:
    close = getattr(store, "close", None)
    if close is not None:
        close()
