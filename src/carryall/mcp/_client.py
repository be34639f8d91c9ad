"""MCP servers as carryall tools: started on first use, always stopped, never trusted.

The official SDK is asynchronous and carryall's tools are called from
worker threads, so one event loop runs in a daemon thread of its own and
every server lives in one task on it: the SDK's context managers (the
process, the session) are entered and left in that task, as anyio's cancel
scopes require. A tool call is a coroutine handed to that loop and waited
for with a deadline; whatever goes wrong (the server exits, hangs, or
sends what the SDK cannot read) comes back as an error result the model
reads, and the next call to that server starts it afresh.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import hashlib
import os
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TextIO

import httpx2
import msgspec
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.session import ClientRequestContext
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError as SdkError

from carryall import __version__
from carryall.config import McpServer
from carryall.errors import CarryallError, McpError, ToolError
from carryall.mcp._host import (
    NOT_INTERACTIVE,
    Asker,
    ElicitAnswer,
    Elicitation,
    McpNotice,
    answer_problem,
    sampling_messages,
)
from carryall.mcp._results import resource_output, result_output
from carryall.providers import Request
from carryall.tools import Tool, ToolOutput

if TYPE_CHECKING:
    from carryall.transport import Backend

__all__ = [
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_START_TIMEOUT",
    "READ_RESOURCE_TOOL",
    "STDERR_TAIL_BYTES",
    "McpToolbox",
    "ServerTools",
    "inherited_env",
    "tool_name",
    "unique_tool_name",
]

DEFAULT_CALL_TIMEOUT: Final = 60.0
"""Seconds one MCP tool call may take unless the server's `timeout` says otherwise."""

DEFAULT_START_TIMEOUT: Final = 30.0
"""Seconds a server has to start, answer `initialize` and list its tools."""

READ_RESOURCE_TOOL: Final = "mcp_read_resource"
"""The tool through which a model reads a resource a server linked to (`resources/read`)."""

STDERR_TAIL_BYTES: Final = 8192
"""The bytes of a server's stderr kept (its last ones), to name why it failed."""

_INHERITED_PREFIX: Final = "CARRYALL_"

_POLL: Final = 0.25
"""Seconds between looks at a call under way: whether its time runs, or a person is asked."""

_SEPARATOR: Final = "__"
_UNSAFE: Final = re.compile(r"[^A-Za-z0-9_-]")
_MAX_NAME: Final = 64


def tool_name(server: str, tool: str) -> str:
    """The carryall name of MCP tool `tool` of server `server`: `server__tool`.

    Every MCP tool is prefixed with its server's name, so two servers' tools
    and the built-in ones never collide (a name still taken, after the
    replacement below, gets its position appended). A character no backend accepts in
    a name becomes `_`; a name over 64 characters keeps its first 55 and a
    hash of the whole, so it stays unique and stable.
    """
    name = _UNSAFE.sub("_", f"{server}{_SEPARATOR}{tool}")
    if len(name) <= _MAX_NAME:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[: _MAX_NAME - 9]}_{digest}"


def unique_tool_name(server: str, tool: str, taken: set[str] | frozenset[str]) -> str:
    """`tool_name(server, tool)`, or the first of its `_2`, `_3`, ... forms that is not `taken`.

    Two tools can share a name once made safe (`a.b` and `a_b`), and a
    suffixed form can itself be a tool's own name (`a_b_2`), so the suffix
    is counted up until the name is free rather than computed once.
    """
    name = tool_name(server, tool)
    suffix = 2
    while name in taken:
        name = tool_name(server, f"{tool}_{suffix}")
        suffix += 1
    return name


def inherited_env(server: McpServer) -> dict[str, str]:
    """A stdio server's variables over the SDK's minimal set: carryall's own, then its `env`.

    The SDK passes a server only `PATH`, `HOME` and a few more, so a
    `carryall mcp serve` started as a server would otherwise lose
    `CARRYALL_HOME` and `CARRYALL_STORE` and read another store.
    """
    own = {k: v for k, v in os.environ.items() if k.startswith(_INHERITED_PREFIX)}
    return own | server.env


class ServerTools(msgspec.Struct, frozen=True):
    """What starting one server gave: its tools (carryall names), or the one reason it failed."""

    server: str
    tools: tuple[Tool, ...] = ()
    error: str | None = None


