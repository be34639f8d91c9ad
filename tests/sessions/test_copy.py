"""`carryall sessions copy`: JSON Lines to PostgreSQL and back gives the same sessions."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from carryall._commands import sessions as commands
from carryall.blocks import Image, Message, Text
from carryall.sessions import AnyStore, Store, open_store
from carryall.usage import RequestUsage, Usage
from tests.support.sessions import PNG, rich_history

pytestmark = pytest.mark.usefixtures("home")

USED = RequestUsage(
    time=datetime(2026, 3, 1, 8, 0, tzinfo=UTC),
    backend="anthropic",
    wire="anthropic",
    model="m",
    answered="m-20260101",
    usage=Usage(input_tokens=12, output_tokens=3, cache_read_input_tokens=400),
    raw={"input_tokens": 12, "output_tokens": 3, "cache_read_input_tokens": 400},
    duration=0.5,
)


def _copy(source: str, target: str) -> str:
    app = typer.Typer()
    commands.register(app)
    result = CliRunner().invoke(app, ["sessions", "copy", "--from", source, "--to", target])
    assert result.exit_code == 0, result.output
    return result.stderr


def _everything(store: AnyStore) -> dict[str, object]:
    """Every session's meta, events, versions and times, and every blob's bytes."""
    sessions = {}
    for info in store.list():
        session = store.open(info.meta.id)
        sessions[info.meta.id] = (
            info,
            store.export_events(info.meta.id),
            session.versions(),
            session.times(),
            session.usage(),
        )
    blobs = {sha: store.get_blob(sha) for sha in store.referenced_blobs()}
    return {"sessions": sessions, "blobs": blobs}


def test_jsonl_to_postgres_to_jsonl_gives_back_equal_sessions_versions_and_blobs(
    tmp_path: Path, postgres_url: str
) -> None:
    first = tmp_path / "first"
    store = Store(first)
    rich = rich_history()
    one = store.create(title="rich", backend="anthropic", model="m", system="be brief")
    one.record([], rich, usage=[USED])
    # A rewrite: the first version must come across too.
    one.record(rich, rich[:2], usage=[USED, USED])
    two = store.create()
    two.record([], [Message.user("second", [Image.from_bytes("image/png", PNG + b"2", "b.png")])])
    two.append([Message.assistant([Text("seen")])])
    store.create()  # an empty session moves too
    before = _everything(store)
    assert len(before["blobs"]) == 2  # type: ignore[arg-type]
    assert store.open(one.id).usage() == [USED] * 3

    said = _copy(str(first), postgres_url)
    assert "copied 3 session(s)" in said and "verified equal" in said
    assert _everything(open_store(postgres_url)) == before
    hits = open_store(postgres_url).recall.search("second")
    assert [h.session for h in hits] == [two.id]

    back = tmp_path / "back"
    _copy(postgres_url, str(back))
    assert _everything(open_store(str(back))) == before
    # The transcripts themselves are the same bytes.
    for path in first.glob("*.jsonl"):
        assert (back / path.name).read_bytes() == path.read_bytes()
    assert [h.session for h in Store(back).recall.search("second")] == [two.id]

    # Run again: everything is there and equal, so nothing is written.
    assert "copied 0 session(s)" in _copy(str(first), postgres_url)
    assert "3 already there and equal" in _copy(str(first), postgres_url)


def test_a_differing_session_in_the_target_is_an_error_and_is_not_overwritten(
    tmp_path: Path,
) -> None:
    source = Store(tmp_path / "a")
    session = source.create()
    session.record([], [Message.user("original")])
    _copy(str(tmp_path / "a"), str(tmp_path / "b"))
    session.append([Message.user("more")])
    app = typer.Typer()
    commands.register(app)
    result = CliRunner().invoke(
        app, ["sessions", "copy", "--from", str(tmp_path / "a"), "--to", str(tmp_path / "b")]
    )
    assert result.exit_code == 1
    assert "already in" in result.stderr and "differs" in result.stderr
    assert "Traceback" not in result.output
    assert [m.text() for m in Store(tmp_path / "b").open(session.id).messages()] == ["original"]
