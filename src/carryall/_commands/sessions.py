"""The `carryall` commands for sessions: `sessions ...`, `recall` and `tui`.

Every reader here says `image_placeholder` where an image was and never
prints base64 unless asked to embed images. Errors are one line on stderr
and a non-zero exit (`_output.fail`, as every command says them). Whole
histories in wire formats go in and out through `carryall.interchange`.
"""

from __future__ import annotations

import functools
import io
import json
import re
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, ParamSpec, TypeVar

import typer

from carryall._commands._output import fail
from carryall.errors import CarryallError

if TYPE_CHECKING:
    from carryall.interchange import WireFormat
    from carryall.sessions import Store

P = ParamSpec("P")
R = TypeVar("R")

_STORE_NOTE = (
    "Sessions live in $CARRYALL_HOME/sessions, or in the user data folder when "
    "CARRYALL_HOME is not set."
)


StoreOption = Annotated[
    str | None,
    typer.Option(
        "--store",
        envvar="CARRYALL_STORE",
        metavar="PATH|URL",
        help=(
            "The session store: a folder or a file: URL. Default: $CARRYALL_STORE, "
            "else the config file's `store`, else the sessions folder below."
        ),
        show_default=False,
    ),
]
SessionId = Annotated[str, typer.Argument(metavar="ID", help="Session id or a unique prefix.")]


class ShowFormat(StrEnum):
    """How `sessions show` and `sessions export` write a session."""

    text = "text"
    markdown = "markdown"
    json = "json"
    html = "html"


class ExportFormat(StrEnum):
    """How `sessions export` writes a session: a reading format, or a wire's messages."""

    text = "text"
    markdown = "markdown"
    json = "json"
    html = "html"
    openai = "openai"
    anthropic = "anthropic"


class ImportFormat(StrEnum):
    """Which history format `sessions import` reads (`carryall.interchange.HistoryFormat`)."""

    auto = "auto"
    openai = "openai"
    anthropic = "anthropic"
    carryall = "carryall"


class Role(StrEnum):
    """A message role, for `recall --role`."""

    user = "user"
    assistant = "assistant"


def _clear_errors(func: Callable[P, R]) -> Callable[P, R]:
    """Turn a carryall error into one line on stderr and exit status 1."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except CarryallError as exc:
            fail(str(exc))

    return wrapper


def _store(location: str | None) -> Store:
    from carryall.sessions import open_store

    return open_store(location)


def _render(
    store: str | None, session_id: str, fmt: ShowFormat, embed_images: bool
) -> tuple[str, str]:
    """A session's full id and its rendering: the one reading `show` and `export` share."""
    from carryall.sessions import render

    session = _store(store).open(session_id)
    messages, times = session.messages(), session.times()
    out = render(
        fmt.value,
        session.meta,
        messages,
        times,
        embed_images=embed_images,
        downgrades=session.downgrades(),
    )
    return session.id, out


def _wire_export(store: str | None, session_id: str, fmt: WireFormat) -> tuple[str, str]:
    """A session's full id and its history as an OpenAI or Anthropic messages file."""
    from carryall.interchange import export_messages

    session = _store(store).open(session_id)
    meta = session.meta
    text = export_messages(fmt, session.messages(), system=meta.system, model=meta.model)
    return session.id, text


# -- sessions list / show / export / import / rm ------------------------------


