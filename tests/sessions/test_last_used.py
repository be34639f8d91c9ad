"""`last` (and so `run -c`) names the session used last, on every store, as the list shows it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from carryall.blocks import Message, Text


def test_last_is_the_session_written_last_not_the_one_created_last(
    open_any: Callable[[], Any],
) -> None:
    store = open_any()
    older = store.create(backend="fake", model="m")
    older.record([], [Message.user("first"), Message.assistant([Text("a")])])
    newer = store.create(backend="fake", model="m")
    newer.record([], [Message.user("second"), Message.assistant([Text("b")])])
    assert store.resolve("last") == newer.id
    held = older.messages()
    older.record(held, [*held, Message.user("again"), Message.assistant([Text("c")])])
    assert store.resolve("last") == older.id
    assert [info.meta.id for info in store.list()][:2] == [older.id, newer.id]
