"""`carryall chat`'s conversation: line editing, history, slash commands and kept prompts.

At a terminal the lines are read by prompt_toolkit (the library made for
this): arrow keys edit, Up and Ctrl-R recall earlier lines from a history
kept across runs (`carryall.paths.chat_history_file`), Esc then Enter starts
a new line within a prompt. From a pipe the lines are read plainly, one
prompt per line, so a script can drive a chat too. Either way a line that
ends with a backslash goes on on the next line.

A line starting with `/` is a command to carryall, never a prompt: an
unknown one is an error that sends nothing, and `//` sends a leading slash.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Final, Protocol

from rich.console import Console
from rich.padding import Padding

from carryall._commands._display import Display
from carryall._commands._images import named_image, sendable
from carryall._commands._output import Terminated, markup_safe, print_columns, print_error
from carryall._commands.sessions import keep_interrupted_prompt, recorded_in
from carryall.blocks import Document, Image, Message
from carryall.errors import CarryallError

if TYPE_CHECKING:
    from prompt_toolkit.history import FileHistory

    from carryall.agent import Agent

__all__ = ["COMMANDS", "converse"]

_PROMPT: Final = "you> "

COMMANDS: Final = {
    "/help": "list these commands",
    "/image PATH|URL": "attach an image or a document (.pdf, .txt) to the next prompt",
    "/system TEXT": "set the system prompt from the next turn on (no TEXT clears it)",
    "/model NAME": "ask for another model of the same backend from the next turn on",
    "/tools": "list the tools the model may call",
    "/save PATH": "write the conversation so far to PATH as Markdown",
    "/usage": "the tokens this chat has used and what they cost",
    "/exit, /quit": "leave (so does Ctrl-D)",
}
"""Every slash command and what it does, as `/help` prints it."""


_HANDLERS: Final = {
    "/help": "_help",
    "/image": "_image",
    "/system": "_system",
    "/model": "_model",
    "/tools": "_tools",
    "/save": "_save",
    "/usage": "_usage",
    "/exit": "_exit",
    "/quit": "_exit",
}
"""Each command's method of `_Chat`."""


class _Lines(Protocol):
    def read(self) -> str:
        """The next line typed; EOFError at the end, KeyboardInterrupt on Ctrl-C."""
        ...


class _TerminalLines:
    """Lines read with prompt_toolkit: editing, persistent history, Esc-Enter for a new line."""

    def __init__(self, history_file: Path) -> None:
        from prompt_toolkit import PromptSession
        from prompt_toolkit.history import InMemoryHistory
        from prompt_toolkit.key_binding import KeyBindings
        from prompt_toolkit.key_binding.key_processor import KeyPressEvent

        keys = KeyBindings()

        @keys.add("escape", "enter")
        def _newline(event: KeyPressEvent) -> None:
            event.current_buffer.insert_text("\n")

        try:
            history_file.parent.mkdir(parents=True, exist_ok=True)
            history: FileHistory | InMemoryHistory = redacted_history(history_file)
        except OSError:
            # A read-only home still gets editing and this run's history.
            history = InMemoryHistory()
        self._session: PromptSession[str] = PromptSession(
            history=history, key_bindings=keys, enable_history_search=False
        )

    def read(self) -> str:
        return self._session.prompt(_PROMPT, prompt_continuation="... ")


class _PlainLines:
    """Lines read from a pipe (or anything not a terminal), one prompt each."""

    def __init__(self, console: Console) -> None:
        self._console = console

    def read(self) -> str:
        return self._console.input(f"[bold green]{_PROMPT.strip()}[/] ")


def redacted_history(path: Path) -> FileHistory:
    """The line history kept across runs, every line redacted before it is written.

    A line typed at the prompt may hold a key, and the file outlives the
    session: it passes the same redaction as everything a session stores
    (the built-in shapes and the config file's `[redact]` patterns). Up
    recalls this run's lines as typed; the file keeps them redacted.
    """
    from prompt_toolkit.history import FileHistory

    from carryall.sessions.redact import configured_redactor

    redactor = configured_redactor()

    class _Redacted(FileHistory):
        def store_string(self, string: str) -> None:
            super().store_string(redactor.text(string))

    return _Redacted(str(path))


def _lines(out: Console, history_file: Path, terminal: bool) -> _Lines:
    return _TerminalLines(history_file) if terminal else _PlainLines(out)


