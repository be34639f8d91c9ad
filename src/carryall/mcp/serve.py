"""`carryall mcp serve`: the session store, read-only, as an MCP server over stdio or HTTP.

Any MCP client (Claude Code, Cursor, the SDK's own) can then read what
carryall recorded:

- tools: `recall` (ranked hits with snippets), `sessions_list`,
  `session_show` (a session as text, images as placeholders, or one
  message's images as MCP image content) and `session_usage` (what each
  request of a session used and cost, as JSON);
- resources: every session as `carryall://sessions/ID`, read as its
  Markdown transcript and its JSON export (both with its usage) and each
  image as image content;
  the template `carryall://search/{query}` for a search as Markdown;
- prompts: `continue_session` and `summarise_session`, a session's
  transcript with the request to go on from it or to summarise it.

Nothing here writes, and a session is reached only by an id the store's
own check accepts, so no path outside the store can be named through it.
Over HTTP (streamable HTTP) a bearer token is required when the server is
bound beyond loopback, since anyone who can reach the port could otherwise
read every session.
"""

from __future__ import annotations

import base64
import contextlib
import hmac
import ipaddress
import json
from collections.abc import Awaitable, Callable, Iterable, Iterator, MutableMapping
from typing import Any, Final
from urllib.parse import unquote

from mcp import types
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from mcp.shared.exceptions import MCPError

from carryall import __version__
from carryall.blocks import Image
from carryall.errors import CarryallError
from carryall.sessions import (
    AnySession,
    AnyStore,
    render_message_text,
    render_text,
)
from carryall.sessions.render import render_session, usage_dict

__all__ = [
    "SEARCH_URI",
    "SERVER_NAME",
    "SESSION_URI",
    "bind_problem",
    "build_server",
    "http_app",
    "is_loopback",
    "serve",
    "serve_http",
]

SERVER_NAME: Final = "carryall-sessions"

SESSION_URI: Final = "carryall://sessions/"
"""A session's resource is this followed by its id."""

SEARCH_URI: Final = "carryall://search/"
"""The search template's prefix: `carryall://search/{query}`."""

_MAX_LIMIT: Final = 200

_INSTRUCTIONS: Final = (
    "Read-only access to the sessions carryall recorded: search them with recall or the "
    "carryall://search/{query} resource, list them with sessions_list or as resources, read "
    "one with session_show or as carryall://sessions/ID (Markdown, JSON and its images), and "
    "use the continue_session and summarise_session prompts to carry one on."
)

_CONTINUE: Final = (
    "\n\nAbove is a recorded conversation. Continue it from where it stopped: pick up the "
    "last open request and carry on with it."
)
_SUMMARISE: Final = (
    "\n\nSummarise the conversation above: what was asked, what was done (tools called "
    "and what they found), and what is still open."
)

_UNAUTHORIZED: Final = (
    b'{"jsonrpc": "2.0", "id": null, "error": {"code": -32001, "message": '
    b'"unauthorized: this server needs its bearer token (Authorization: Bearer TOKEN)"}}'
)

ASGIApp = Callable[
    [MutableMapping[str, Any], Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]],
    Awaitable[None],
]


class _SessionServer(MCPServer):
    """`MCPServer` whose resources are the store's sessions, listed and read from the store.

    The SDK's resources are fixed at registration; a store's sessions come
    and go, so the two methods that list and read them ask the store each time.
    """

    def __init__(self, store: AnyStore) -> None:
        super().__init__(
            SERVER_NAME, version=__version__, instructions=_INSTRUCTIONS, log_level="WARNING"
        )
        self.store = store

    async def list_resources(self) -> list[types.Resource]:
        infos = self.store.list(on_error=lambda exc: None)[:_MAX_LIMIT]
        return [
            types.Resource(
                uri=SESSION_URI + info.meta.id,
                name=info.meta.id,
                title=info.meta.title or None,
                description=(
                    f"{info.meta.backend}/{info.meta.model}, {info.turns} turns, "
                    f"created {info.meta.created.isoformat()}"
                ),
                mime_type="text/markdown",
            )
            for info in infos
        ]

    async def read_resource(
        self, uri: Any, context: Context[Any, Any] | None = None
    ) -> Iterable[ReadResourceContents] | types.InputRequiredResult:
        text = str(uri)
        if text.startswith(SESSION_URI):
            return session_contents(_opened(self.store, unquote(text[len(SESSION_URI) :])))
        if text.startswith(SEARCH_URI):
            query = unquote(text[len(SEARCH_URI) :])
            return [ReadResourceContents(search_markdown(self.store, query), "text/markdown")]
        raise ResourceNotFoundError(f"no resource {text}: carryall serves {SESSION_URI}ID")


