"""`carryall mcp list|serve`, and the MCP servers `run` and `chat` start (`--mcp FILE`).

The servers come from the config file's `mcpServers` and from an
`mcpServers` JSON file (Claude Desktop's, Cursor's or VS Code's, unchanged);
a server named in both is the file's. The SDK is imported only when a
server is configured, so a command without MCP servers never loads it; for
`run` and `chat` a server starts only when the first request needs its tools.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from carryall._commands._output import fail, markup_safe, print_columns
from carryall._commands.sessions import StoreOption
from carryall.config import McpServer, load_config
from carryall.errors import CarryallError, McpError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from carryall.agent import Agent
    from carryall.mcp import ElicitAnswer, Elicitation, McpNotice, McpToolbox
    from carryall.tools import Tool

__all__ = [
    "McpOption",
    "ask_person",
    "attach_host",
    "mcp_servers",
    "open_toolbox",
    "register",
    "start_toolbox",
]

McpOption = Annotated[
    Path | None,
    typer.Option(
        "--mcp",
        metavar="FILE",
        help=(
            'An MCP config file ({"mcpServers": {...}}, as Claude Desktop, Cursor and VS Code '
            "write it) whose servers' tools to offer, beside the config file's mcpServers. "
            "Each tool is named SERVER__TOOL."
        ),
        show_default=False,
    ),
]

_EXTRA_LINE = "MCP needs the mcp extra: pip install 'carryall[mcp]'"


def register(app: typer.Typer) -> None:
    """Add the `mcp` command group to the `carryall` app."""
    group = typer.Typer(
        help="Tools from MCP servers, and carryall's sessions served over MCP.",
        no_args_is_help=True,
    )
    group.command("list")(list_servers)
    group.command("serve")(serve)
    app.add_typer(group, name="mcp")


def list_servers(mcp: McpOption = None) -> None:
    """Start each configured MCP server and show its tools, as the model will see them.

    A server that does not start is one `error:` line naming it and the
    reason; the exit code is then 1.

    Example: carryall mcp list --mcp ~/.cursor/mcp.json
    """
    out = Console(highlight=False)
    err = Console(stderr=True, highlight=False)
    try:
        servers = mcp_servers(mcp)
    except CarryallError as exc:
        fail(str(exc), console=err)
    if not servers:
        fail("no MCP servers configured: give --mcp FILE or mcpServers in the config", console=err)
    try:
        toolbox = _toolbox(servers, ())
    except CarryallError as exc:
        fail(str(exc), console=err)
    failed = False
    with toolbox, err.status("[dim]starting MCP servers…[/]"):
        results = toolbox.start()
    for result in results:
        if result.error is not None:
            failed = True
            where = f"MCP server {markup_safe(result.server)}"
            err.print(f"[bold red]error:[/] {where}: {markup_safe(result.error)}", soft_wrap=True)
            continue
        out.print(f"[bold]{markup_safe(result.server)}[/] ({len(result.tools)} tools)")
        rows = [(made.name, made.description.strip().split("\n", 1)[0]) for made in result.tools]
        print_columns(out, rows)
    if toolbox.reader is not None:
        summary = toolbox.reader.description.split(":", 1)[0]
        out.print("[bold]resources[/]")
        print_columns(out, [(toolbox.reader.name, summary)])
    if failed:
        raise typer.Exit(1)


def serve(
    store: StoreOption = None,
    http: Annotated[
        str | None,
        typer.Option(
            "--http",
            metavar="HOST:PORT",
            help=(
                "Serve over streamable HTTP at http://HOST:PORT/mcp instead of standard input "
                "and output. Beyond loopback (127.0.0.1, ::1, localhost) a --token is required."
            ),
            show_default=False,
        ),
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            envvar="CARRYALL_MCP_TOKEN",
            help="With --http: the bearer token every request must send (Authorization: Bearer).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Serve the session store, read-only, as an MCP server (stdio, or streamable HTTP).

    Tools: recall (search every session), sessions_list and session_show.
    Resources: each session as carryall://sessions/ID (Markdown, JSON and its
    images) and the template carryall://search/{query}. Prompts:
    continue_session and summarise_session. Add it to an MCP client as
    {"command": "carryall", "args": ["mcp", "serve"]}.

    Over HTTP: CARRYALL_MCP_TOKEN=secret carryall mcp serve --http 0.0.0.0:8765

    Example: carryall mcp serve --store ~/team/sessions
    """
    err = Console(stderr=True, highlight=False)
    try:
        from carryall.mcp.serve import bind_problem, serve_http
        from carryall.mcp.serve import serve as serve_store
    except ImportError:
        fail(_EXTRA_LINE, console=err)
    from carryall.sessions import open_store

    try:
        address = None if http is None else _address(http)
        opened = open_store(store)
        if address is None:
            serve_store(opened)
            return
        problem = bind_problem(address[0], token)
    except CarryallError as exc:
        fail(str(exc), console=err)
    if problem is not None:
        fail(problem, console=err)
    host, port = address
    err.print(f"[dim]serving sessions at http://{_hostport(host, port)}/mcp[/]")
    serve_http(opened, host, port, token)


def _address(text: str) -> tuple[str, int]:
    """HOST:PORT (an IPv6 host in brackets, `[::1]:8765`) as its parts, or a `CarryallError`."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise CarryallError(f"--http {text!r}: expected HOST:PORT, for instance 127.0.0.1:8765")
    return host.strip("[]"), int(port)


def _hostport(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def mcp_servers(path: Path | None) -> dict[str, McpServer]:
    """The servers to start: the config file's `mcpServers`, then those of `path`."""
    from carryall.mcp import read_mcp_file

    servers = dict(load_config().mcp_servers)
    if path is not None:
        servers.update(read_mcp_file(path))
    return {name: server for name, server in servers.items() if not server.disabled}


