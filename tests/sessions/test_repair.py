"""`carryall sessions repair`: a history no wire will take becomes the nearest valid one.

Every store, through the command: the repair is one rewrite that names each
change, and the broken history stays as the earlier version.
"""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from carryall._commands import sessions as commands
from carryall.blocks import Image, Message, Origin, Text, Thinking, ToolResult, ToolUse
from carryall.blocks import validate_history as valid
from carryall.errors import HistoryError
from carryall.sessions import open_store
from carryall.sessions.repair import repair_history

PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)


def _broken() -> list[Message]:
    shot = Image.from_bytes("image/png", PNG, "shot.png")
    retired = Origin("retired-wire", "api.example", "m1")
    return [
        Message.user("hi"),
        Message.assistant(
            [Text("looking"), ToolUse("c1", "read", {}), ToolUse("c1", "read", {"again": 1}), shot]
        ),
        Message("user", (ToolResult("c1", "text"), ToolResult("zz", "for no call"))),
        Message.assistant([Text("one more"), ToolUse("c2", "grep", {})]),  # never answered
        Message.user("next"),
        Message.assistant([Thinking("hmm", "sig", retired), Text("ok")]),
    ]


def test_the_repair_of_each_broken_rule_is_valid_and_named() -> None:
    broken = _broken()
    with pytest.raises(HistoryError):
        valid(broken)
    repaired, changes = repair_history(broken)
    valid(repaired)
    joined = "\n".join(changes)
    for expected in (
        "reuses an earlier call's id",
        "[image: shot.png (image/png)] outside a user message",
        "result for zz",
        "grep (c2) with an error result",
        "signature of thinking from retired-wire",
    ):
        assert expected in joined, expected
    assert repair_history(repaired) == (repaired, [])


def test_sessions_repair_records_one_rewrite_naming_each_change(store_location: str) -> None:
    store = open_store(store_location)
    session = store.create()
    broken = _broken()
    session.record([], broken)
    app = typer.Typer()
    commands.register(app)
    runner = CliRunner()
    result = runner.invoke(app, ["sessions", "repair", session.id, "--store", store_location])
    assert result.exit_code == 0, result.output
    assert "repaired session" in result.stderr and "reuses an earlier call's id" in result.stderr
    reopened = open_store(store_location).open(session.id)
    valid(reopened.messages())
    assert reopened.versions()[0] == broken and len(reopened.versions()) == 2
    last = json.loads(store.export_events(session.id)[1][-1])
    assert last["event"] == "rewrite" and len(last["changes"]) >= 5
    again = runner.invoke(app, ["sessions", "repair", session.id, "--store", store_location])
    assert again.exit_code == 0 and "nothing to repair" in again.stderr