class McpToolbox:
    """The tools of a set of MCP servers, for an `Agent`; a context manager that stops them.

    `start()` starts every server (concurrently) and lists its tools; a server
    that fails is reported in its `ServerTools.error` and left out, so one
    broken entry does not stop a run. `close()` stops every server; it runs
    on leaving the `with`, and also on interpreter exit.

    What a server asks back: `roots` are the folders it is told it may work
    in (the workspace); `asker` puts its questions (elicitation) to a person,
    and without one they are declined with `NOT_INTERACTIVE`; `sampler` is
    the backend a server's completion requests go to, for a server whose
    entry allows it (`sampling`, within `samplingTokens`); `on_notice` is
    given its progress and log notifications. Each may be set after
    construction, before `start()`.
    """

    def __init__(
        self,
        servers: Mapping[str, McpServer],
        *,
        start_timeout: float = DEFAULT_START_TIMEOUT,
        reserved: Iterable[str] = (),
        roots: Sequence[str | Path] = (),
        asker: Asker | None = None,
        sampler: Backend | None = None,
        on_notice: Callable[[McpNotice], None] | None = None,
    ) -> None:
        self.servers = dict(servers)
        self.start_timeout = start_timeout
        self.roots = [Path(root) for root in roots]
        self.asker = asker
        self.sampler = sampler
        self.on_notice = on_notice
        self.sampled: dict[str, int] = {}
        """Output tokens each server's completions have used so far."""
        self._reserved = frozenset(reserved)
        self._taken = set(self._reserved)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._connections: dict[str, _Connection] = {}
        self._lock = threading.Lock()
        self.results: list[ServerTools] = []
        self.reader: Tool | None = None
        """The `mcp_read_resource` tool, when a started server offers resources."""

    def __enter__(self) -> McpToolbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def tools(self) -> list[Tool]:
        """Every started server's tools, in config order, then the resource reader if any."""
        made = [t for result in self.results for t in result.tools]
        return made if self.reader is None else [*made, self.reader]

    def start(self) -> list[ServerTools]:
        """Start every configured server and list its tools; one `ServerTools` per server.

        Called again (after `close`, or after a start that was interrupted),
        it starts them afresh under the same names.
        """
        loop = self._running_loop()
        self._taken = set(self._reserved)
        futures = {
            name: asyncio.run_coroutine_threadsafe(self._start_one(name, server), loop)
            for name, server in self.servers.items()
        }
        self.results = []
        for name, future in futures.items():
            try:
                specs = future.result(timeout=self.start_timeout + 5)
            except concurrent.futures.TimeoutError:
                future.cancel()
                self.results.append(
                    ServerTools(name, error=f"did not start within {self.start_timeout:g}s")
                )
            except Exception as exc:
                self.results.append(ServerTools(name, error=_reason(exc)))
            else:
                self.results.append(ServerTools(name, self._named(name, specs)))
        self.reader = self._reader()
        return self.results

    def update(self, tools: dict[str, Tool]) -> bool:
        """Re-list the tools of every server that said its list changed, in `tools` too.

        `tools` is the agent's table (`Agent.tools`): a changed server's old
        tools leave it and its new ones join, so the next request offers
        what the server offers now. Called from the thread that runs the
        agent, before each request. True when anything changed.
        """
        changed = [name for name, c in self._connections.items() if c.changed]
        if not changed:
            return False
        loop = self._running_loop()
        for name in changed:
            self._connections[name].changed = False
            at = next(i for i, r in enumerate(self.results) if r.server == name)
            old = self.results[at].tools
            for gone in old:
                self._taken.discard(gone.name)
                tools.pop(gone.name, None)
            future = asyncio.run_coroutine_threadsafe(self._listed(name), loop)
            try:
                specs = future.result(timeout=self.start_timeout + 5)
            except Exception as exc:
                future.cancel()
                self.results[at] = ServerTools(name, error=f"re-listing its tools: {_reason(exc)}")
                continue
            new = self._named(name, specs)
            self.results[at] = ServerTools(name, new)
            tools.update((t.name, t) for t in new)
        return True

    def stderr_tail(self, server: str) -> str:
        """The last lines server `server` wrote on stderr (a bounded tail); empty when none."""
        connection = self._connections.get(server)
        return "" if connection is None else connection.stderr_tail()

    def close(self) -> None:
        """Stop every server and the loop; safe to call twice."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self._stop_all(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)
        self._loop = self._thread = None

    # -- inside --------------------------------------------------------------

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="carryall-mcp", daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    async def _start_one(self, name: str, server: McpServer) -> list[types.Tool]:
        connection = _Connection(name, server, self)
        self._connections[name] = connection
        await asyncio.wait_for(connection.open(), self.start_timeout)
        return await self._listed(name)

    async def _listed(self, name: str) -> list[types.Tool]:
        return await asyncio.wait_for(self._connections[name].list_tools(), self.start_timeout)

    def _named(self, server: str, specs: list[types.Tool]) -> tuple[Tool, ...]:
        """`server`'s tools under names no other tool has, given in the caller's thread.

        Servers start concurrently and finish in any order; naming them here,
        in config order, gives a colliding name the same suffix every run.
        """
        made: list[Tool] = []
        for spec in specs:
            carryall_name = unique_tool_name(server, spec.name, self._taken)
            self._taken.add(carryall_name)
            made.append(self._tool(server, spec, carryall_name))
        return tuple(made)

    def _reader(self) -> Tool | None:
        """The tool that reads a linked resource, over the started servers that offer resources."""
        servers = sorted(
            r.server
            for r in self.results
            if r.error is None and self._connections[r.server].offers_resources
        )
        if not servers:
            return None
        name = READ_RESOURCE_TOOL
        suffix = 2
        while name in self._taken:
            name = f"{READ_RESOURCE_TOOL}_{suffix}"
            suffix += 1
        self._taken.add(name)
        schema = {
            "type": "object",
            "properties": {
                "server": {
                    "type": "string",
                    "enum": servers,
                    "description": "The MCP server the link came from.",
                },
                "uri": {"type": "string", "description": "The resource's URI, as linked."},
            },
            "required": ["server", "uri"],
        }

        def read(server: str, uri: str) -> ToolOutput:
            return self._read(server, uri)

        description = (
            "Read a resource an MCP tool result linked to ([resource link ...] lines): text "
            "comes back as text, an image or a PDF after the results. Same size and type limits "
            "as attachments."
        )
        return Tool(name, description, schema, read)

    def _tool(self, server: str, spec: types.Tool, carryall_name: str) -> Tool:
        mcp_name = spec.name
        schema = dict(spec.input_schema)
        schema.pop("$schema", None)  # a draft marker, not a constraint; some wires refuse it
        if schema.get("type") != "object":
            schema = {"type": "object", "properties": {}}

        output_schema = spec.output_schema

        def call(**arguments: Any) -> ToolOutput:
            return self._call(server, mcp_name, arguments, output_schema)

        description = spec.description or spec.title or mcp_name
        return Tool(carryall_name, description, schema, call)

    def _call(
        self,
        server: str,
        tool: str,
        arguments: dict[str, Any],
        output_schema: dict[str, Any] | None = None,
    ) -> ToolOutput:
        connection = self._connections.get(server)
        if connection is None:
            raise ToolError(f"MCP server {server!r} is not started")
        timeout = connection.server.timeout or DEFAULT_CALL_TIMEOUT
        sent = threading.Event()
        future = asyncio.run_coroutine_threadsafe(
            connection.call(tool, arguments, sent), self._running_loop()
        )
        label = f"{server}/{tool}"
        # The call's time runs only while the request is out and no person is
        # being asked a question for it: a server waiting on an answer is not
        # one that hangs. Starting the server again first has its own time.
        left, starting = timeout, self.start_timeout
        try:
            while True:
                waited_from = time.monotonic()
                try:
                    result = future.result(timeout=max(0.0, min(_POLL, left, starting)))
                    break
                except concurrent.futures.TimeoutError:
                    spent = time.monotonic() - waited_from
                    if not sent.is_set():
                        starting -= spent
                    elif not connection.asking:
                        left -= spent
                    if left <= 0 or starting <= 0:
                        future.cancel()
                        what = "answer" if left <= 0 else "start again"
                        limit = timeout if left <= 0 else self.start_timeout
                        raise ToolError(
                            f"MCP tool {label} did not {what} within {limit:g}s"
                        ) from None
        except SdkError as exc:
            raise ToolError(f"MCP tool {label}: {_reason(exc)}") from None
        except McpError as exc:
            raise ToolError(f"MCP tool {label}: {exc}") from None
        output = result_output(result, label, output_schema)
        if connection.notes:
            # A completion the server had the model make is part of what this call did.
            notes, connection.notes = connection.notes, []
            text = "\n".join([output.text, *notes]) if output.text else "\n".join(notes)
            output = msgspec.structs.replace(output, text=text)
        return output

    def _read(self, server: str, uri: str) -> ToolOutput:
        connection = self._connections.get(server)
        if connection is None or not connection.offers_resources:
            raise ToolError(f"MCP server {server!r} is not started or offers no resources")
        timeout = connection.server.timeout or DEFAULT_CALL_TIMEOUT
        future = asyncio.run_coroutine_threadsafe(
            connection.read_resource(uri, timeout), self._running_loop()
        )
        label = f"{server} {uri}"
        try:
            result = future.result(timeout=timeout + 5)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise ToolError(f"reading {label} did not finish within {timeout:g}s") from None
        except (SdkError, McpError) as exc:
            raise ToolError(f"reading {label}: {_reason(exc)}") from None
        return resource_output(result, label)

    async def _stop_all(self) -> None:
        await asyncio.gather(
            *(c.stop() for c in self._connections.values()), return_exceptions=True
        )


class _Connection:
    """One server: its task on the loop, which holds the SDK's contexts open until stopped."""

    def __init__(self, name: str, server: McpServer, box: McpToolbox) -> None:
        self.name = name
        self.server = server
        self._box = box
        self.asking = 0
        """Questions of this server now before a person: their time is not the call's."""
        self.notes: list[str] = []
        """Lines for the result of the call under way (a completion the server had made)."""
        self._session: ClientSession | None = None
        self._task: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None
        self._stderr: _StderrTail | None = None
        self.changed = False
        """The server said its tool list changed (`notifications/tools/list_changed`)."""
        self.offers_resources = False
        """The server declared the resources capability when it started."""

    async def open(self) -> None:
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._stop = asyncio.Event()
        self._task = asyncio.create_task(self._hold(ready, self._stop))
        try:
            await ready
        except BaseException:
            await self.stop()
            raise

    async def list_tools(self) -> list[types.Tool]:
        session = await self._live()
        found: list[types.Tool] = []
        cursor: str | None = None
        while True:
            asked = None if cursor is None else types.PaginatedRequestParams(cursor=cursor)
            page = await session.list_tools(params=asked)
            found.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                return found

    async def call(
        self, tool: str, arguments: dict[str, Any], sent: threading.Event
    ) -> types.CallToolResult:
        """`tools/call`, for as long as the caller waits (`McpToolbox._call` keeps the time).

        `sent` is set once the server is up and the request goes out.
        """
        session = await self._live()
        sent.set()
        try:
            return await session.call_tool(tool, arguments, progress_callback=self._progress)
        except SdkError as exc:
            if exc.error.code != types.CONNECTION_CLOSED:
                raise  # the server answered with an error, or did not in time
            gone = McpError(self._gone(exc, "the server exited during the call"))
            await self.stop()
            raise gone from None
        except Exception as exc:
            # Anything but the SDK's own error means the session is broken.
            gone = McpError(self._gone(exc))
            await self.stop()
            raise gone from None
        finally:
            if self._task is not None and self._task.done():
                await self.stop()

    async def read_resource(self, uri: str, timeout: float) -> types.ReadResourceResult:
        """`resources/read` of `uri`; the SDK's errors as they come, a broken session as ours."""
        session = await self._live()
        try:
            return await asyncio.wait_for(session.read_resource(uri), timeout)
        except SdkError:
            raise
        except TimeoutError:
            raise McpError(f"no answer within {timeout:g}s") from None
        except Exception as exc:
            gone = McpError(self._gone(exc))
            await self.stop()
            raise gone from None

    async def stop(self) -> None:
        task, stop = self._task, self._stop
        self._task = self._stop = None
        self._session = None
        if stop is not None:
            stop.set()
        if task is not None:
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(task, 8)

    async def _live(self) -> ClientSession:
        if self._session is None or self._task is None or self._task.done():
            await self.stop()
            await self.open()
        assert self._session is not None  # open() sets it or raises
        return self._session

    async def _hold(self, ready: asyncio.Future[None], stop: asyncio.Event) -> None:
        try:
            async with contextlib.AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(self._transport())
                session = await stack.enter_async_context(
                    ClientSession(
                        read,
                        write,
                        message_handler=self._message,
                        elicitation_callback=self._elicit,
                        sampling_callback=self._sample,
                        list_roots_callback=self._roots if self._box.roots else None,
                        logging_callback=self._log,
                        client_info=types.Implementation(name="carryall", version=__version__),
                    )
                )
                await _unless_stopped(session.initialize(), stop)
                capabilities = session.server_capabilities
                self.offers_resources = bool(capabilities and capabilities.resources)
                self._session = session
                ready.set_result(None)
                await stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(McpError(self._gone(exc)))
            if not isinstance(exc, Exception):
                raise

    async def _message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.changed = True

    def _notice(self, kind: Any, text: str) -> None:
        on_notice = self._box.on_notice
        if on_notice is not None:
            with contextlib.suppress(Exception):  # a display's failure is not the server's
                on_notice(McpNotice(self.name, kind, text))

    async def _progress(self, progress: float, total: float | None, message: str | None) -> None:
        done = f"{progress:g}/{total:g}" if total else f"{progress:g}"
        self._notice("progress", f"{done} {message or ''}".strip())

    async def _log(self, params: types.LoggingMessageNotificationParams) -> None:
        data = params.data if isinstance(params.data, str) else repr(params.data)
        self._notice("log", f"{params.level}: {data}"[:500])

    async def _roots(self, context: ClientRequestContext) -> types.ListRootsResult:
        return types.ListRootsResult(
            roots=[
                types.Root.model_validate(
                    {"uri": root.resolve().as_uri(), "name": root.resolve().name}
                )
                for root in self._box.roots
            ]
        )

    async def _elicit(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        if not isinstance(params, types.ElicitRequestFormParams):
            return _declined("carryall answers form questions only, not links to open")
        asker = self._box.asker
        if asker is None:
            return _declined(NOT_INTERACTIVE)
        question = Elicitation(self.name, params.message, dict(params.requested_schema))
        self.asking += 1
        try:
            answer: ElicitAnswer = await asyncio.to_thread(asker, question)
        except Exception as exc:
            return _declined(f"declined by carryall: asking failed ({_reason(exc)})")
        finally:
            self.asking -= 1
        if answer.action != "accept":
            meta = {"carryall/reason": answer.reason} if answer.reason else None
            return types.ElicitResult(action=answer.action, _meta=meta)
        content = answer.content or {}
        problem = answer_problem(question.schema, content)
        if problem is not None:
            return _declined(f"declined by carryall: the answer does not fit ({problem})")
        return types.ElicitResult(action="accept", content=content)

    async def _sample(
        self, context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.ErrorData:
        box, server = self._box, self.server
        if not server.sampling:
            return _refused(
                f"carryall does not let MCP server {self.name!r} use its model: "
                'set "sampling": true on its entry to allow it'
            )
        if box.sampler is None:
            return _refused("carryall has no model to sample with in this run")
        used = box.sampled.get(self.name, 0)
        left = server.sampling_tokens - used
        if left <= 0:
            return _refused(
                f"MCP server {self.name!r} has used its {server.sampling_tokens}-token "
                "sampling budget for this run"
            )
        try:
            messages = sampling_messages(list(params.messages))
        except ValueError as exc:
            return _refused(str(exc))
        backend = box.sampler
        request = Request(
            model="",
            messages=tuple(messages),
            system=params.system_prompt,
            max_tokens=max(1, min(params.max_tokens, left)),
        )
        try:
            response = await asyncio.to_thread(backend.complete, request)
        except CarryallError as exc:
            return _refused(f"the model did not answer: {exc}")
        spent = response.usage.output_tokens or request.max_tokens
        box.sampled[self.name] = used + spent
        self.notes.append(
            f"[sampling: MCP server {self.name!r} had the model ({backend.name}/{backend.model}) "
            f"complete a request: {spent} tokens, {used + spent} of its "
            f"{server.sampling_tokens}-token budget]"
        )
        stop = "maxTokens" if response.stop_reason == "max_tokens" else "endTurn"
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=response.message.text()),
            model=response.model or backend.model,
            stop_reason=stop,
        )

    def _transport(self) -> contextlib.AbstractAsyncContextManager[Any]:
        server = self.server
        if server.transport == "http":
            assert server.url is not None  # checked by McpServer.problem
            return _http(server.url, server.headers)
        assert server.command is not None  # checked by McpServer.problem
        self._stderr = _StderrTail()
        params = StdioServerParameters(
            command=server.command, args=server.args, env=inherited_env(server), cwd=server.cwd
        )
        return self._stderr.around(stdio_client(params, errlog=self._stderr.writer))

    def _gone(self, exc: BaseException, detail: str | None = None) -> str:
        detail = detail or _reason(exc)
        tail = self.stderr_tail()
        return f"{detail}; its last output: {tail}" if tail else detail

    def stderr_tail(self) -> str:
        """The server's last lines on stderr, joined on one line; empty when there are none."""
        return "" if self._stderr is None else self._stderr.summary()


