"""`carryall run` and `carryall chat`: the agent loop at a terminal.

Assistant text streams to standard output as it arrives; everything around
it (the spinner, tool calls and their results, notes and errors) goes to
standard error, so `carryall run ... > answer.txt` keeps only the answer.
"""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, fields, replace
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, get_args

import msgspec
import typer
from rich.console import Console

from carryall._commands._display import Display
from carryall._commands._images import fetched_history, named_image, sendable
from carryall._commands._options import BaseUrlOption
from carryall._commands._output import fail, markup_safe, masked, warn_damage
from carryall._commands.mcp import McpOption, attach_host, open_toolbox, start_toolbox
from carryall._commands.sessions import StoreOption, keep_interrupted_prompt, recorded_in
from carryall._text import shorten
from carryall.agent import (
    DEFAULT_MAX_STEPS,
    DEFAULT_MAX_TOKENS,
    DEFAULT_TOOL_TIMEOUT,
    LOCAL_MAX_STEPS,
    LOCAL_MAX_TOKENS,
    Agent,
    AgentEvent,
    RequestStarted,
)
from carryall.blocks import Document, Downgrade, Image, Message
from carryall.errors import AttachmentError, CarryallError, StructuredOutputError
from carryall.providers import CachePolicy, HostedTool, HostedToolKind, OutputSchema, Response
from carryall.request_options import layered, parse_pairs, read_table
from carryall.tools import Tool
from carryall.tools.builtin import BUILTIN_TOOL_NAMES, DEFAULT_TOOL_NAMES, builtin_tools
from carryall.usage import format_cost, responses_total

if TYPE_CHECKING:
    from carryall.backends import Backend
    from carryall.mcp import McpToolbox
    from carryall.sessions import AnySession
    from carryall.tracing import AgentTracer

__all__ = ["register"]

_DEFAULT_TOOLS = ",".join(DEFAULT_TOOL_NAMES)

# -- shared options -------------------------------------------------------------


def _at_least(minimum: float) -> Callable[[float | None], float | None]:
    """A check that a number option is at least `minimum`, said in its error only.

    Not click's range type: that prints `[x>=0.001]` beside the name in
    `--help`, and at 80 columns the descriptions are squeezed to make room.
    """

    def check(value: float | None) -> float | None:
        if value is not None and value < minimum:
            raise typer.BadParameter(f"{value:g} is less than the smallest allowed, {minimum:g}")
        return value

    return check


