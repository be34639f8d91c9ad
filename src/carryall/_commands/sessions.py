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

from carryall._commands._output import echo, fail, listed_title, snippet_text, warn_damage
from carryall._text import age, json_printable, printable
from carryall.errors import CarryallError

if TYPE_CHECKING:
    from carryall.interchange import WireFormat
    from carryall.sessions import AnyStore, SessionInfo

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
            "The session store: a folder, a file: URL or a postgresql:// URL. "
            "Default: $CARRYALL_STORE, "
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


def _store(location: str | None) -> AnyStore:
    from carryall.sessions import open_store

    return open_store(location)


def _render(
    store: str | None, session_id: str, fmt: ShowFormat, embed_images: bool
) -> tuple[str, str]:
    """A session's full id and its rendering: the one reading `show` and `export` share."""
    from carryall.sessions import render

    session = _store(store).open(session_id)
    warn_damage(session.damage)
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
    warn_damage(session.damage)
    meta = session.meta
    text = export_messages(fmt, session.messages(), system=meta.system, model=meta.model)
    return session.id, json_printable(text)


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
    """List sessions, newest first: id, age, turns, backend/model, title.

    Turns count the messages of each session's current history; age is since
    it was last written. The table fits the terminal (titles cut with an
    ellipsis); --json gives every field whole.

    Example: carryall sessions list -n 10
    """
    problems: list[str] = []
    infos = _store(location).list(on_error=lambda exc: problems.append(str(exc)))
    if limit is not None:
        infos = infos[:limit]
    for problem in problems:
        echo(f"warning: {problem}", err=True)
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
                "failed": info.failed,
            }
            for info in infos
        ]
        typer.echo(json_printable(json.dumps(rows, indent=2, ensure_ascii=False)))
        return
    if not infos:
        typer.echo("no sessions yet", err=True)
        return
    typer.echo(_sessions_table(infos, _list_width()))


def _list_width() -> int | None:
    """The columns `sessions list` fits: the terminal's, `$COLUMNS`, else none (never cut)."""
    import os
    import shutil

    if sys.stdout.isatty():
        return shutil.get_terminal_size().columns
    columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() and int(columns) > 0 else None


def _sessions_table(infos: list[SessionInfo], width: int | None) -> str:
    """The sessions as a table `width` columns wide (`None`: as wide as the cells).

    At 80 columns every row keeps its whole id, age and turns and a title of
    at least 30 characters, cut with an ellipsis; the backend column gives
    way first.
    """
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    now = datetime.now(UTC)
    rows = [
        (
            info.meta.id,
            age(info.updated, now),
            str(info.turns),
            "/".join(p for p in (info.meta.backend, info.meta.model) if p) or "-",
            listed_title(info),
        )
        for info in infos
    ]
    headers = ("ID", "AGE", "TURNS", "BACKEND", "TITLE")
    natural = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(headers)]
    limits: list[int | None] = [None] * len(headers)
    if width is not None:
        # Two spaces between columns. Id, age and turns are kept whole; the
        # backend gives way to a title of at least 30 characters, then the
        # title takes what is left.
        left = width - sum(natural[:3]) - 2 * (len(headers) - 1)
        backend = max(len(headers[3]) // 2, min(natural[3], left - 30))
        limits[3], limits[4] = backend, max(30, left - backend)
    table = Table(box=None, pad_edge=False, padding=(0, 1), header_style="")
    for header, limit in zip(headers, limits, strict=True):
        table.add_column(
            header,
            no_wrap=True,
            overflow="ellipsis",
            max_width=limit,
            justify="right" if header == "TURNS" else "left",
        )
    for row in rows:
        # Text, not markup: a title is whatever a person typed, brackets included.
        table.add_row(*(Text(printable(cell, keep="")) for cell in row))
    console = Console(
        file=io.StringIO(), width=width or 1 << 16, highlight=False, emoji=False, color_system=None
    )
    console.print(table)
    rendered = console.file.getvalue()  # type: ignore[attr-defined]
    return "\n".join(line.rstrip() for line in rendered.splitlines())


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
    """Print one session as text, Markdown, JSON or self-contained HTML.

    Example: carryall sessions show last --format markdown
    """
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

    Example: carryall sessions export last -f openai -o chat.json
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
    echo(f"exported session {full_id} to {output}", err=True)


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
        str | None,
        typer.Option(help="Backend to record (default: a carryall export's own, else none)."),
    ] = None,
    model: Annotated[str | None, typer.Option(help="Model to record.")] = None,
    title: Annotated[
        str | None, typer.Option(help="Title (default: the first thing the user said).")
    ] = None,
    location: StoreOption = None,
) -> None:
    """Import an OpenAI or Anthropic messages JSON file (or a carryall export) as a session.

    A file with no messages, or with a history no request could carry (a
    tool result that answers no call), is refused before anything is written.
    Whatever the file held that no block keeps is named, one line each, and
    recorded with the session.

    Example: carryall sessions import chat.json -f openai
    """
    from carryall.interchange import read_messages_file

    store = _store(location)

    def blob(sha: str) -> bytes | None:
        try:
            data: bytes = store.get_blob(sha)
        except CarryallError:
            return None
        return data

    imported = read_messages_file(file, fmt.value, blob=blob)
    # A wire's messages file says nothing of where it ran, so no backend is
    # claimed for it (resuming then uses the default one, or -b); a carryall
    # export names the backend it really ran on.
    session = store.create(
        backend=backend or imported.backend,
        model=model or imported.model,
        title=title or imported.title,
        system=imported.system,
        origin=f"{imported.format} messages from {file}",
    )
    session.record([], imported.messages, imported.downgrades)
    echo(session.id)
    if imported.downgrades:
        from carryall.sessions.render import downgrade_line

        for downgrade in imported.downgrades:
            echo(f"not kept: {downgrade_line(downgrade)}", err=True)
    echo(
        f"imported {len(imported.messages)} messages ({imported.format}) "
        f"from {file} as session {session.id}",
        err=True,
    )


