"""`carryall tui`, driven by Textual's own test pilot (no pytest plugin needed)."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path

from textual.widgets import DataTable, Input, OptionList

from carryall.blocks import Image, Message, Text, image_placeholder
from carryall.sessions import Store
from carryall.tui import MessageView, SessionsApp

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(64))


def _store(tmp_path: Path) -> tuple[Store, str, str]:
    store = Store(tmp_path / "sessions")
    older = store.create(backend="fake", model="m")
    older.record(
        [],
        [
            Message.user("about the lighthouse", [Image.from_bytes("image/png", PNG, "beam.png")]),
            Message.assistant([Text("the keeper waves")]),
        ],
    )
    newer = store.create(backend="fake", model="m")
    history = [Message.user("about the harbour")]
    history += [
        Message.assistant([Text(f"boat {i}")]) if i % 2 else Message.user(f"dock {i}")
        for i in range(1, 41)
    ]
    newer.record([], history)
    return store, older.id, newer.id


def _texts(app: SessionsApp) -> list[str]:
    return [view.plain for view in app.query(MessageView)]


def test_browse_sessions_and_open_the_one_under_the_cursor(tmp_path: Path) -> None:
    store, older, newer = _store(tmp_path)

    async def drive() -> None:
        app = SessionsApp(store)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            table = app.query_one("#sessions", DataTable)
            assert table.row_count == 2
            assert app.shown == newer  # newest first, opened at start
            assert any("about the harbour" in t for t in _texts(app))
            await pilot.press("down")
            await pilot.pause()
            assert app.shown == older
            texts = "\n".join(_texts(app))
            assert "the keeper waves" in texts
            assert image_placeholder("image/png", "beam.png") in texts
            assert base64.b64encode(PNG).decode()[:20] not in texts
            await pilot.press("up")
            await pilot.pause()
            assert app.shown == newer

    asyncio.run(drive())


def test_recall_box_finds_and_opens_the_message(tmp_path: Path) -> None:
    store, older, _ = _store(tmp_path)

    async def drive() -> None:
        app = SessionsApp(store)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            await pilot.press("slash")
            assert isinstance(app.focused, Input)
            await pilot.press(*"keeper", "enter")
            await pilot.pause()
            hits = app.query_one("#hits", OptionList)
            assert hits.option_count == 1
            assert [(h.session, h.message) for h in app.hits] == [(older, 1)]
            await pilot.press("enter")
            await pilot.pause()
            assert app.shown == older
            assert any(v.index == 1 and "keeper" in v.plain for v in app.query(MessageView))
            await pilot.press("escape")
            assert isinstance(app.focused, DataTable)

    asyncio.run(drive())


def test_empty_store_says_so(tmp_path: Path) -> None:
    async def drive() -> None:
        app = SessionsApp(Store(tmp_path / "none"))
        async with app.run_test() as pilot:
            await pilot.pause()
            assert app.shown is None
            assert any("No sessions yet" in t for t in _texts(app))

    asyncio.run(drive())


def test_at_80_by_24_every_row_shows_id_age_turns_and_30_of_the_title(tmp_path: Path) -> None:
    store = Store(tmp_path / "sessions")
    long_title = "Please read the notes file and summarise the three main points of it"
    ids = []
    for n in range(3):
        session = store.create(backend="anthropic-with-a-long-name", model="m", title=long_title)
        session.record([], [Message.user(f"q{n}"), Message.assistant([Text("a")])])
        ids.append(session.id)

    async def drive() -> None:
        app = SessionsApp(store)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            table = app.query_one("#sessions", DataTable)
            assert table.row_count == 3
            # The whole row is on the screen: the table needs no sideways scroll.
            assert table.region.width >= 76
            assert table.virtual_size.width <= table.scrollable_content_region.width
            assert table.max_scroll_x == 0
            for row, session_id in enumerate(reversed(ids)):
                cells = [str(cell) for cell in table.get_row_at(row)]
                assert cells[0] == session_id
                assert cells[1] == "now" or cells[1][:-1].isdigit()
                assert cells[2] == "2"
                assert len(cells[3]) >= 30 and long_title.startswith(cells[3].rstrip("…"))
            # The transcript is still there, below the list.
            assert any("q2" in t for t in _texts(app))

    asyncio.run(drive())


def test_a_failed_session_is_marked_in_the_list_as_sessions_list_marks_it(tmp_path: Path) -> None:
    store = Store(tmp_path / "sessions")
    good = store.create(backend="fake", model="m", title="the good one")
    good.record([], [Message.user("hello"), Message.assistant([Text("hi")])])
    bad = store.create(backend="fake", model="m", title="the broken one")
    bad.append([Message.user("are you there?")], failed="connection refused")

    async def drive() -> None:
        app = SessionsApp(store)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            table = app.query_one("#sessions", DataTable)
            titles = {
                str(table.get_row_at(row)[0]): str(table.get_row_at(row)[3])
                for row in range(table.row_count)
            }
            assert titles == {good.id: "the good one", bad.id: "(failed) the broken one"}

    asyncio.run(drive())


def test_a_session_with_usage_shows_its_total_above_the_transcript(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from carryall.usage import RequestUsage, Usage

    store = Store(tmp_path / "sessions")
    session = store.create(backend="local", model="m")
    used = RequestUsage(
        time=datetime.now(UTC),
        backend="local",
        wire="llama-server",
        model="m",
        usage=Usage(input_tokens=1_234, output_tokens=56),
    )
    session.record([], [Message.user("q"), Message.assistant([Text("a")])], usage=[used, used])

    async def drive() -> None:
        app = SessionsApp(store)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            head = _texts(app)[0]
            assert f"Session {session.id}" in head
            assert "Total: 2 requests, 2,468 in, 112 out; cost free (local model)" in head

    asyncio.run(drive())