BackendOption = Annotated[
    str | None,
    typer.Option(
        "--backend",
        "-b",
        metavar="NAME",
        help=(
            "Backend to talk to: anthropic, openai (Chat Completions), responses (the "
            "OpenAI Responses API), gemini (needs the gemini extra), bedrock (AWS Bedrock "
            "Converse; needs the bedrock extra), llama-server or local "
            "(the embedded llama-server). "
            "Default: the config file's `backend`, else anthropic if "
            "ANTHROPIC_API_KEY is set, else openai if OPENAI_API_KEY is set, else local."
        ),
        show_default=False,
    ),
]
ModelOption = Annotated[
    str | None,
    typer.Option(
        "--model",
        "-m",
        metavar="NAME",
        help="Model name (default: the backend's default).",
        show_default=False,
    ),
]
OptionOption = Annotated[
    list[str] | None,
    typer.Option(
        "--option",
        "-o",
        metavar="KEY=VALUE",
        help=(
            "A request option, repeatable: temperature, top_p, top_k, seed, stop, "
            "presence_penalty, frequency_penalty, parallel_tool_calls, service_tier, store, "
            "effort, thinking, thinking_budget, or extra.WIRE.KEY. VALUE is JSON where it "
            "parses (-o temperature=0.2 -o stop='[\"END\"]'). Goes over the config file's "
            "\\[backends.NAME.options]."
        ),
        show_default=False,
    ),
]
SystemOption = Annotated[
    str | None,
    typer.Option(
        "--system",
        "-s",
        metavar="TEXT",
        help="System prompt. Starting with @ reads it from a file (@prompt.txt).",
        show_default=False,
    ),
]
ToolsOption = Annotated[
    str | None,
    typer.Option(
        "--tools",
        "-t",
        metavar="NAMES",
        help=(
            "Built-in tools to offer, comma-separated, from: "
            f"{', '.join(BUILTIN_TOOL_NAMES)}; 'none' offers none. "
            f"Default: a resumed session's own, else {', '.join(DEFAULT_TOOL_NAMES)} "
            "(view_image only for a model that can see)."
        ),
        show_default=False,
    ),
]
AllowWriteOption = Annotated[
    bool,
    typer.Option(
        "--allow-write",
        help="Also offer write_file (it can create and overwrite files in the workspace).",
    ),
]
WorkspaceOption = Annotated[
    Path,
    typer.Option(
        "--workspace",
        "-w",
        metavar="DIR",
        help="Directory the tools may read (and write with --allow-write); nothing outside it.",
        file_okay=False,
        dir_okay=True,
        exists=True,
    ),
]
MaxStepsOption = Annotated[
    int | None,
    typer.Option(
        "--max-steps",
        callback=_at_least(1),
        metavar="N",
        help=(
            "Tool rounds one turn may run; after the last, the model is asked to answer "
            f"without tools. Default: {LOCAL_MAX_STEPS} on the local backend, "
            f"{DEFAULT_MAX_STEPS} elsewhere."
        ),
        show_default=False,
    ),
]
MaxTokensOption = Annotated[
    int | None,
    typer.Option(
        "--max-tokens",
        callback=_at_least(1),
        metavar="N",
        help=(
            "Output tokens asked for per request; a reply cut there is flagged max_tokens. "
            f"Default: {LOCAL_MAX_TOKENS} on the local backend, {DEFAULT_MAX_TOKENS} elsewhere."
        ),
        show_default=False,
    ),
]
ToolTimeoutOption = Annotated[
    float,
    typer.Option(
        "--tool-timeout",
        callback=_at_least(0.001),
        metavar="SECONDS",
        help="Seconds one tool call may run before it fails (more than 0).",
    ),
]
NoVisionOption = Annotated[
    bool,
    typer.Option(
        "--no-vision",
        help="Treat the model as unable to see: every image reaches it as a placeholder line.",
    ),
]
ImageOption = Annotated[
    list[str] | None,
    typer.Option(
        "--image",
        "-i",
        metavar="PATH|URL",
        help=(
            "An image (PNG, JPEG, GIF or WebP) or a document (.pdf, .txt) to hand over with "
            "the prompt: a file, a data: URI, or an http(s) URL, sent as a URL where the "
            "backend takes one (anthropic; openai for images) and otherwise fetched with the "
            "same size cap; repeatable."
        ),
        show_default=False,
    ),
]
HostedOption = Annotated[
    list[str] | None,
    typer.Option(
        "--hosted",
        metavar="KIND",
        help=(
            "A tool the provider runs itself: web_search, web_fetch, code_execution, "
            "file_search, url_context, mcp or advisor, with its settings as a JSON object "
            "after = (mcp needs server_url and server_label, advisor a model); refused by "
            "name on a backend without it; repeatable."
        ),
        show_default=False,
    ),
]
NoRecordOption = Annotated[
    bool, typer.Option("--no-record", help="Do not record this run as a session.")
]


class CacheChoice(StrEnum):
    """The `--cache` policy (`Agent(cache=...)`): each wire's cache markers, or none."""

    auto = "auto"
    off = "off"


CacheOption = Annotated[
    CacheChoice | None,
    typer.Option(
        "--cache",
        metavar="auto|off",
        help=(
            "Prompt caching: auto marks what each backend caches (Anthropic and Bedrock "
            "breakpoints, OpenAI's cache key); off marks nothing. Default: the config "
            "file's `cache`, else auto."
        ),
        show_default=False,
    ),
]
ContinueOption = Annotated[
    bool,
    typer.Option(
        "--continue",
        "-c",
        help="Continue the session used last (the first row of `carryall sessions list`).",
    ),
]
SessionOption = Annotated[
    str | None,
    typer.Option(
        "--session",
        "--resume",
        "-r",
        metavar="ID",
        help=(
            "Continue a recorded session by id, unique prefix or `last`; its backend, "
            "model, system prompt and built-in tools apply unless given here."
        ),
        show_default=False,
    ),
]


def register(app: typer.Typer) -> None:
    """Add `run` and `chat` to the `carryall` app."""
    app.command("run")(run)
    app.command("chat")(chat)


# -- commands ---------------------------------------------------------------------