@_clear_errors
def remove(
    session_ids: Annotated[
        list[str] | None,
        typer.Argument(metavar="ID...", help="Session ids, unique prefixes or `last`."),
    ] = None,
    empty: Annotated[
        bool, typer.Option("--empty", help="Also every session with no messages.")
    ] = False,
    failed: Annotated[
        bool,
        typer.Option(
            "--failed", help="Also every session whose last prompt failed (shown as (failed))."
        ),
    ] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    location: StoreOption = None,
) -> None:
    """Delete sessions (asks first), and every image blob no other session refers to.

    Example: carryall sessions rm --empty --failed -y
    """
    store = _store(location)
    # Every id is resolved before anything is deleted: a typo stops the
    # whole command rather than half of it.
    chosen: dict[str, str] = {}
    for session_id in session_ids or []:
        session = store.open(session_id)
        chosen[session.id] = f"{session.meta.title or '(untitled)'}, {len(session)} turns"
    if empty or failed:
        for info in store.list(on_error=lambda exc: None):
            if empty and info.turns == 0:
                chosen.setdefault(info.meta.id, "no messages")
            elif failed and info.failed is not None:
                chosen.setdefault(info.meta.id, f"failed: {info.failed}")
    if not session_ids and not empty and not failed:
        fail("name the sessions to remove (ID..., --empty or --failed)", 2)
    if not chosen:
        typer.echo("no session to remove", err=True)
        return
    if not yes:
        listed = "\n".join(f"  {full} ({label})" for full, label in chosen.items())
        question = printable(f"Delete {len(chosen)} session(s)?\n{listed}", keep="\n")
        if not typer.confirm(f"{question}\n", default=False):
            typer.echo("kept", err=True)
            raise typer.Exit(1)
    for full in chosen:
        blobs = store.remove(full)
        note = f" and {len(blobs)} image blob(s) only it referred to" if blobs else ""
        typer.echo(f"removed session {full}{note}", err=True)


@_clear_errors
def collect(location: StoreOption = None) -> None:
    """Delete the image blobs no session refers to any more (left by older versions or crashes).

    A blob stored since the collection began is kept, so a writer that is
    recording right now keeps the image it is about to refer to.

    Example: carryall sessions gc
    """
    store = _store(location)
    removed = store.collect_blobs()
    typer.echo(f"removed {len(removed)} unreferenced image blob(s) from {store.location}", err=True)


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

    Example: carryall sessions redact last -p 'corp-[0-9a-f]{32}'
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
        echo(
            f"redacted session {full}: {changed} line(s) rewritten; "
            "no earlier version is kept, on purpose",
            err=True,
        )
    else:
        echo(f"session {full}: nothing matched {pattern!r}", err=True)