@dataclass
class _Chat:
    """What a conversation keeps between lines: the agent and what waits for the next prompt."""

    agent: Agent
    display: Display
    out: Console
    err: Console
    pending: list[Image | Document] = field(default_factory=list)
    """Images (`-i`, `/image`) that go with the next prompt."""
    done: bool = False

    # -- commands -----------------------------------------------------------

    def command(self, line: str) -> None:
        name, _, argument = line.partition(" ")
        argument = argument.strip()
        method = _HANDLERS.get(name)
        if method is None:
            print_error(
                f"unknown command {name}; /help lists them (// sends a leading /)", self.err
            )
            return
        handler: Callable[[str], None] = getattr(self, method)
        handler(argument)

    def _usage(self, argument: str) -> None:
        from carryall.usage import responses_total

        backend = self.agent.backend
        totals = responses_total(self.display.responses, backend.name, backend.model)
        self.err.print(f"[dim]{markup_safe(totals.line())}[/]")

    def _help(self, argument: str) -> None:
        print_columns(self.err, list(COMMANDS.items()))
        self.err.print(
            Padding(
                "[dim]Enter sends; Esc then Enter, or a line ending in \\, starts a new line; "
                "Up recalls earlier lines; Ctrl-C stops a turn (your prompt is kept).[/]",
                (0, 0, 0, 2),
            )
        )

    def _image(self, argument: str) -> None:
        if not argument:
            print_error("/image needs a PATH", self.err)
            return
        try:
            [image] = sendable([named_image(argument)], self.agent.backend)
        except CarryallError as exc:
            print_error(str(exc), self.err)
            return
        self.pending.append(image)
        self.err.print(
            f"[dim]attached {markup_safe(image.placeholder())} to your next prompt "
            f"({len(self.pending)} waiting)[/]"
        )

    def _system(self, argument: str) -> None:
        session = recorded_in(self.agent)
        if session is not None:
            # Recorded now, not with the next turn: a chat left before it is
            # still continued (`-c`) with the prompt it was given.
            try:
                session.change_system(argument or None)
            except CarryallError as exc:
                print_error(f"the system prompt is not changed: {exc}", self.err)
                return
        self.agent.system = argument or None
        said = "cleared" if not argument else "set"
        self.err.print(f"[dim]system prompt {said} from the next turn on[/]")

    def _model(self, argument: str) -> None:
        if not argument:
            self.err.print(f"[dim]model: {markup_safe(self.agent.backend.model)}[/]")
            return
        self.agent.backend.model = argument
        self.err.print(f"[dim]model {markup_safe(argument)} from the next turn on[/]")

    def _tools(self, argument: str) -> None:
        if not self.agent.tools:
            self.err.print("[dim]no tools are offered (--tools)[/]")
        rows = [
            (name, tool.spec.description.splitlines()[0] if tool.spec.description else "")
            for name, tool in self.agent.tools.items()
        ]
        if rows:
            print_columns(self.err, rows)

    def _save(self, argument: str) -> None:
        session = recorded_in(self.agent)
        if not argument:
            where = f"session {session.id}" if session is not None else "no session (--no-record)"
            self.err.print(
                f"[dim]every turn is recorded as it ends: {markup_safe(where)}; "
                "/save PATH writes a Markdown copy[/]"
            )
            return
        import msgspec

        from carryall.sessions import SessionMeta, render_markdown
        from carryall.sessions.redact import configured_redactor

        meta = (
            session.meta
            if session is not None
            else SessionMeta(id="(not recorded)", created=datetime.now(UTC))
        )
        meta = msgspec.structs.replace(
            meta, system=self.agent.system, model=self.agent.backend.model
        )
        # A copy of the session is what the session keeps: redacted the same way.
        redactor = configured_redactor()
        text = render_markdown(redactor.walk(meta), redactor.history(self.agent.messages))
        try:
            Path(argument).expanduser().write_text(text, encoding="utf-8")
        except OSError as exc:
            print_error(f"cannot write {argument}: {exc.strerror or exc}", self.err)
            return
        self.err.print(
            f"[dim]saved {len(self.agent.messages)} message(s) to {markup_safe(argument)}[/]"
        )

    def _exit(self, argument: str) -> None:
        self.done = True

    # -- turns --------------------------------------------------------------

    def send(self, text: str) -> None:
        images, self.pending = self.pending, []
        start = len(self.agent.messages)
        try:
            self.agent.send(text, images)
        except KeyboardInterrupt as exc:
            self.display.finish()
            keep_interrupted_prompt(self.agent, start, Message.user(text, images))
            if isinstance(exc, Terminated):
                raise
            self.err.print(
                "[yellow]interrupted[/]: the turn was stopped; your prompt is kept "
                "and the conversation goes on"
            )
            return
        except CarryallError as exc:
            self.display.finish()
            print_error(str(exc), self.err)
            return
        self.display.finish()


def converse(
    agent: Agent,
    display: Display,
    out: Console,
    err: Console,
    *,
    images: list[Image | Document],
    history_file: Path,
    terminal: bool,
) -> None:
    """Take turns until Ctrl-D or /exit; `images` go with the first prompt."""
    chat = _Chat(agent, display, out, err, pending=list(images))
    lines = _lines(out, history_file, terminal)
    while not chat.done:
        try:
            text = _read_prompt(lines)
        except EOFError:
            out.print()
            break
        except Terminated:
            raise
        except KeyboardInterrupt:
            out.print()
            err.print("[dim](Ctrl-D or /exit to leave)[/]")
            continue
        stripped = text.strip()
        if not stripped:
            continue
        if stripped.startswith("/") and not stripped.startswith("//"):
            chat.command(stripped)
            continue
        chat.send(text[1:] if stripped.startswith("//") else stripped)


def _read_prompt(lines: _Lines) -> str:
    """One prompt: a line, joined with the next while it ends with a backslash."""
    parts = [lines.read()]
    while parts[-1].endswith("\\"):
        parts[-1] = parts[-1][:-1]
        parts.append(lines.read())
    return "\n".join(parts)