def run(
    prompt: Annotated[
        str | None,
        typer.Argument(
            help=(
                "What to ask. Piped standard input comes first, then this; '-' reads "
                "the prompt from standard input alone."
            ),
            show_default=False,
        ),
    ] = None,
    backend: BackendOption = None,
    model: ModelOption = None,
    base_url: BaseUrlOption = None,
    option: OptionOption = None,
    system: SystemOption = None,
    tools: ToolsOption = None,
    allow_write: AllowWriteOption = False,
    workspace: WorkspaceOption = Path("."),
    max_steps: MaxStepsOption = None,
    max_tokens: MaxTokensOption = None,
    tool_timeout: ToolTimeoutOption = DEFAULT_TOOL_TIMEOUT,
    no_vision: NoVisionOption = False,
    no_record: NoRecordOption = False,
    store: StoreOption = None,
    image: ImageOption = None,
    mcp: McpOption = None,
    cache: CacheOption = None,
    hosted: HostedOption = None,
    continue_: ContinueOption = False,
    session_id: SessionOption = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help=(
                "Print one JSON object when the turn ends (answer, stop_reason, tool_calls, "
                "usage, cost, session, downgrades) instead of streaming the answer."
            ),
        ),
    ] = False,
    show_usage: Annotated[
        bool,
        typer.Option(
            "--usage",
            "-u",
            help="When the turn ends, print the tokens it used and what they cost on stderr.",
        ),
    ] = False,
    schema: Annotated[
        str | None,
        typer.Option(
            "--schema",
            metavar="SCHEMA",
            help=(
                "Ask for an answer matching this JSON Schema (a file, or inline JSON) "
                "and print it as validated JSON; an answer that does not match fails. "
                "A resumed session asks for its own again."
            ),
            show_default=False,
        ),
    ] = None,
) -> None:
    """Run one prompt to the end of its turn, tools included, and print the answer.

    The answer streams to standard output; tool calls, results and notes go
    to standard error. Ctrl-C stops the turn (exit code 130), keeping
    whatever whole messages it made in the recorded session.

    Example: carryall run "Summarise notes.txt" --workspace ~/project

    Example: cat notes.txt | carryall run "Summarise this" --json

    Example: carryall run -c "And the second point?"

    Example: carryall run "Who wrote Dune?" --schema person.json
    """
    try:
        output_schema = _read_schema(schema)
    except CarryallError as exc:
        fail(str(exc), console=Console(stderr=True, highlight=False))
    out, err = _consoles(quiet=as_json)
    try:
        prompt = _read_prompt(prompt)
    except CarryallError as exc:
        fail(str(exc), console=err)
    if not prompt.strip():
        fail("the prompt is empty (give one, or pipe it in)", console=err)
    images = _load_images(image or [], err)
    resume = _continued(continue_, session_id, err)
    setup = _Setup.of(locals())
    with _opened(setup, out, err, prompt=Message.user(prompt, images)) as (agent, display):
        if agent.schema is not None:
            # A structured answer (asked here or by the resumed session) is
            # printed once checked, never streamed half-made.
            display.out = _consoles(quiet=True)[0]
        images = _sendable(images, agent, err)
        start = len(agent.messages)
        try:
            response = agent.send(prompt, images)
        except KeyboardInterrupt:
            display.finish()
            keep_interrupted_prompt(agent, start, Message.user(prompt, images))
            err.print(
                "[yellow]interrupted[/]: the turn was stopped; your prompt is kept in the session"
            )
            raise typer.Exit(130) from None
        except StructuredOutputError as exc:
            # The answer was said and is kept; it only is not what was asked for.
            display.finish()
            err.print(
                f"[dim]the answer: {markup_safe(shorten(exc.answer, 400))}[/]", soft_wrap=True
            )
            fail(str(exc), console=err)
        except CarryallError as exc:
            display.finish()
            _keep_failed_prompt(agent, start, Message.user(prompt, images), str(exc))
            fail(str(exc), console=err)
        display.finish()
        parsed = _parsed(response, agent)
        downgrades = [msgspec.to_builtins(d) for d in agent.turn_downgrades]
        for downgrade in agent.turn_downgrades:
            err.print(f"[yellow]note:[/] {markup_safe(_downgrade_line(downgrade))}", soft_wrap=True)
        if show_usage:
            err.print(
                markup_safe(
                    responses_total(
                        display.responses, agent.backend.name, agent.backend.model
                    ).line()
                ),
                soft_wrap=True,
            )
        if as_json:
            turn = _turn_json(agent, start, response, display.responses, downgrades)
            if agent.schema is not None:
                turn["parsed"] = parsed
            typer.echo(json.dumps(turn, ensure_ascii=False))
        elif agent.schema is not None:
            typer.echo(json.dumps(parsed, ensure_ascii=False, indent=2))


