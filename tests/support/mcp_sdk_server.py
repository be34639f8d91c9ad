"""A scripted MCP test server on the official `mcp` SDK (2.x, `MCPServer`), over stdio.

Each tool exercises one part of the protocol carryall's client must speak:
names that collide once made safe, a stderr flood before a crash, the
environment it was started with, structured content with an output
schema, resource links to resources it serves, and the requests a server
sends back to its client (elicitation, sampling, roots) with progress and
log notifications on the way. Run it as `python tests/support/mcp_sdk_server.py`.
"""

from __future__ import annotations

import base64
import json
import os
import sys

from mcp import types
from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel

server = MCPServer("sdk-test", log_level="WARNING")

PNG_1X1 = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
"""A one-pixel PNG, served as `test://pictures/dot.png`."""

README = "The notes say: the launch code is PINEAPPLE-42."
"""The text of `test://notes/readme`."""


@server.tool(name="a_b_2")
def a_b_2() -> str:
    """Named like the suffixed form of the next two."""
    return "a_b_2"


@server.tool(name="a_b")
def a_b() -> str:
    """Named `a_b`."""
    return "a_b"


@server.tool(name="a.b")
def a_dot_b() -> str:
    """Named `a.b`, which is `a_b` once made safe for every backend."""
    return "a.b"


@server.tool()
def flood(lines: int = 200_000) -> str:
    """Writes `lines` lines of noise on stderr, then its last words, then exits."""
    noise = "noise " + "x" * 90 + "\n"
    for _ in range(lines):
        sys.stderr.write(noise)
    sys.stderr.write("sdk-test: the last words before the crash\n")
    sys.stderr.flush()
    os._exit(4)


@server.tool()
def environment() -> str:
    """The CARRYALL_* and SDK_TEST_* variables this process was started with, as JSON."""
    return json.dumps(
        {k: v for k, v in os.environ.items() if k.startswith(("CARRYALL_", "SDK_TEST_"))}
    )


class Weather(BaseModel):
    """What `weather` answers: the schema's field order is city, temperature, conditions."""

    city: str
    temperature: float
    conditions: str


@server.tool()
def weather(city: str) -> Weather:
    """The weather in `city`, as structured content."""
    return Weather(city=city, temperature=21.5, conditions="clear")


@server.tool(structured_output=False)
def links() -> list[types.ContentBlock]:
    """Links to resources this server serves, for the model to read."""
    return [
        types.TextContent(type="text", text="three links:"),
        types.ResourceLink(
            type="resource_link", uri="test://notes/readme", name="readme", mime_type="text/plain"
        ),
        types.ResourceLink(
            type="resource_link",
            uri="test://pictures/dot.png",
            name="dot",
            mime_type="image/png",
        ),
        types.ResourceLink(
            type="resource_link",
            uri="test://archive/data.bin",
            name="data",
            mime_type="application/octet-stream",
        ),
    ]


@server.resource("test://notes/readme", mime_type="text/plain")
def readme() -> str:
    """A text resource."""
    return README


@server.resource("test://pictures/dot.png", mime_type="image/png")
def dot() -> bytes:
    """An image resource."""
    return PNG_1X1


@server.resource("test://archive/data.bin", mime_type="application/octet-stream")
def data() -> bytes:
    """Bytes of a type no attachment takes."""
    return b"\x00\x01" * 64


@server.resource("test://notes/huge", mime_type="text/plain")
def huge() -> str:
    """Text over any attachment's size limit."""
    return "y" * (6 * 1024 * 1024)


class Contact(BaseModel):
    """What `ask` asks the person for."""

    name: str
    age: int


@server.tool()
async def ask(ctx: Context) -> str:  # type: ignore[type-arg]
    """Asks the person for their name and age (an elicitation) and says what came back."""
    answer = await ctx.elicit("Who are you?", Contact)
    if answer.action == "accept":
        return f"accepted: {answer.data.name} is {answer.data.age}"
    return f"{answer.action}"


@server.tool()
async def sample(prompt: str, ctx: Context, max_tokens: int = 16) -> str:  # type: ignore[type-arg]
    """Asks the client's model to complete `prompt` (a sampling request)."""
    result = await ctx.session.create_message(
        [types.SamplingMessage(role="user", content=types.TextContent(type="text", text=prompt))],
        max_tokens=max_tokens,
    )
    content = result.content
    text = content.text if isinstance(content, types.TextContent) else repr(content)
    return f"sampled by {result.model}: {text}"


@server.tool()
async def roots(ctx: Context) -> str:  # type: ignore[type-arg]
    """The roots the client offers, one URI a line."""
    listed = await ctx.session.list_roots()
    return "\n".join(str(root.uri) for root in listed.roots)


@server.tool()
async def slow(ctx: Context, steps: int = 3) -> str:  # type: ignore[type-arg]
    """Reports progress for each of `steps` steps, and logs one line."""
    await ctx.session.send_log_message("info", "slow: starting", logger="sdk-test")
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps, f"step {step} of {steps}")
    return f"done after {steps} steps"


if __name__ == "__main__":
    server.run("stdio")
