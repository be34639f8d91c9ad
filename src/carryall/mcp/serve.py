"""`carryall mcp serve`: the session store, read-only, as an MCP server over stdio.

Any MCP client (Claude Code, Cursor, the SDK's own) can then search what
carryall recorded: `recall` (ranked hits with snippets), `sessions_list`
and `session_show` (a session as text, images as placeholders, or one
message's images as MCP image content). Nothing here writes, and a session
is reached only by an id the store's own check accepts, so no path outside
the store can be named through it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Final

from mcp import types
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from carryall import __version__
from carryall.blocks import Image
from carryall.errors import CarryallError
from carryall.sessions import AnyStore, render_message_text, render_text

__all__ = ["SERVER_NAME", "build_server", "serve"]

SERVER_NAME: Final = "carryall-sessions"

_MAX_LIMIT: Final = 200


def build_server(store: AnyStore) -> MCPServer:
    """The MCP server over `store`, its three tools registered."""
    server = MCPServer(
        SERVER_NAME,
        version=__version__,
        instructions=(
            "Read-only access to the sessions carryall recorded: search them with recall, "
            "list them with sessions_list, read one with session_show."
        ),
        log_level="WARNING",
    )

    @server.tool()
    def recall(query: str, limit: int = 10, session: str | None = None) -> str:
        """Search every recorded session's messages; the best-ranked hits with snippets.

        Args:
            query: Words to find (every word must occur; no query syntax).
            limit: How many hits at most (1-200).
            session: Only this session (its id or a unique prefix).
        """
        with _answered():
            chosen = store.resolve(session) if session else None
            hits = store.recall.search(query, limit=_bounded(limit), session=chosen)
        if not hits:
            return f"no message matches {query!r}"
        return "\n".join(
            f"{hit.session} #{hit.message} {hit.role} {hit.time.isoformat()}: "
            + hit.snippet.replace("\x02", "").replace("\x03", "")
            for hit in hits
        )

    @server.tool()
    def sessions_list(limit: int = 50) -> str:
        """The recorded sessions, newest first: id, when, backend and model, turns, title.

        Args:
            limit: How many sessions at most (1-200).
        """
        infos = store.list(on_error=lambda exc: None)[: _bounded(limit)]
        if not infos:
            return "no sessions recorded"
        return "\n".join(
            f"{info.meta.id} {info.meta.created.isoformat()} "
            f"{info.meta.backend}/{info.meta.model} {info.turns} turns: {info.meta.title or ''}"
            for info in infos
        )

    @server.tool()
    def session_show(
        session_id: str, message: int | None = None, images: bool = False
    ) -> list[types.TextContent | types.ImageContent]:
        """One session as text, images shown as placeholder lines.

        Args:
            session_id: The session's id or a unique prefix (see sessions_list).
            message: Only this message (its index, from recall's `#N`).
            images: With `message`, also return that message's images as image content.
        """
        with _answered():
            opened = store.open(session_id)
            history = opened.messages()
        if message is None:
            return [types.TextContent(type="text", text=render_text(opened.meta, history))]
        if not 0 <= message < len(history):
            raise ToolError(
                f"session {opened.id} has messages 0 to {len(history) - 1}, not {message}"
            )
        chosen = history[message]
        out: list[types.TextContent | types.ImageContent] = [
            types.TextContent(type="text", text=render_message_text(message, chosen))
        ]
        if images:
            out.extend(_image_content(image) for image in chosen.images())
        return out

    return server


def serve(store: AnyStore) -> None:
    """Serve `store` over stdio until the client closes the connection."""
    build_server(store).run("stdio")


@contextlib.contextmanager
def _answered() -> Iterator[None]:
    """A carryall error as the tool error the client reads; anything else stays a crash."""
    try:
        yield
    except CarryallError as exc:
        raise ToolError(str(exc)) from None


def _image_content(image: Image) -> types.ImageContent:
    return types.ImageContent(type="image", data=image.data, mime_type=image.media_type)


def _bounded(limit: int) -> int:
    return max(1, min(limit, _MAX_LIMIT))