def open_toolbox(
    path: Path | None, reserved: Iterable[str], workspace: Path | None = None
) -> McpToolbox | None:
    """The configured servers for `run` and `chat`, not yet started; None when there are none.

    Reading the config is all it does: the servers start when their tools
    are first needed (`start_toolbox`, at the first request), so a chat
    that is opened and left starts no process. The caller closes the toolbox.
    `workspace` is the root the servers are told they may work in.
    """
    servers = mcp_servers(path)
    if not servers:
        return None
    toolbox = _toolbox(servers, reserved)
    if workspace is not None:
        toolbox.roots = [workspace]
    return toolbox


def attach_host(
    toolbox: McpToolbox,
    agent: Agent,
    err: Console,
    before_asking: Callable[[], None] | None = None,
) -> None:
    """Let `toolbox`'s servers ask back: the agent's model for sampling, a person, stderr.

    A server's question goes to the person only when standard input is a
    terminal; otherwise it is declined and the server is told why.
    `before_asking` clears the screen's live parts (a spinner) first. Its
    progress and log lines are shown on standard error.
    """
    toolbox.sampler = agent.backend
    toolbox.asker = ask_person(err, before=before_asking) if sys.stdin.isatty() else None
    toolbox.on_notice = _noticer(err)


def ask_person(
    err: Console,
    read: Callable[[], str] | None = None,
    before: Callable[[], None] | None = None,
) -> Callable[[Elicitation], ElicitAnswer]:
    """An asker that puts a server's question to the person at the terminal, field by field.

    Each answer is checked against the field's type, range and choices and
    asked again until it fits; an empty answer takes the default. End of
    input cancels. `read` gives one typed line (default: standard input's).
    """
    from carryall.mcp import ElicitAnswer, field_value

    lock = threading.Lock()

    def ask(question: Elicitation) -> ElicitAnswer:
        with lock:  # two servers asking at once take turns
            if before is not None:
                before()
            err.print(
                f"[bold]MCP server {markup_safe(question.server)} asks:[/] "
                f"{markup_safe(question.message)}",
                soft_wrap=True,
            )
            typed = read or sys.stdin.readline
            choice = _line(err, typed, "answer it? [y]es, [n]o (decline), [c]ancel: ")
            if choice is None or choice.strip().lower() in ("c", "cancel"):
                return ElicitAnswer("cancel", reason="cancelled by the person")
            if choice.strip().lower() not in ("y", "yes", ""):
                return ElicitAnswer("decline", reason="declined by the person")
            schema = question.schema
            required = set(schema.get("required") or ())
            content: dict[str, Any] = {}
            for name, spec in (schema.get("properties") or {}).items():
                while True:
                    label = _field_label(name, spec, name in required)
                    raw = _line(err, typed, f"  {label}: ")
                    if raw is None:
                        return ElicitAnswer("cancel", reason="cancelled by the person")
                    try:
                        value = field_value(name, spec, raw, name in required)
                    except ValueError as exc:
                        err.print(f"  [yellow]{markup_safe(str(exc))}[/]")
                        continue
                    if value is not None:
                        content[name] = value
                    break
            return ElicitAnswer("accept", content)

    return ask


def _line(err: Console, read: Callable[[], str], prompt: str) -> str | None:
    """One line typed after `prompt`; None at end of input.

    The prompt is written to the console's file directly: a half line held
    by rich's renderer would not show until the answer's newline.
    """
    err.file.write(prompt)
    err.file.flush()
    line = read()
    return None if line == "" else line.rstrip("\n")


def _field_label(name: str, spec: dict[str, Any], required: bool) -> str:
    kind = spec.get("type", "string")
    parts = [str(spec.get("title") or name), f"({kind}"]
    choices = spec.get("enum") or [o.get("const") for o in spec.get("oneOf") or []]
    if choices:
        parts[-1] += ": " + ", ".join(map(str, choices))
    parts[-1] += ", required)" if required else ")"
    if "default" in spec:
        parts.append(f"[{spec['default']}]")
    return " ".join(parts)


def _noticer(err: Console) -> Callable[[McpNotice], None]:
    def notice(event: McpNotice) -> None:
        err.print(
            f"[dim]{markup_safe(event.server)} {event.kind}: {markup_safe(event.text)}[/]",
            soft_wrap=True,
        )

    return notice


def start_toolbox(toolbox: McpToolbox, tools: dict[str, Tool], err: Console) -> None:
    """Start `toolbox`'s servers and add their tools to `tools` (an agent's table).

    A server that does not start is a warning line and is left out: the run
    goes on with the tools it has. Interrupted (Ctrl-C, SIGTERM), every
    server started so far is stopped before the interruption goes on, so
    none outlives it and the next call may start them afresh.
    """
    try:
        with err.status("[dim]starting MCP servers…[/]"):
            results = toolbox.start()
    except BaseException:
        toolbox.close()
        raise
    for result in results:
        if result.error is not None:
            err.print(
                f"[yellow]warning:[/] MCP server {markup_safe(result.server)} left out: "
                f"{markup_safe(result.error)}",
                soft_wrap=True,
            )
    tools.update((t.name, t) for t in toolbox.tools)


def _toolbox(servers: dict[str, McpServer], reserved: Iterable[str]) -> McpToolbox:
    try:
        from carryall.mcp import McpToolbox
    except ImportError:
        raise McpError(_EXTRA_LINE) from None
    return McpToolbox(servers, reserved=reserved)