def chat(
    backend: BackendOption = None,
    model: ModelOption = None,
    base_url: BaseUrlOption = None,
    option: OptionOption = None,
    system: SystemOption = None,
    tools: ToolsOption = None,
    allow_write: AllowWriteOption = False,
    workspace: WorkspaceOption = Path("."),
    max_steps: MaxStepsOption = None,
    max_tokens: MaxTokensOption = None,
    tool_timeout: ToolTimeoutOption = DEFAULT_TOOL_TIMEOUT,
    no_vision: NoVisionOption = False,
    no_record: NoRecordOption = False,
    store: StoreOption = None,
    mcp: McpOption = None,
    cache: CacheOption = None,
    hosted: HostedOption = None,
    continue_: ContinueOption = False,
    session_id: SessionOption = None,
    image: ImageOption = None,
) -> None:
    """Talk with a model interactively, one turn per line you type.

    Up recalls earlier lines (kept across runs), Esc then Enter starts a new
    line; /help lists the slash commands (/image PATH, /system, /model,
    /tools, /save, /exit). Ctrl-C stops the current turn and keeps your
    prompt in the conversation; Ctrl-D or /exit leaves. Every turn is
    recorded in one session unless --no-record.

    Example: carryall chat -c
    """
    out, err = _consoles()
    resume = _continued(continue_, session_id, err)
    images = _load_images(image or [], err)
    setup = _Setup.of(locals())
    from carryall import paths
    from carryall._commands.chat import converse

    with _opened(setup, out, err) as (agent, display):
        err.print(
            f"[dim]{markup_safe(_backend_label(agent))} · "
            f"tools: {markup_safe(', '.join(agent.tools) or 'none')} · /help for commands, "
            "Ctrl-D or /exit to leave[/]"
        )
        if agent.messages:
            err.print(f"[dim]resumed with {len(agent.messages)} message(s)[/]")
        converse(
            agent,
            display,
            out,
            err,
            images=_sendable(images, agent, err),
            history_file=paths.chat_history_file(),
            terminal=sys.stdin.isatty() and sys.stdout.isatty(),
        )


# -- setup ----------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class _Setup:
    """The options both commands share, gathered so opening them is one function."""

    backend: str | None
    model: str | None
    base_url: str | None
    system: str | None
    tools: str | None
    allow_write: bool
    workspace: Path
    max_steps: int | None
    max_tokens: int | None
    tool_timeout: float
    no_vision: bool
    no_record: bool
    store: str | None = None
    resume: str | None = None
    mcp: Path | None = None
    cache: CacheChoice | None = None
    option: list[str] | None = None
    """The `-o KEY=VALUE` pairs, as given."""
    request: dict[str, Any] | None = None
    """The request options a continued session was sent with, under `option`."""
    output_schema: OutputSchema | None = None
    """`run --schema`'s, or a resumed session's own (`SessionMeta.output_schema`)."""
    hosted: list[str] | None = None

    @classmethod
    def of(cls, options: dict[str, Any]) -> _Setup:
        """The setup from a command's parameters (its `locals()`), one place for both."""
        return cls(**{f.name: options[f.name] for f in fields(cls) if f.name in options})

    def options(self) -> dict[str, int | float | bool]:
        """The run's settings the command line gave, as a session keeps them for `-c`."""
        given: dict[str, int | float | bool | None] = {
            "max_steps": self.max_steps,
            "max_tokens": self.max_tokens,
            "tool_timeout": None
            if self.tool_timeout == DEFAULT_TOOL_TIMEOUT
            else self.tool_timeout,
            "no_vision": self.no_vision or None,
        }
        return {name: value for name, value in given.items() if value is not None}


def hosted_tools(given: Sequence[str]) -> tuple[HostedTool, ...]:
    """`--hosted` values as hosted tools: a kind, or a kind and its settings as a JSON object.

    A kind carryall does not know, or settings that are not a JSON object,
    is refused here, naming the value; whether the backend runs the kind is
    its codec's to say, before the first request is sent.
    """
    out: list[HostedTool] = []
    for value in given:
        kind, eq, settings = value.partition("=")
        kind = kind.strip()
        if kind not in get_args(HostedToolKind):
            known = ", ".join(get_args(HostedToolKind))
            raise CarryallError(f"--hosted {kind!r}: not a hosted tool (one of: {known})")
        config: Any = {}
        if eq:
            try:
                config = json.loads(settings)
            except ValueError as exc:
                reason = f"the settings are not JSON ({exc})"
                raise CarryallError(f"--hosted {value!r}: {reason}") from None
            if not isinstance(config, dict):
                raise CarryallError(f"--hosted {value!r}: the settings must be a JSON object")
        out.append(HostedTool(kind, config))  # type: ignore[arg-type]
    return tuple(out)


