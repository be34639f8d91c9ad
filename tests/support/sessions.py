"""Session histories for the store tests: one with every block kind, and one with secrets."""

from __future__ import annotations

from carryall.blocks import Image, Message, Text, Thinking, ToolResult, ToolUse
from carryall.carrier import Marker, MarkerKind

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4


def rich_history() -> list[Message]:
    return [
        Message.user("look at this", [Image.from_bytes("image/png", PNG, "shot.png")]),
        Message.assistant(
            [
                Thinking("the user wants a look", "c2lnbmF0dXJl"),
                Text("Reading it."),
                ToolUse("call_1", "read_file", {"path": "a.txt", "opts": [1, 2.5, None, True]}),
                ToolUse("call_2", "view_image", "plain string input"),
            ]
        ),
        Message.tool_results(
            [
                ToolResult(
                    "call_1", "file body", attachments=(Marker(MarkerKind.AUDIO, "clip.mp3"),)
                ),
                ToolResult("call_2", "no such file", True),
            ],
            [Image.from_bytes("image/png", PNG, "tool.png")],
        ),
        Message.assistant([Thinking("unsigned, from another backend"), Text("done")]),
    ]


SMALL_PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256))

ANTHROPIC_KEY = "sk-ant-api03-" + "Q7fVb2LxkP9zR4tYw8eN1mJc6aH3sD5gU0iO" * 2


SECRET = "hunter2zebrasecret"


def secret_history(secret: str) -> list[Message]:
    return [
        Message.user(
            f"my key is {secret}, use it", [Image.from_bytes("image/png", SMALL_PNG, "s.png")]
        ),
        Message.assistant(
            [
                Thinking("signed thoughts", f"sig-{secret}-sig"),
                Text("Calling."),
                ToolUse("c1", "login", {"token": secret, "nested": [{secret: f"x {secret} y"}]}),
            ]
        ),
        Message.tool_results([ToolResult("c1", f"logged in with {secret}")]),
    ]