class _StderrTail:
    """A stdio server's stderr read from a pipe as it comes, only its last bytes kept.

    A server that writes without pause would grow a file without limit; a
    pipe that is never read would block it. A daemon thread reads the pipe
    until the server closes it and keeps the last `STDERR_TAIL_BYTES`.
    """

    def __init__(self) -> None:
        read_fd, write_fd = os.pipe()
        self._read_fd = read_fd
        self.writer: TextIO = os.fdopen(write_fd, "w", encoding="utf-8", errors="replace")
        self._chunks: deque[bytes] = deque()
        self._size = 0
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._drain, name="carryall-mcp-stderr", daemon=True)
        self._thread.start()

    @contextlib.asynccontextmanager
    async def around(self, transport: contextlib.AbstractAsyncContextManager[Any]) -> Any:
        """`transport` entered, the parent's copy of the write end closed once it has started.

        Only the server then holds the write end, so the reader sees the
        end of the pipe when the server exits.
        """
        try:
            async with transport as streams:
                self.writer.close()
                yield streams
        finally:
            self.writer.close()

    def _drain(self) -> None:
        try:
            while chunk := os.read(self._read_fd, 65536):
                with self._lock:
                    self._chunks.append(chunk)
                    self._size += len(chunk)
                    while self._size - len(self._chunks[0]) >= STDERR_TAIL_BYTES:
                        self._size -= len(self._chunks.popleft())
        except OSError:
            pass
        finally:
            os.close(self._read_fd)

    def text(self) -> str:
        """The kept bytes, at most `STDERR_TAIL_BYTES`, decoded.

        A server that has just exited may still have bytes in the pipe, so
        the reader is given a moment to reach its end first.
        """
        self._thread.join(timeout=0.5)
        with self._lock:
            kept = b"".join(self._chunks)[-STDERR_TAIL_BYTES:]
        return kept.decode("utf-8", errors="replace")

    def summary(self) -> str:
        """The last three non-empty lines on one line, at most 300 characters."""
        lines = [line.strip() for line in self.text().splitlines() if line.strip()]
        return " | ".join(lines[-3:])[-300:]