@contextmanager
def _opened(
    setup: _Setup, out: Console, err: Console, *, prompt: Message | None = None
) -> Iterator[tuple[Agent, Display]]:
    """Open the backend, the session and the agent; close the backend however it ends.

    A failure to open any of them is one `error:` line and exit code 1. A
    backend that cannot be opened (no API key, no server at the URL) with a
    `prompt` waiting leaves that prompt recorded as failed, with the reason,
    as a request that failed does: every failed run is kept the same way.
    """
    backend: Backend | None = None
    session: AnySession | None = None
    toolbox: McpToolbox | None = None
    tracer: AgentTracer | None = None
    try:
        try:
            given = parse_pairs(setup.option or ())
            hosted_tools(setup.hosted or ())  # a bad --hosted fails before a session opens
            system = _read_system(setup.system)
            history: list[Message] | None = None
            if setup.resume is not None:
                session = _open_session(setup.store, setup.resume)
                warn_damage(session.damage, err)
                history = session.messages()
                setup = _resumed(setup, session)
                if setup.system is None:
                    system = session.system
                elif not setup.no_record:
                    session.change_system(system)  # --system on a continued session
            hosted = hosted_tools(setup.hosted or ())
            tools = _choose_tools(setup.tools or _DEFAULT_TOOLS, setup.workspace, setup.allow_write)
            toolbox = open_toolbox(setup.mcp, [t.name for t in tools], setup.workspace)
            try:
                with err.status("[dim]starting the backend…[/]"):
                    backend = _open_backend(setup)
            except CarryallError as exc:
                if prompt is not None and not setup.no_record:
                    _record_failed_open(setup, session, system, tools, prompt, str(exc))
                raise
            if setup.tools is None and not backend.capabilities.vision:
                # Offered by default only to a model that can see the
                # picture it returns: a blind one gets nothing from it but a
                # tool to call by mistake (a small model does, with any name).
                tools = [t for t in tools if t.name != "view_image"]
            if backend.name == "local":
                _note_demonstration_model(err)
            if history:
                history = _fetched_media(history, backend, err)
                if session is not None:
                    session.continue_from(history)  # recorded onto the session as it is
            table = layered(_configured_options(backend), setup.request, given)
            chosen = read_table(table, "options")
            if session is None and not setup.no_record:
                session = _create_session(
                    setup, backend.name, backend.model, system, [t.name for t in tools], table
                )
        except CarryallError as exc:
            fail(str(exc), console=err)
        except KeyboardInterrupt:
            err.print("[yellow]interrupted[/]")
            raise typer.Exit(130) from None
        assert backend is not None  # fail raised otherwise
        display = Display(out, err)
        tracer = _tracer(session, err)
        agent = Agent(
            backend,
            tools=tools,
            system=system,
            max_steps=setup.max_steps,
            tool_timeout=setup.tool_timeout,
            max_tokens=setup.max_tokens,
            context_window=_configured_context(backend),
            cache=_cache_policy(setup),
            options=chosen.options,
            effort=chosen.effort,
            thinking=bool(chosen.thinking),
            thinking_budget=chosen.thinking_budget,
            hosted_tools=hosted,
            session=None if setup.no_record else session,
            messages=history,
            on_text=display.on_text,
            on_event=display.on_event,
            tracer=tracer,
            schema=setup.output_schema,
        )
        if toolbox is not None:
            attach_host(toolbox, agent, err, before_asking=display._stop_spinner)
            agent.on_event = _serving(toolbox, agent, display.on_event, err)
        yield agent, display
    finally:
        if tracer is not None:
            tracer.shutdown()
        if toolbox is not None:
            toolbox.close()
        if backend is not None:
            backend.close()
        if session is not None and not setup.no_record:
            err.print(f"[dim]session {markup_safe(session.id)}[/]")


def _note_demonstration_model(err: Console) -> None:
    """Say once, on the first run on `local`, what its model is and how to use a real one.

    Remembered by a file beside the sessions folder, so a fresh
    `CARRYALL_HOME` hears it again; a folder that cannot be written to
    hears it every time rather than never.
    """
    from carryall import paths

    marker = paths.sessions_dir().parent / "local-model-noted"
    if marker.exists():
        return
    err.print(
        "[yellow]note:[/] local runs SmolLM2-135M, a 135M demonstration model that is often "
        "wrong; for real answers set ANTHROPIC_API_KEY or OPENAI_API_KEY, or use "
        "-b openai --base-url URL for any OpenAI-compatible server",
        soft_wrap=True,
    )
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
    except OSError:
        pass


def _fetched_media(history: list[Message], backend: Backend, err: Console) -> list[Message]:
    """A resumed history's remote media fetched for a wire that needs bytes (`fetched_history`).

    From the config's `[attachments] allow_hosts` only; a fetch that fails is
    one `warning:` line, and that file goes as its placeholder (a downgrade).
    """
    from carryall.config import load_config

    hosts = load_config().attachments.allow_hosts
    if not hosts:
        return history
    fetched, failed = fetched_history(history, backend, hosts)
    for exc in failed:
        err.print(f"[yellow]warning[/]: {markup_safe(str(exc))}; sent as its placeholder")
    return fetched