@_clear_errors
def list_sessions(
    as_json: Annotated[
        bool, typer.Option("--json", help="Print a JSON list instead of a table.")
    ] = False,
    limit: Annotated[
        int | None, typer.Option("--limit", "-n", help="Show only the N newest sessions.")
    ] = None,
    location: StoreOption = None,
) -> None:
    """List sessions, newest first: id, when, backend/model, turns, title.

    Turns count the messages of each session's current history.
    """
    problems: list[str] = []
    infos = _store(location).list(on_error=lambda exc: problems.append(str(exc)))
    if limit is not None:
        infos = infos[:limit]
    for problem in problems:
        typer.echo(f"warning: {problem}", err=True)
    if as_json:
        rows = [
            {
                "id": info.meta.id,
                "created": _iso(info.meta.created),
                "updated": _iso(info.updated),
                "backend": info.meta.backend,
                "model": info.meta.model,
                "turns": info.turns,
                "title": info.meta.title,
                "cwd": info.meta.cwd,
            }
            for info in infos
        ]
        typer.echo(json.dumps(rows, indent=2, ensure_ascii=False))
        return
    if not infos:
        typer.echo("no sessions yet", err=True)
        return
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(box=None, pad_edge=False, padding=(0, 1), header_style="")
    for name in ("ID", "WHEN", "BACKEND/MODEL"):
        table.add_column(name, no_wrap=True)
    table.add_column("TURNS", justify="right", no_wrap=True)
    table.add_column("TITLE", no_wrap=True)
    for info in infos:
        cells = (
            info.meta.id,
            _when(info.meta.created),
            "/".join(p for p in (info.meta.backend, info.meta.model) if p) or "-",
            str(info.turns),
            info.meta.title or "(untitled)",
        )
        # Text, not markup: a title is whatever a person typed, brackets included.
        table.add_row(*(Text(cell) for cell in cells))
    # Wide enough never to cut or wrap a cell: the list is read by scripts too.
    console = Console(file=io.StringIO(), width=1 << 16, highlight=False, emoji=False)
    console.print(table)
    rendered = console.file.getvalue()  # type: ignore[attr-defined]
    typer.echo("\n".join(line.rstrip() for line in rendered.splitlines()))


@_clear_errors
def show(
    session_id: SessionId,
    fmt: Annotated[
        ShowFormat, typer.Option("--format", "-f", help="Output format.")
    ] = ShowFormat.text,
    embed_images: Annotated[
        bool,
        typer.Option(
            "--embed-images",
            help="html/json: include image bytes (data: URIs, base64) instead of placeholders.",
        ),
    ] = False,
    location: StoreOption = None,
) -> None:
    """Print one session as text, Markdown, JSON or self-contained HTML."""
    sys.stdout.write(_render(location, session_id, fmt, embed_images)[1])


@_clear_errors
def export(
    session_id: SessionId,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Write to this file instead of standard output."),
    ] = None,
    fmt: Annotated[
        ExportFormat,
        typer.Option(
            "--format",
            "-f",
            help="Output format: a reading format, or `openai` / `anthropic` for that "
            "API's messages array (with the system prompt), to continue elsewhere.",
        ),
    ] = ExportFormat.json,
    embed_images: Annotated[
        bool,
        typer.Option(
            "--embed-images",
            help="Include image bytes so the export is complete on another machine.",
        ),
    ] = False,
    location: StoreOption = None,
) -> None:
    """Export a session to a file (JSON by default, which `sessions import` reads back).

    Without --embed-images an image is written as its placeholder and
    content hash; importing on this machine restores it from the store.
    The `openai` and `anthropic` formats are the messages those APIs take
    (images always embedded, as the wire carries them), written by the same
    codecs that send requests; `sessions import` reads them back too.
    """
    if fmt == ExportFormat.openai:
        full_id, out = _wire_export(location, session_id, "openai")
    elif fmt == ExportFormat.anthropic:
        full_id, out = _wire_export(location, session_id, "anthropic")
    else:
        full_id, out = _render(location, session_id, ShowFormat(fmt.value), embed_images)
    if output is None or str(output) == "-":
        sys.stdout.write(out)
        return
    try:
        output.write_text(out, encoding="utf-8")
    except OSError as exc:
        fail(f"cannot write {output}: {exc.strerror or exc}")
    typer.echo(f"exported session {full_id} to {output}", err=True)


