"""A damaged or hostile event line of any kind is skipped and named, never a traceback.

Each line is forged the way an attacker (or a careless hand edit) would: with
a valid CRC, so the integrity check passes and only the reader's own checks
stand between the line and a crash. Every reader is tried: `sessions list`,
`show`, `export`, `recall`, the TUI; each must carry on with the rest of the
session and name the line it skipped.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from carryall.blocks import Message, Text
from carryall.cli import app
from carryall.errors import TranscriptError
from carryall.sessions import Store
from carryall.sessions._transcript import _with_crc, parse_time

GOOD_TIME = "2026-01-01T00:00:00.000000Z"
REPLY = [{"role": "assistant", "content": [{"type": "text", "text": "hostile reply"}]}]


def _event(**fields: Any) -> dict[str, Any]:
    return {"event": "append", "time": GOOD_TIME, "n": 3, "start": 2, "messages": REPLY, **fields}


HOSTILE: dict[str, Any] = {
    "month 13": _event(time="2026-13-45T99:00:00.000000Z"),
    "30 February": _event(time="2026-02-30T01:00:00.000000Z"),
    "a date alone": _event(time="2026-02-03"),
    "an offset time": _event(time="2026-02-03T01:00:00+05:00"),
    "time a number": _event(time=5),
    "time null": _event(time=None),
    "n a string": _event(n="3"),
    "title a number": _event(title=7),
    "failed an object": _event(failed={"a": 1}),
    "an unknown event": _event(event="explode"),
    "an unknown block": _event(messages=[{"role": "assistant", "content": [{"type": "zzz"}]}]),
    "a path for a hash": _event(
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "image", "media_type": "image/png", "sha256": "../../etc/passwd"}
                ],
            }
        ]
    ),
    "a bad role": _event(messages=[{"role": "god", "content": [{"type": "text", "text": "x"}]}]),
    "a downgrade of the wrong type": _event(downgrades=[{"index": "x", "kind": 1}]),
    "an array": [1, 2, 3],
}


def _forged(home: Path, line: Any, *, last: bool) -> str:
    """A session of two good messages and a forged line (last, or between two good events)."""
    store = Store()
    session = store.create(backend="fake", model="m", cwd=str(home))
    history = [Message.user("about the lighthouse"), Message.assistant([Text("the keeper")])]
    session.record([], history)
    with session.path.open("ab") as f:
        f.write(_with_crc(json.dumps(line, separators=(",", ":")).encode()))
    if not last:
        store.open(session.id).append([Message.user("and the harbour")])
    return str(session.id)


def _cli(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


@pytest.mark.parametrize("last", [True, False], ids=["last line", "middle line"])
@pytest.mark.parametrize("name", list(HOSTILE))
def test_every_reader_skips_and_names_a_hostile_line(home: Path, name: str, last: bool) -> None:
    session_id = _forged(home, HOSTILE[name], last=last)
    for args in (
        ["sessions", "list"],
        ["sessions", "list", "--json"],
        ["sessions", "show", "last"],
        ["sessions", "show", session_id, "-f", "json"],
        ["sessions", "export", session_id, "-f", "markdown"],
        ["recall", "lighthouse"],
    ):
        result = _cli(*args)
        assert result.exception is None or isinstance(result.exception, SystemExit), (
            args,
            result.exception,
        )
        assert result.exit_code == 0, (args, result.output)
        assert "Traceback" not in result.output
        assert "lighthouse" in result.stdout, args  # the rest of the session is read
    shown = _cli("sessions", "show", session_id)
    assert "line 3" in shown.stderr and "skipped" in shown.stderr
    assert "hostile reply" not in shown.stdout


@pytest.mark.parametrize("name", ["month 13", "an unknown event", "a path for a hash"])
def test_the_tui_lists_and_opens_a_session_with_a_hostile_line(home: Path, name: str) -> None:
    from carryall.tui import MessageView, SessionsApp

    session_id = _forged(home, HOSTILE[name], last=True)

    async def drive() -> None:
        tui = SessionsApp(Store())
        async with tui.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            assert tui.shown == session_id
            texts = "\n".join(view.plain for view in tui.query(MessageView))
            assert "the keeper" in texts

    asyncio.run(drive())


@pytest.mark.parametrize("text", ["2026-02-30T01:00:00.000000Z", "yesterday", "", "2026-01-01"])
def test_parse_time_refuses_anything_but_a_transcript_time_with_a_transcript_error(
    text: str,
) -> None:
    with pytest.raises(TranscriptError, match="is not a transcript time"):
        parse_time(text)
    assert parse_time(GOOD_TIME).isoformat() == "2026-01-01T00:00:00+00:00"


def test_the_postgresql_store_skips_a_hostile_event_and_a_damaged_row(postgres_url: str) -> None:
    import psycopg

    from carryall.sessions.postgres import PostgresStore

    store = PostgresStore(postgres_url)
    try:
        session = store.create(backend="fake", model="m", cwd="/w")
        session.record([], [Message.user("about the lighthouse")])
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            for seq, line in ((2, HOSTILE["month 13"]), (3, HOSTILE["an unknown event"])):
                body = _with_crc(json.dumps(line, separators=(",", ":")).encode())[:-1]
                conn.execute(
                    "INSERT INTO carryall_events (session_id, seq, token, body)"
                    " VALUES (%s, %s, gen_random_uuid(), %s)",
                    (session.id, seq, body),
                )
            conn.execute(
                "UPDATE carryall_sessions SET seq = 3, updated = 'soon' WHERE id = %s",
                (session.id,),
            )
        problems: list[TranscriptError] = []
        [info] = store.list(on_error=problems.append)
        assert info.meta.id == session.id
        assert "updated" in str(problems[0]) and "not a transcript time" in str(problems[0])
        opened = store.open(session.id)
        assert [m.text() for m in opened.messages()] == ["about the lighthouse"]
        assert len(opened.damage) == 2
        assert "line 3" in opened.damage[0] and "line 4" in opened.damage[1]
    finally:
        store.close()