def _serving(
    toolbox: McpToolbox, agent: Agent, on_event: Callable[[AgentEvent], None], err: Console
) -> Callable[[AgentEvent], None]:
    """`on_event`, first giving the agent its MCP tools as each request is about to be built.

    The first request starts the servers (a chat opened and left never
    does); each later one re-lists the tools of a server that said they
    changed. A start that was interrupted is tried again at the next request.
    """
    started = False

    def handle(event: AgentEvent) -> None:
        nonlocal started
        if isinstance(event, RequestStarted):
            if started:
                toolbox.update(agent.tools)
            else:
                start_toolbox(toolbox, agent.tools, err)
                started = True
        on_event(event)

    return handle


def _open_backend(setup: _Setup) -> Backend:
    from carryall.backends import open_backend

    return open_backend(
        setup.backend,
        model=setup.model,
        base_url=setup.base_url,
        no_vision=setup.no_vision,
    )


def _tracer(session: AnySession | None, err: Console) -> AgentTracer | None:
    """Spans of this run over OTLP/HTTP when the `OTEL_EXPORTER_OTLP_*` variables ask for them.

    Off, and nothing of OpenTelemetry loaded, when they are not set
    (`configure_from_environment` reads them; `carryall.tracing` itself
    imports no OpenTelemetry).
    """
    from carryall.tracing import AgentTracer, configure_from_environment

    try:
        provider = configure_from_environment()
    except CarryallError as exc:
        fail(str(exc), console=err)
    if provider is None:
        return None
    return AgentTracer(session_id=None if session is None else session.id, tracer_provider=provider)


def _cache_policy(setup: _Setup) -> CachePolicy:
    """`--cache`, else the config file's `cache`, else `auto`.

    Automatic by default: OpenAI, Gemini and llama-server cache for nothing
    extra, and on Anthropic and Bedrock an agent's next step reads back at a
    tenth of the price what the step before wrote at a quarter more.
    """
    if setup.cache is not None:
        return "off" if setup.cache is CacheChoice.off else "auto"
    from carryall.config import load_config

    return load_config().cache or "auto"


def _configured_context(backend: Backend) -> int | None:
    """The config file's `context_window` for this backend; None leaves it to the agent."""
    from carryall.config import load_config

    return load_config().settings(backend.name).context_window


def _configured_options(backend: Backend) -> dict[str, Any]:
    """The config file's `[backends.NAME.options]` for this backend (checked when read)."""
    from carryall.config import load_config

    return load_config().settings(backend.name).options


def _create_session(
    setup: _Setup,
    backend: str,
    model: str,
    system: str | None,
    tools: list[str],
    request: dict[str, Any] | None = None,
) -> AnySession:
    """A new session holding what a continued run needs: backend, URL, model, options, system.

    `request` is the request options the run is sent with (the config
    file's and the command line's), kept so `-c` sends the same. Never a
    key: the URL is masked, and keys live only in the environment.
    """
    from carryall.sessions import open_store

    options: dict[str, Any] = setup.options()
    if request:
        options["request"] = request
    if setup.hosted:
        options["hosted"] = list(setup.hosted)  # as `--hosted` takes them

    return open_store(setup.store).create(
        backend=backend,
        model=model,
        cwd=setup.workspace.resolve(),
        system=system,
        tools=tools,
        base_url=masked(setup.base_url) if setup.base_url else None,
        options=options,
        output_schema=None
        if setup.output_schema is None
        else msgspec.to_builtins(setup.output_schema),
    )


def _record_failed_open(
    setup: _Setup,
    session: AnySession | None,
    system: str | None,
    tools: list[Tool],
    prompt: Message,
    error: str,
) -> None:
    """Keep a prompt whose backend could not even be opened, marked failed with the reason.

    Best effort: the error the person sees is the backend's, whatever
    happens here.
    """
    from carryall.backends import default_backend_name
    from carryall.config import load_config

    try:
        if session is None:
            name = setup.backend or default_backend_name(load_config())
            session = _create_session(
                setup, name, setup.model or "", system, [t.name for t in tools]
            )
        session.append([prompt], failed=masked(error))
    except CarryallError:
        pass


def _open_session(store: str | None, session_id: str) -> AnySession:
    from carryall.sessions import open_store

    return open_store(store).open(session_id)