@_clear_errors
def import_file(
    file: Annotated[
        Path,
        typer.Argument(
            metavar="FILE",
            help="A JSON messages file: a list, or an object with `messages` (and `system`).",
        ),
    ],
    fmt: Annotated[
        ImportFormat,
        typer.Option("--format", "-f", help="The file's format (auto detects it)."),
    ] = ImportFormat.auto,
    backend: Annotated[
        str | None, typer.Option(help="Backend to record (default: the format).")
    ] = None,
    model: Annotated[str | None, typer.Option(help="Model to record.")] = None,
    title: Annotated[
        str | None, typer.Option(help="Title (default: the first thing the user said).")
    ] = None,
    location: StoreOption = None,
) -> None:
    """Import an OpenAI or Anthropic messages JSON file (or a carryall export) as a session."""
    from carryall.interchange import read_messages_file

    store = _store(location)

    def blob(sha: str) -> bytes | None:
        try:
            data: bytes = store.get_blob(sha)
        except CarryallError:
            return None
        return data

    imported = read_messages_file(file, fmt.value, blob=blob)
    session = store.create(
        backend=backend or imported.backend or imported.format,
        model=model or imported.model,
        title=title or imported.title,
        system=imported.system,
    )
    session.record([], imported.messages)
    typer.echo(session.id)
    typer.echo(
        f"imported {len(imported.messages)} messages ({imported.format}) "
        f"from {file} as session {session.id}",
        err=True,
    )


@_clear_errors
def remove(
    session_id: SessionId,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    location: StoreOption = None,
) -> None:
    """Delete a session (asks first), and every image blob no other session refers to."""
    store = _store(location)
    session = store.open(session_id)
    if not yes:
        label = session.meta.title or "(untitled)"
        if not typer.confirm(
            f"Delete session {session.id} ({label}, {len(session)} turns)?", default=False
        ):
            typer.echo("kept", err=True)
            raise typer.Exit(1)
    blobs = store.remove(session.id)
    note = f" and {len(blobs)} image blob(s) only it referred to" if blobs else ""
    typer.echo(f"removed session {session.id}{note}", err=True)


@_clear_errors
def collect(location: StoreOption = None) -> None:
    """Delete the image blobs no session refers to any more (left by older versions or crashes).

    A blob stored since the collection began is kept, so a writer that is
    recording right now keeps the image it is about to refer to.
    """
    store = _store(location)
    removed = store.collect_blobs()
    typer.echo(f"removed {len(removed)} unreferenced image blob(s) from {store.root}", err=True)


@_clear_errors
def redact(
    session_id: SessionId,
    pattern: Annotated[
        str,
        typer.Option(
            "--pattern",
            "-p",
            metavar="REGEX",
            help="A Python regular expression; every match becomes [redacted].",
        ),
    ],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    location: StoreOption = None,
) -> None:
    """Remove a string from a session's every version and from the recall index.

    Unlike every other change to a session, this keeps no earlier version:
    the transcript is rewritten, so the string is gone for good. Signatures
    and image bytes are never searched; signed thinking that matches loses
    its signature. New events are redacted as they are written (built-in
    API key shapes plus the config file's [redact] patterns).
    """
    from carryall.sessions.redact import compile_pattern

    compiled = compile_pattern(pattern, "--pattern")
    store = _store(location)
    full = store.resolve(session_id)
    if not yes and not typer.confirm(
        f"Rewrite session {full} without {pattern!r}? Earlier versions are not kept.",
        default=False,
    ):
        typer.echo("kept", err=True)
        raise typer.Exit(1)
    changed = store.redact(full, compiled)
    if changed:
        typer.echo(
            f"redacted session {full}: {changed} line(s) rewritten; "
            "no earlier version is kept, on purpose",
            err=True,
        )
    else:
        typer.echo(f"session {full}: nothing matched {pattern!r}", err=True)


# -- recall ---------------------------------------------------------------------