def build_server(store: AnyStore) -> MCPServer:
    """The MCP server over `store`: its tools, resources and prompts registered."""
    server = _SessionServer(store)

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
            + _plain(hit.snippet)
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
            out.extend(_image_content(image) for image in chosen.images() if image.data)
        return out

    @server.tool()
    def session_usage(session_id: str) -> str:
        """What each request of a session used and cost, and the total, as JSON.

        Tokens in one meaning on every wire (input without the cache, whose
        reads and writes are counted apart; output with reasoning), the
        wire's own figures beside them, and each request priced when sent
        ("—" where no price is known, free for a local model).

        Args:
            session_id: The session's id or a unique prefix (see sessions_list).
        """
        with _answered():
            opened = store.open(session_id)
            usage = opened.usage()
        return json.dumps({"session": opened.id, **usage_dict(usage)}, ensure_ascii=False)

    # Registered for the templates list a client shows; `_SessionServer.read_resource`
    # answers the reads, with every content a session has.
    @server.resource(SESSION_URI + "{session_id}", mime_type="text/markdown")
    def session_resource(session_id: str) -> str:
        """A recorded session: its Markdown transcript, its JSON export and its images."""
        return render_session("markdown", _opened(store, session_id))

    @server.resource(SEARCH_URI + "{query}", mime_type="text/markdown")
    def search_resource(query: str) -> str:
        """The messages of every session that match `query`, best first, as Markdown."""
        return search_markdown(store, query)

    @server.prompt(title="Continue this session")
    def continue_session(session_id: str) -> str:
        """A recorded session's transcript, and the request to carry on where it stopped."""
        return _prompt_transcript(store, session_id) + _CONTINUE

    @server.prompt(title="Summarise this session")
    def summarise_session(session_id: str) -> str:
        """A recorded session's transcript, and the request to summarise it."""
        return _prompt_transcript(store, session_id) + _SUMMARISE

    return server


def session_contents(session: AnySession) -> list[ReadResourceContents]:
    """A session as resource contents: Markdown, then JSON, then each image as its bytes."""
    history = session.messages()
    contents = [
        ReadResourceContents(render_session("markdown", session), "text/markdown"),
        ReadResourceContents(render_session("json", session), "application/json"),
    ]
    for message in history:
        contents.extend(
            ReadResourceContents(base64.b64decode(image.data), image.media_type)
            for image in message.images()
            if image.data
        )
    return contents


def search_markdown(store: AnyStore, query: str) -> str:
    """The hits for `query` across every session as a Markdown list, linked to their sessions."""
    try:
        hits = store.recall.search(query, limit=_MAX_LIMIT)
    except CarryallError as exc:
        raise ResourceError(str(exc)) from None
    lines = [f"# Sessions matching {query!r}", ""]
    if not hits:
        lines.append("No message matches.")
    lines.extend(
        f"- [{hit.session} #{hit.message}]({SESSION_URI}{hit.session}) {hit.role} "
        f"{hit.time.isoformat()}: {_plain(hit.snippet)}"
        for hit in hits
    )
    return "\n".join(lines) + "\n"


def is_loopback(host: str) -> bool:
    """Whether `host` is reachable only from this machine (`localhost`, 127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def bind_problem(host: str, token: str | None) -> str | None:
    """Why serving on `host` with `token` is refused, or None: beyond loopback needs a token."""
    if token is None and not is_loopback(host):
        return (
            f"serving sessions on {host} reaches beyond this machine: give a bearer token "
            "(--token, or the CARRYALL_MCP_TOKEN variable) that clients must send"
        )
    if token is not None and not token.strip():
        return "the bearer token is empty"
    return None


def http_app(store: AnyStore, host: str, token: str | None) -> ASGIApp:
    """The streamable HTTP app at `/mcp`, behind the bearer check when a token is given.

    Bound beyond loopback, a token is required: without one this is a
    `CarryallError` before anything listens.
    """
    problem = bind_problem(host, token)
    if problem is not None:
        raise CarryallError(problem)
    app: ASGIApp = build_server(store).streamable_http_app(host=host)
    return app if token is None else _bearer(app, token)


def serve(store: AnyStore) -> None:
    """Serve `store` over stdio until the client closes the connection."""
    build_server(store).run("stdio")


def serve_http(store: AnyStore, host: str, port: int, token: str | None = None) -> None:
    """Serve `store` over streamable HTTP at `http://HOST:PORT/mcp` until interrupted."""
    import uvicorn

    app = http_app(store, host, token)
    uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning")).run()


def _bearer(app: ASGIApp, token: str) -> ASGIApp:
    """`app` answering 401 to every HTTP request without `Authorization: Bearer TOKEN`."""
    expected = f"Bearer {token}".encode()

    async def guarded(
        scope: MutableMapping[str, Any],
        receive: Callable[[], Awaitable[Any]],
        send: Callable[[Any], Awaitable[None]],
    ) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            # A comparison whose time does not tell how much of the token matched.
            if not hmac.compare_digest(given, expected):
                # A JSON-RPC error, so an MCP client shows the reason, not just the status.
                body = _UNAUTHORIZED
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"www-authenticate", b"Bearer"),
                            (b"content-length", str(len(body)).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await app(scope, receive, send)

    return guarded


def _opened(store: AnyStore, session_id: str) -> AnySession:
    try:
        return store.open(session_id)
    except CarryallError as exc:
        raise ResourceNotFoundError(str(exc)) from None


def _prompt_transcript(store: AnyStore, session_id: str) -> str:
    try:
        session = store.open(session_id)
    except CarryallError as exc:
        raise MCPError(code=types.INVALID_PARAMS, message=str(exc)) from None
    # The model is asked about the conversation, not its bill: no usage here.
    return render_session("markdown", session, usage=False)


@contextlib.contextmanager
def _answered() -> Iterator[None]:
    """A carryall error as the tool error the client reads; anything else stays a crash."""
    try:
        yield
    except CarryallError as exc:
        raise ToolError(str(exc)) from None


def _plain(snippet: str) -> str:
    """A recall snippet without its match markers."""
    return snippet.replace("\x02", "").replace("\x03", "")


def _image_content(image: Image) -> types.ImageContent:
    return types.ImageContent(type="image", data=image.data, mime_type=image.media_type)


def _bounded(limit: int) -> int:
    return max(1, min(limit, _MAX_LIMIT))