def _resumed(setup: _Setup, session: AnySession) -> _Setup:
    """Continue on the session's backend, URL, model, options and tools unless the command line
    says otherwise.

    The tools are the built-ins the session offered (`write_file` only with
    --allow-write again: a resumed session never gains write access unasked).
    """
    meta = session.meta
    if setup.tools is None and meta.tools is not None:
        offered = [n for n in meta.tools if n in BUILTIN_TOOL_NAMES and n != "write_file"]
        setup = replace(setup, tools=",".join(offered) or "none")
    kept = meta.options or {}
    setup = replace(
        setup,
        max_steps=setup.max_steps if setup.max_steps is not None else _int(kept, "max_steps"),
        max_tokens=setup.max_tokens if setup.max_tokens is not None else _int(kept, "max_tokens"),
        tool_timeout=(
            float(kept.get("tool_timeout", DEFAULT_TOOL_TIMEOUT))
            if setup.tool_timeout == DEFAULT_TOOL_TIMEOUT
            else setup.tool_timeout
        ),
        no_vision=setup.no_vision or bool(kept.get("no_vision", False)),
        request=kept.get("request") if isinstance(kept.get("request"), dict) else None,
        hosted=setup.hosted if setup.hosted is not None else _strings(kept.get("hosted")),
        output_schema=setup.output_schema or _stored_schema(meta.output_schema),
    )
    if setup.backend not in (None, meta.backend) or not meta.backend:
        # Another backend: the session's URL and model were that backend's.
        return setup
    model = setup.model if setup.model is not None else (meta.model or None)
    base_url = setup.base_url if setup.base_url is not None else meta.base_url
    return replace(setup, backend=meta.backend, model=model, base_url=base_url)


def _read_schema(value: str | None) -> OutputSchema | None:
    """`--schema`'s JSON Schema: inline JSON (it starts with `{`), else a file (`@` optional)."""
    if value is None:
        return None
    from carryall.schema import output_schema

    text = value.strip()
    if text.startswith("{"):
        where = "--schema"
    else:
        path = Path(value.removeprefix("@")).expanduser()
        where = f"the schema file {str(path)!r}"
        try:
            text = _utf8(path.read_bytes(), where)
        except OSError as exc:
            raise CarryallError(f"cannot read {where}: {exc.strerror}") from None
    try:
        schema = json.loads(text)
    except ValueError as exc:
        raise CarryallError(f"{where} is not JSON: {exc}") from None
    if not isinstance(schema, dict):
        raise CarryallError(f"{where} must be a JSON object (a JSON Schema), not {_kind(schema)}")
    return output_schema(schema)


def _kind(value: Any) -> str:
    return "an array" if isinstance(value, list) else f"a {type(value).__name__}"


def _stored_schema(stored: dict[str, Any] | None) -> OutputSchema | None:
    """A session's recorded output schema, or None when it has none or it is not one."""
    if stored is None:
        return None
    try:
        return msgspec.convert(stored, OutputSchema)
    except msgspec.ValidationError:
        return None


def _parsed(response: Response, agent: Agent) -> Any:
    """The turn's structured answer (already checked by the agent), or None when none was asked."""
    if agent.schema is None:
        return None
    from carryall.schema import parse

    return parse(response, agent.schema)


def _strings(value: Any) -> list[str] | None:
    """A kept list of strings (the `--hosted` values), or None when it is not one."""
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    return None


def _int(options: dict[str, Any], name: str) -> int | None:
    value = options.get(name)
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _read_system(system: str | None) -> str | None:
    if system is None or not system.startswith("@"):
        return system
    path = Path(system[1:]).expanduser()
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CarryallError(
            f"cannot read the system prompt file {str(path)!r}: {exc.strerror}"
        ) from None
    return _utf8(data, f"the system prompt file {str(path)!r}")


def _keep_failed_prompt(agent: Agent, start: int, prompt: Message, error: str) -> None:
    """Record a prompt whose first request failed, with the error, instead of losing it.

    The loop takes such a prompt back (the history is as it was before the
    turn); the session keeps it, marked failed, so a 401 or a refused
    connection leaves the prompt and the reason rather than an empty session.
    """
    session = recorded_in(agent)
    if session is not None and len(agent.messages) == start:
        session.append([prompt], failed=masked(error))


def _continued(continue_: bool, session_id: str | None, err: Console) -> str | None:
    """The session `-c` or `--session` names (`last` for `-c`), or None for a new one."""
    if continue_ and session_id is not None:
        fail("give -c/--continue or --session, not both", 2, console=err)
    if not continue_:
        return session_id
    from carryall.sessions.jsonl import LAST

    return LAST