@_clear_errors
def recall(
    query: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="QUERY...",
            help="Words to find (all must appear). Taken literally: C++ or a UUID just work.",
        ),
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(help="Only messages since then: 2025-01-31, 2025-01-31T09:00, 7d, 12h, 30m."),
    ] = None,
    role: Annotated[Role | None, typer.Option(help="Only messages with this role.")] = None,
    session: Annotated[
        str | None, typer.Option(help="Only this session (id or unique prefix).")
    ] = None,
    limit: Annotated[int, typer.Option("--limit", "-n", help="At most this many hits.")] = 20,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json", help="Print a JSON list of {session, message, role, time, snippet}."
        ),
    ] = False,
    reindex: Annotated[
        bool, typer.Option("--reindex", help="Rebuild the index from every transcript first.")
    ] = False,
    location: StoreOption = None,
) -> None:
    """Search every session's text, thinking, tool calls, results and image names.

    Best matches first, each with its session id, message index, role, time
    and a snippet. The index updates as sessions are recorded; --reindex
    rebuilds it from the transcripts.
    """
    store = _store(location)
    words = " ".join(query or [])
    if reindex:
        count = store.recall.reindex()
        typer.echo(f"reindexed {count} messages", err=True)
        if not words.strip():
            return
    if not words.strip():
        fail("give words to search for (or --reindex)", 2)
    hits = store.recall.search(
        words,
        since=_since(since) if since else None,
        role=role.value if role else None,
        session=store.resolve(session) if session else None,
        limit=limit,
    )
    if as_json:
        rows = [
            {
                "session": hit.session,
                "message": hit.message,
                "role": hit.role,
                "time": _iso(hit.time),
                "snippet": hit.snippet,
                "matches": [list(span) for span in hit.matches],
            }
            for hit in hits
        ]
        typer.echo(json.dumps(rows, indent=2, ensure_ascii=False))
        return
    if not hits:
        typer.echo(f"no matches for {words!r}", err=True)
        return
    from rich.console import Console
    from rich.text import Text

    console = Console(highlight=False, soft_wrap=True)
    for hit in hits:
        console.print(
            Text(f"{hit.session}  #{hit.message}  {hit.role}  {_when(hit.time)}", style="bold")
        )
        snippet = Text("  " + hit.snippet.replace("\n", " "))
        for start, end in hit.matches:
            # Newlines became single spaces, so offsets hold; two spaces lead.
            snippet.stylize("bold yellow", start + 2, end + 2)
        console.print(snippet)


# -- tui --------------------------------------------------------------------------


@_clear_errors
def tui(location: StoreOption = None) -> None:
    """Browse sessions in the terminal: the list, a transcript, and a recall search box.

    Keys: up/down move through sessions (the one under the cursor opens),
    / searches every session, enter on a hit opens it at that message,
    escape goes back to the list, ctrl+r reloads, ctrl+q quits.
    """
    from carryall.tui import SessionsApp

    SessionsApp(_store(location)).run()


# -- helpers ----------------------------------------------------------------------


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _when(moment: datetime) -> str:
    return moment.astimezone().strftime("%Y-%m-%d %H:%M")


_RELATIVE = re.compile(r"(\d+)\s*([smhdw])")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def _since(text: str) -> datetime:
    """A --since value: a relative age (7d, 12h, 30m, 2w) or an ISO date or time."""
    match = _RELATIVE.fullmatch(text.strip())
    if match:
        amount, unit = int(match.group(1)), match.group(2)
        return datetime.now(UTC) - timedelta(**{_UNITS[unit]: amount})
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise typer.BadParameter(
            f"{text!r} is neither an age (7d, 12h, 30m) nor an ISO date/time", param_hint="--since"
        ) from None
    return moment if moment.tzinfo else moment.astimezone()


def register(app: typer.Typer) -> None:
    """Add `sessions`, `recall` and `tui` to the `carryall` app."""
    sessions_app = typer.Typer(
        name="sessions",
        help=f"List, show, export, import, redact and remove recorded sessions. {_STORE_NOTE}",
        no_args_is_help=True,
    )
    sessions_app.command("list")(list_sessions)
    sessions_app.command("show")(show)
    sessions_app.command("export")(export)
    sessions_app.command("import")(import_file)
    sessions_app.command("rm")(remove)
    sessions_app.command("gc")(collect)
    sessions_app.command("redact")(redact)
    app.add_typer(sessions_app, name="sessions")
    app.command("recall")(recall)
    app.command("tui")(tui)
