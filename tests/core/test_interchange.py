"""Whole histories in and out of files: wire messages and carryall's export."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from carryall.blocks import Image, Message, Text, ToolResult, ToolUse, image_placeholder
from carryall.errors import TranscriptError
from carryall.interchange import detect_format, export_messages, read_messages_file
from carryall.sessions import SessionMeta, export_dict
from tests.support.spelling import unspelled

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 32
HISTORY = [
    Message.user("zoom in", [Image.from_bytes("image/png", PNG)]),
    Message.assistant([Text("Zooming."), ToolUse("c1", "zoom", {"factor": 2})]),
    Message.tool_results([ToolResult("c1", "zoomed")]),
    Message.assistant([Text("a cat")]),
]


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"carryall": "session-export", "messages": []}, "carryall"),
        ([{"role": "tool", "tool_call_id": "a", "content": "x"}], "openai"),
        ([{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}], "openai"),
        ([{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a"}]}], "anthropic"),
        ({"system": "terse", "messages": [{"role": "user", "content": "hi"}]}, "anthropic"),
        ([{"role": "user", "content": "hi"}], "openai"),
    ],
)
def test_detect_format_names_the_shape(data: Any, expected: str) -> None:
    assert detect_format(data) == expected


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
def test_export_reads_back_as_the_same_history(tmp_path: Path, fmt: str) -> None:
    path = tmp_path / f"{fmt}.json"
    path.write_text(export_messages(fmt, HISTORY, system="be terse", model="m"))  # type: ignore[arg-type]
    imported = read_messages_file(path)
    assert imported.format == fmt
    assert imported.system == "be terse"
    # The blocks are the history's; a call's argument text as the file wrote it (spaced,
    # on OpenAI) is kept beside its input, so writing it out again gives the same file.
    assert [unspelled(m) for m in imported.messages] == HISTORY
    again = export_messages(fmt, imported.messages, system="be terse", model="m")  # type: ignore[arg-type]
    assert again == path.read_text()


def test_carryall_export_restores_images_from_blobs_or_says_placeholder(tmp_path: Path) -> None:
    meta = SessionMeta(id="s1", created=datetime.now(UTC), backend="b", title="zoom")
    path = tmp_path / "export.json"
    path.write_text(json.dumps(export_dict(meta, HISTORY, embed_images=False)))
    restored = read_messages_file(path, blob=lambda sha: PNG)
    assert (restored.format, restored.backend, restored.title) == ("carryall", "b", "zoom")
    assert restored.messages == HISTORY
    missing = read_messages_file(path, "carryall", blob=lambda sha: None)
    assert missing.messages[0].text().endswith(image_placeholder("image/png", None))


def test_a_file_that_is_not_messages_is_one_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "odd.json"
    path.write_text(json.dumps("just a string"))
    with pytest.raises(TranscriptError, match="expected a list of messages"):
        read_messages_file(path, "openai")
