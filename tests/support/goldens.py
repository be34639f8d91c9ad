"""The golden histories every codec is pinned against (and the real server accepts).

Each is a realistic block history a user's agent leaves behind; the codec
tests compare their wire JSON to expected dicts, and the real-server tests
send them to llama-server.
"""

from __future__ import annotations

import base64

from carryall.blocks import Image, Message, Text, Thinking, ToolResult, ToolUse
from carryall.providers import ToolSpec

# A real 1x1 PNG, so anything that sniffs the bytes sees an image.
PNG_1x1 = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
SHOT = Image.from_bytes("image/png", PNG_1x1, "shot.png")

TOOLS = (
    ToolSpec(
        name="read_file",
        description="Read a text file from the workspace.",
        input_schema={
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
    ),
    ToolSpec(
        name="screenshot",
        description="Take a screenshot of a window and show it.",
        input_schema={
            "type": "object",
            "properties": {"window": {"type": "string"}},
            "required": ["window"],
        },
    ),
)

PARALLEL_ROUND_WITH_IMAGE = [
    Message.user("Read notes.txt and take a screenshot of the editor."),
    Message.assistant(
        [
            Text("I'll do both."),
            ToolUse("call_1", "read_file", {"path": "notes.txt"}),
            ToolUse("call_2", "screenshot", {"window": "editor"}),
        ]
    ),
    Message.tool_results(
        [ToolResult("call_1", "buy milk"), ToolResult("call_2", "screenshot taken")],
        [SHOT],
    ),
    Message.assistant([Text("The notes say to buy milk; the editor is shown.")]),
    Message.user("Thanks."),
]

ERROR_RESULT = [
    Message.user("Read missing.txt."),
    Message.assistant([ToolUse("call_9", "read_file", {"path": "missing.txt"})]),
    Message.tool_results([ToolResult("call_9", "no such file: missing.txt", is_error=True)]),
    Message.assistant([Text("That file does not exist.")]),
    Message.user("Try notes.txt then."),
]

SIGNED_THINKING = [
    Message.user("What is 2+2? Check with a tool."),
    Message.assistant(
        [
            Thinking("The user wants arithmetic; I will read the file.", signature="sig-abc123=="),
            ToolUse("call_t", "read_file", {"path": "math.txt"}),
        ]
    ),
    Message.tool_results([ToolResult("call_t", "2+2=4")]),
    Message.assistant([Thinking("Unsigned, from another backend."), Text("It is 4.")]),
    Message.user("And 3+3?"),
]

IMAGE_FROM_USER = [
    Message.user("What is in this picture?", [SHOT]),
]

ENDS_IN_TOOL_ROUND = [
    Message.user("Read notes.txt."),
    Message.assistant([ToolUse("call_r", "read_file", {"path": "notes.txt"})]),
    Message.tool_results([ToolResult("call_r", "line one\nline two\n")]),
]

GOLDENS: dict[str, list[Message]] = {
    "parallel_round_with_image": PARALLEL_ROUND_WITH_IMAGE,
    "error_result": ERROR_RESULT,
    "signed_thinking": SIGNED_THINKING,
    "image_from_user": IMAGE_FROM_USER,
    "ends_in_tool_round": ENDS_IN_TOOL_ROUND,
}