# -- copy -----------------------------------------------------------------------


@_clear_errors
def copy(
    source: Annotated[
        str,
        typer.Option(
            "--from", metavar="PATH|URL", help="The store to copy from: a folder or a URL."
        ),
    ],
    target: Annotated[
        str,
        typer.Option("--to", metavar="PATH|URL", help="The store to copy into: a folder or a URL."),
    ],
) -> None:
    """Copy every session, with every version and image blob, to another store, then verify it.

    Each session is read back from the target and compared with the source.
    A session the target already holds is skipped when equal (so an
    interrupted copy can be run again) and is an error when it differs:
    nothing is overwritten.

    Example: carryall sessions copy --from ~/.local/share/carryall/sessions --to postgresql://host/db
    """
    from carryall.sessions import open_store
    from carryall.sessions.copy import copy_sessions

    source_store, target_store = open_store(source), open_store(target)
    done = copy_sessions(source_store, target_store)
    typer.echo(
        f"copied {done.copied} session(s) ({done.events} events, {done.blobs} blob(s)) from "
        f"{source_store.location} to {target_store.location}, verified equal"
        + (f"; {done.already} already there and equal" if done.already else ""),
        err=True,
    )


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

    Example: carryall recall lighthouse --since 7d --role user
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
        typer.echo(json_printable(json.dumps(rows, indent=2, ensure_ascii=False)))
        return
    if not hits:
        echo(f"no matches for {words!r}", err=True)
        return
    from rich.console import Console
    from rich.text import Text

    console = Console(highlight=False, soft_wrap=True)
    for hit in hits:
        console.print(
            Text(f"{hit.session}  #{hit.message}  {hit.role}  {_when(hit.time)}", style="bold")
        )
        console.print(Text("  ") + snippet_text(hit.snippet, hit.matches, "bold yellow"))


# -- tui --------------------------------------------------------------------------


@_clear_errors
def tui(location: StoreOption = None) -> None:
    """Browse sessions in the terminal: the list, a transcript, and a recall search box.

    Keys: up/down move through sessions (the one under the cursor opens),
    / searches every session, enter on a hit opens it at that message,
    escape goes back to the list, ctrl+r reloads, ctrl+q quits.

    Example: carryall tui --store /srv/team/sessions
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
    text = printable(text, keep="")
    match = _RELATIVE.fullmatch(text.strip())
    if match:
        try:
            amount = int(match.group(1))
            return max(datetime.now(UTC) - timedelta(**{_UNITS[match.group(2)]: amount}), _EPOCH)
        except (OverflowError, ValueError):  # ValueError: more digits than int() reads
            return _EPOCH  # further back than any date: every message is since then
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise typer.BadParameter(
            f"{text!r} is neither an age (7d, 12h, 30m) nor an ISO date/time", param_hint="--since"
        ) from None
    if moment.tzinfo is None:
        try:
            moment = moment.astimezone()
        except (ValueError, OverflowError, OSError):  # year 1: no local offset applies
            moment = moment.replace(tzinfo=UTC)
    # Every recorded time is after 1970; the bound keeps later arithmetic in range.
    return max(moment, _EPOCH)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def register(app: typer.Typer) -> None:
    """Add `sessions`, `recall` and `tui` to the `carryall` app."""
    sessions_app = typer.Typer(
        name="sessions",
        help=(
            f"List, show, export, import, copy, redact and remove recorded sessions. {_STORE_NOTE}"
        ),
        no_args_is_help=True,
    )
    sessions_app.command("list")(list_sessions)
    sessions_app.command("show")(show)
    sessions_app.command("export")(export)
    sessions_app.command("import")(import_file)
    sessions_app.command("rm")(remove)
    sessions_app.command("gc")(collect)
    sessions_app.command("redact")(redact)
    sessions_app.command("copy")(copy)
    app.add_typer(sessions_app, name="sessions")
    app.command("recall")(recall)
    app.command("tui")(tui)
