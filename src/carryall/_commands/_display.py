"""How the agent loop looks at a terminal: streamed text on stdout, the rest on stderr.

Shared by `carryall run` and `carryall chat` (`_commands.agent`,
`_commands.chat`), each of which drives one `Display` per conversation.
"""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.status import Status

from carryall._commands._output import markup_safe
from carryall._text import printable, shorten
from carryall.agent import (
    AgentEvent,
    ContextFitted,
    RepeatedCall,
    RequestStarted,
    ResponseReceived,
    SessionMerged,
    StepLimitReached,
    ToolCallFinished,
    ToolCallStarted,
)
from carryall.blocks import ToolUse
from carryall.context import FIT_MARK
from carryall.providers import Response

__all__ = ["Display", "call_line"]

_RESULT_LINES = 4
_RESULT_WIDTH = 160
_ARG_WIDTH = 60


class Display:
    """Turns the loop's text and events into terminal output.

    The spinner runs while nothing is arriving (waiting for the first token,
    or for tools) and stops before anything is printed, so it never tears a
    line of streamed text.
    """

    def __init__(self, out: Console, err: Console) -> None:
        self.out = out
        self.err = err
        self._status: Status | None = None
        self._mid_line = False
        self._streamed = False
        self._running: set[str] = set()
        self.responses: list[Response] = []
        """Every response of the turns shown so far, for the usage `run --json` sums."""

    # The loop's callbacks.

    def on_text(self, chunk: str) -> None:
        if not chunk:
            return
        self._stop_spinner()
        self.out.print(printable(chunk), end="", markup=False, highlight=False)
        self._mid_line = not chunk.endswith("\n")
        self._streamed = True

    def on_event(self, event: AgentEvent) -> None:
        if isinstance(event, RequestStarted):
            self._streamed = False
            self._spin("thinking…" if event.step == 1 else f"thinking… (step {event.step})")
        elif isinstance(event, ResponseReceived):
            self.responses.append(event.response)
            self._stop_spinner()
            if not self._streamed:
                # A server that answered in one piece streamed nothing: the
                # text is shown whole rather than lost.
                self.on_text(event.response.message.text())
            self._break_line()
            if event.response.stop_reason == "max_tokens":
                cut = "a tool call" if event.response.malformed_tool_args else "the reply"
                self.err.print(
                    f"[yellow]max_tokens:[/] {cut} was cut at the output limit and "
                    "is not complete (raise --max-tokens for a longer one)"
                )
        elif isinstance(event, ToolCallStarted):
            self._note(f"[cyan]→[/] {markup_safe(call_line(event.call))}", soft_wrap=True)
            self._running.add(event.call.id)
            self._spin("running tools…")
        elif isinstance(event, ToolCallFinished):
            self._stop_spinner()
            self._running.discard(event.call.id)
            self._show_result(event)
            if self._running:
                self._spin("running tools…")
        elif isinstance(event, ContextFitted):
            summary = (event.fitted.summary or "").removeprefix(f"{FIT_MARK} ")
            self._note(
                f"[yellow]context:[/] about {event.fitted.tokens_before} tokens would not fit "
                f"the {event.context_window}-token context; {markup_safe(summary)} "
                "(the request only: the session keeps the whole history)",
                soft_wrap=True,
            )
        elif isinstance(event, RepeatedCall):
            call = markup_safe(call_line(event.call))
            if event.result.is_error:
                self._note(
                    f"[yellow]stopped:[/] {call} failed the same way "
                    f"{event.times} times; the turn ends here instead of repeating it",
                    soft_wrap=True,
                )
            else:
                self._note(
                    f"[dim]{call} gave the same result again; "
                    "asking the model to answer without tools[/]",
                    soft_wrap=True,
                )
        elif isinstance(event, SessionMerged):
            self._note(
                "[yellow]session:[/] another writer recorded in this session meanwhile; "
                f"this turn's {event.messages} message(s) are recorded after its turn"
            )
        elif isinstance(event, StepLimitReached):
            self._note(
                f"[yellow]step limit:[/] {event.max_steps} tool round(s) run; asking the model "
                "to answer without tools (raise --max-steps to let it go on)"
            )

    def finish(self) -> None:
        """End the turn's output: no spinner left running, the cursor on a fresh line."""
        self._stop_spinner()
        self._running.clear()
        self._break_line()

    # Helpers.

    def _note(self, line: str, *, soft_wrap: bool | None = None) -> None:
        """`line` on stderr, on a line of its own with no spinner over it."""
        self._stop_spinner()
        self._break_line()
        self.err.print(line, soft_wrap=soft_wrap)

    def _show_result(self, event: ToolCallFinished) -> None:
        text = event.result.content
        lines = text.splitlines() or [""]
        visible = [shorten(line, _RESULT_WIDTH, ellipsis="…") for line in lines[:_RESULT_LINES]]
        if len(lines) > _RESULT_LINES:
            visible.append(f"… {len(lines) - _RESULT_LINES} more line(s)")
        mark = "[red]✗[/]" if event.result.is_error else "[green]←[/]"
        style = "red" if event.result.is_error else "dim"
        first, *rest = visible
        self.err.print(f"  {mark} [{style}]{markup_safe(first)}[/]", soft_wrap=True)
        for line in rest:
            self.err.print(f"    [{style}]{markup_safe(line)}[/]", soft_wrap=True)
        for image in event.images:
            self.err.print(f"    [magenta]{markup_safe(image.placeholder())}[/]", soft_wrap=True)

    def _spin(self, message: str) -> None:
        self._stop_spinner()
        if not self.err.is_terminal:
            return
        self._status = self.err.status(f"[dim]{markup_safe(message)}[/]")
        self._status.start()

    def _stop_spinner(self) -> None:
        if self._status is not None:
            status, self._status = self._status, None
            status.stop()

    def _break_line(self) -> None:
        if self._mid_line:
            self.out.print()
            self._mid_line = False


def call_line(call: ToolUse) -> str:
    """A tool call in one line: `read_file(path="notes.txt")`."""
    args: Any = call.input
    if isinstance(args, dict):
        inner = ", ".join(
            f"{k}={shorten(_json(v), _ARG_WIDTH, ellipsis='…')}" for k, v in args.items()
        )
    else:
        inner = shorten(args if isinstance(args, str) else _json(args), _ARG_WIDTH, ellipsis="…")
    return f"{call.name}({inner})"


def _json(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)
