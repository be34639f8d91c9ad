"""How every command prints content and says it failed.

Content (a model's text, a tool's output, a title, an error a server sent)
reaches the terminal only through `echo`, `markup_safe` or `snippet_text`, which
show its control characters as escapes (`carryall._text.printable`) and never
read it as console markup. A failure is one `error:` line on stderr, so
`run`, `sessions` and `local` word it alike, and no credential reaches the
terminal: the line is masked (`carryall._secrets.masked`) by key shape, URL
userinfo and every configured key, whatever raised it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, NoReturn

import typer

from carryall._text import printable

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

    from carryall.sessions import SessionInfo

__all__ = [
    "Terminated",
    "echo",
    "fail",
    "listed_title",
    "markup_safe",
    "masked",
    "print_columns",
    "print_error",
    "snippet_text",
    "warn_damage",
]


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, unwinding like Ctrl-C (`carryall.cli.main`), but never shrugged off.

    A Ctrl-C at the chat prompt only cancels the line; a signal to stop
    must end the command, so what catches an interruption to carry on
    lets this one through.
    """


def masked(message: str) -> str:
    """`message` with every credential masked (`carryall._secrets.masked`)."""
    # The key patterns are compiled with the first error, not with every command.
    from carryall._secrets import masked as secrets_masked

    return secrets_masked(message)


def print_columns(console: Console, rows: list[tuple[str, str]]) -> None:
    """Names and what they do, two columns indented by two: a long line wraps in its column.

    Chat's `/help` and `/tools` and `mcp list` print this way, so no line is
    wider than the terminal and none wraps back to its first column. Text,
    not markup: a tool's name and description are whatever its server said.
    """
    from rich.padding import Padding
    from rich.table import Table
    from rich.text import Text

    grid = Table.grid(padding=(0, 2), pad_edge=False)
    grid.add_column(no_wrap=True, style="bold")
    grid.add_column()
    for name, what in rows:
        grid.add_row(Text(printable(name)), Text(printable(what)))
    console.print(Padding(grid, (0, 0, 0, 2)))


def print_error(message: str, console: Console | None = None) -> None:
    """Print `error: <first line>` on stderr, and any further lines (a log tail) dimmed under it."""
    err = console or _stderr()
    message = masked(message)
    first, _, rest = message.partition("\n")
    err.print(f"[bold red]error:[/] {markup_safe(first)}", soft_wrap=True)
    if rest:
        err.print(printable(rest), style="dim", soft_wrap=True, markup=False)


def fail(message: str, code: int = 1, console: Console | None = None) -> NoReturn:
    """Print the error (`print_error`) and leave with `code`."""
    print_error(message, console)
    raise typer.Exit(code)


def markup_safe(text: str) -> str:
    """`text` ready to stand inside console markup: controls shown, brackets escaped."""
    from rich.markup import escape

    return escape(printable(text))


def _stderr() -> Console:
    # rich loads here, on the first line that needs it: a command that prints
    # only plain lines (`sessions list`, `recall`) never pays for it.
    from rich.console import Console

    return Console(stderr=True, highlight=False)


def echo(text: str, *, err: bool = False) -> None:
    """`typer.echo` for a line that holds content: its control characters are shown."""
    typer.echo(printable(text), err=err)


def warn_damage(damage: Iterable[str], console: Console | None = None) -> None:
    """One `warning:` line on stderr per damaged transcript line a reader skipped."""
    notes = list(damage)
    if not notes:
        return
    err = console or _stderr()
    for note in notes:
        err.print(f"[yellow]warning:[/] {markup_safe(note)}", soft_wrap=True)


def listed_title(info: SessionInfo) -> str:
    """A session's title as the lists show it: one line, marked `(failed) ` when it failed.

    `sessions list` and the TUI both read it here, so a session whose last
    prompt failed looks the same wherever it is listed.
    """
    title = (info.meta.title or "(untitled)").replace("\n", " ")
    return ("(failed) " if info.failed else "") + title


def snippet_text(snippet: str, matches: Iterable[tuple[int, int]], style: str) -> Text:
    """A recall snippet on one line, its matches in `style`, every control character shown.

    Newlines become spaces. The escapes lengthen the text, so it is built piece by piece and each
    match's offsets still fall on the words that matched.
    """
    from rich.text import Text

    snippet = snippet.replace("\n", " ")
    out = Text()
    at = 0
    for start, end in sorted(matches):
        if start < at:
            continue
        out.append(printable(snippet[at:start]))
        out.append(printable(snippet[start:end]), style=style)
        at = end
    out.append(printable(snippet[at:]))
    return out