def _read_prompt(prompt: str | None) -> str:
    """The prompt as text that can be sent, piped standard input first; not UTF-8 is refused.

    As `llm` does, text piped in joins the prompt (`cat notes.txt | carryall
    run "Summarise this"`): the piped text, a blank line, then the argument.
    `-` reads standard input alone. Refused where it enters, with the place
    named: a string that cannot be encoded would otherwise fail deep in the
    SDK after the session was opened.
    """
    if prompt == "-":
        return _read_stdin()
    piped = _read_stdin() if _stdin_is_piped() else ""
    if prompt is None:
        return piped
    # An argument that was not UTF-8 arrives with its bytes as lone surrogates.
    try:
        raw = prompt.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError as exc:
        raise CarryallError(f"the prompt holds a lone surrogate at offset {exc.start}") from None
    text = _utf8(raw, "the prompt")
    if not piped.strip():
        return text
    return f"{piped.rstrip()}\n\n{text}"


def _stdin_is_piped() -> bool:
    """Whether standard input is something other than a terminal (a pipe, a file)."""
    stdin = sys.stdin
    if stdin is None or stdin.closed:
        return False
    try:
        return not stdin.isatty()
    except ValueError:
        return False


def _read_stdin() -> str:
    stream = getattr(sys.stdin, "buffer", None)
    if stream is None:
        return _utf8(sys.stdin.read().encode("utf-8", "surrogateescape"), "standard input")
    return _utf8(stream.read(), "standard input")


def _utf8(data: bytes, what: str) -> str:
    """`data` decoded as UTF-8, or a `CarryallError` naming `what` and the first bad byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CarryallError(
            f"{what} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})"
        ) from None


def _choose_tools(spec: str, workspace: Path, allow_write: bool) -> list[Tool]:
    names = [n.strip() for n in spec.split(",") if n.strip()]
    if names == ["none"] or not names:
        names = ["write_file"] if allow_write else []
    elif allow_write and "write_file" not in names:
        names.append("write_file")
    if not names:
        return []
    return builtin_tools(workspace, allow_write=allow_write, names=names)


def _backend_label(agent: Agent) -> str:
    return f"{agent.backend.name} · {agent.backend.model}"


# -- output -----------------------------------------------------------------------


def _consoles(*, quiet: bool = False) -> tuple[Console, Console]:
    """Standard output and error; `quiet` keeps the streamed answer off standard output."""
    out = Console(file=io.StringIO(), highlight=False) if quiet else None
    return out or Console(highlight=False, soft_wrap=True), Console(stderr=True, highlight=False)


def _downgrade_line(downgrade: Downgrade) -> str:
    """One downgrade of the codec's report as a person reads it: where, what, and why."""
    where = "request" if downgrade.index < 0 else f"message {downgrade.index}"
    return f"{where} ({downgrade.kind}): {downgrade.reason}"


def _turn_json(
    agent: Agent,
    start: int,
    response: Response,
    responses: Sequence[Response],
    downgrades: list[dict[str, Any]],
) -> dict[str, Any]:
    """What `run --json` prints: the turn's answer, calls, usage and session, for scripts."""
    results = {
        result.tool_use_id: result
        for message in agent.messages[start:]
        for result in message.tool_results_in()
    }
    calls = []
    for message in agent.messages[start:]:
        for use in message.tool_uses():
            result = results.get(use.id)
            calls.append(
                {
                    "id": use.id,
                    "name": use.name,
                    "input": use.input,
                    "result": None if result is None else result.content,
                    "is_error": None if result is None else result.is_error,
                }
            )
    totals = responses_total(responses, agent.backend.name, agent.backend.model)
    usage = {
        "input_tokens": totals.input_tokens,
        "output_tokens": totals.output_tokens,
        "cache_read_input_tokens": totals.cache_read_input_tokens,
        "cache_creation_input_tokens": totals.cache_creation_input_tokens,
        "reasoning_tokens": totals.reasoning_tokens,
    }
    session = recorded_in(agent)
    said: dict[str, Any] = {"answer": response.message.text(), "stop_reason": response.stop_reason}
    if response.stop_sequence is not None:
        said["stop_sequence"] = response.stop_sequence  # which of the request's ended it
    return {
        **said,
        "tool_calls": calls,
        "usage": usage,
        "cost": format_cost(totals.cost),
        "model": agent.backend.model,
        "session": None if session is None else session.id,
        "downgrades": downgrades,
    }


def _load_images(targets: Sequence[str], err: Console) -> list[Image | Document]:
    """The images and documents named on the command line (`named_image`); a bad one fails."""
    images: list[Image | Document] = []
    for target in targets:
        try:
            images.append(named_image(target))
        except AttachmentError as exc:
            fail(str(exc), console=err)
    return images


def _sendable(images: list[Image | Document], agent: Agent, err: Console) -> list[Image | Document]:
    """The named images as the opened backend takes them (`sendable`); a failed fetch fails."""
    try:
        return sendable(images, agent.backend)
    except AttachmentError as exc:
        fail(str(exc), console=err)