async def _unless_stopped(work: Coroutine[Any, Any, object], stop: asyncio.Event) -> None:
    """Await `work`, or give up when `stop` is set first, by raising rather than being cancelled.

    A cancelled task skips the SDK's stdio shutdown (close stdin, wait, then
    SIGTERM and SIGKILL) and waits on the process forever; an exception
    leaves its contexts the ordinary way, so a server stopped while it is
    still starting is stopped for real.
    """
    doing = asyncio.ensure_future(work)
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({doing, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
    if not doing.done():
        doing.cancel()
        with contextlib.suppress(BaseException):
            await doing
        raise McpError("stopped before it had started")
    doing.result()


@contextlib.asynccontextmanager
async def _http(url: str, headers: dict[str, str]) -> Any:
    # The SDK's own timeouts (a long read, since a server may hold a stream open).
    timeout = httpx2.Timeout(30, read=300)
    async with (
        httpx2.AsyncClient(headers=headers or None, timeout=timeout) as client,
        streamable_http_client(url, http_client=client) as (read, write),
    ):
        yield read, write


def _declined(reason: str) -> types.ElicitResult:
    """A declined question, with why in `_meta` for the server to read or log."""
    return types.ElicitResult(action="decline", _meta={"carryall/reason": reason})


def _refused(reason: str) -> types.ErrorData:
    """A refused server request: the error the server's call gets back, with why."""
    return types.ErrorData(code=types.INVALID_REQUEST, message=reason)


def _reason(exc: BaseException) -> str:
    """One line for what went wrong, unwrapping the task groups anyio raises."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, FileNotFoundError):
        return f"cannot start it: {exc.strerror}: {exc.filename}"
    detail = str(exc).strip()
    if isinstance(exc, SdkError | McpError):
        return detail or type(exc).__name__
    return f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__
