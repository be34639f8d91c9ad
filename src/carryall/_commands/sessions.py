"""The `carryall` commands for sessions: `sessions ...`, `recall` and `tui`.

Every reader here says `image_placeholder` where an image was and never
prints base64 unless asked to embed images. Errors are one line on stderr
and a non-zero exit (`_output.fail`, as every command says them). Whole
histories in wire formats go in and out through `carryall.interchange`.
"""

from __future__ import annotations

import functools
import json
import re
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, ParamSpec, TypeVar, cast

import typer

from carryall._commands._output import echo, fail, listed_title, snippet_text, warn_damage
from carryall._text import age, json_printable, printable, shorten
from carryall.errors import CarryallError

if TYPE_CHECKING:
    from carryall.agent import Agent
    from carryall.blocks import Message
    from carryall.interchange import WireFormat
    from carryall.sessions import AnySession, AnyStore, SessionInfo
    from carryall.usage import Totals

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


def recorded_in(agent: Agent) -> AnySession | None:
    """The session an agent of `run` or `chat` records into, as the store that opened it gave it."""
    # The agent knows only the `Recorder` part of a session; every session
    # the CLI gives it comes from a store's `create` or `open`, whichever store.
    return cast("AnySession | None", agent.session)


def keep_interrupted_prompt(agent: Agent, start: int, prompt: Message) -> None:
    """Keep a prompt whose turn Ctrl-C stopped before its first answer, in history and session.

    The loop takes such a prompt back (the history is as it was before the
    turn); a person who typed it wants it kept, in `run` as in `chat`.
    """
    if len(agent.messages) == start:
        agent.messages.append(prompt)
        agent.record()


def _reader(func: Callable[P, R]) -> Callable[P, R]:
    """A command that only reads: a broken config file is a warning naming it, not a stop."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        from carryall.config import reading_past_a_broken_config

        with reading_past_a_broken_config(lambda message: warn_damage([message])):
            return func(*args, **kwargs)

    return wrapper


def _store(location: str | None) -> AnyStore:
    from carryall.sessions import open_store

    return open_store(location)


def _render(
    store: str | None, session_id: str, fmt: ShowFormat, embed_images: bool
) -> tuple[str, str]:
    """A session's full id and its rendering: the one reading `show` and `export` share."""
    from carryall.sessions.render import render_session

    session = _store(store).open(session_id)
    warn_damage(session.damage)
    return session.id, render_session(fmt.value, session, embed_images=embed_images)


def _wire_export(store: str | None, session_id: str, fmt: WireFormat) -> tuple[str, str]:
    """A session's full id and its history as an OpenAI or Anthropic messages file."""
    from carryall.interchange import export_messages

    session = _store(store).open(session_id)
    warn_damage(session.damage)
    meta = session.meta
    text = export_messages(fmt, session.messages(), system=session.system, model=meta.model)
    return session.id, json_printable(text)


# -- sessions list / show / export / import / rm ------------------------------


@_clear_errors
@_reader
def list_sessions(
    as_json: Annotated[
        bool, typer.Option("--json", help="Print a JSON list instead of a table.")
    ] = False,
    limit: Annotated[
        int | None, typer.Option("--limit", "-n", help="Show only the N sessions used last.")
    ] = None,
    location: StoreOption = None,
) -> None:
    """List sessions, the one used last first: id, age, turns, backend/model, title.

    Turns count the messages of each session's current history; age is since
    it was last written. The table fits the terminal (titles cut with an
    ellipsis), and one taller than the terminal goes through $PAGER (else
    less); --json gives every field whole.

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
    _paged(_sessions_table(infos, _list_width()))


def _paged(text: str) -> None:
    """Print `text`, through the pager (`$PAGER`, else less) when it is taller than the terminal."""
    import shutil

    if sys.stdout.isatty() and text.count("\n") + 1 >= shutil.get_terminal_size().lines:
        import click

        click.echo_via_pager(text)
        return
    typer.echo(text)


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

    Nothing that names a session is cut: the id, age, turns and
    backend/model stay whole. When they and 30 characters of title do not
    fit on one line, each title goes on its own indented line under its
    row, cut with an ellipsis only there; only a width too narrow for the
    id, age, turns and backend together cuts the backend.
    """
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
    fixed = sum(natural[:4]) + 2 * 4  # two spaces between columns
    stacked = width is not None and fixed + min(natural[4], 30) > width
    shown = headers[:4] if stacked else headers
    limits: list[int | None] = [None] * len(shown)
    if width is not None:
        if stacked:
            # The backend gives way only when the id, age and turns leave it too little.
            limits[3] = max(len(headers[3]), width - sum(natural[:3]) - 2 * 3)
        else:
            limits[4] = width - fixed
    # Laid out here rather than by a rich `Table`, whose general layout cost
    # many times the reading of the sessions themselves: column by column,
    # each cell padded to the column's width in terminal cells or cut with
    # an ellipsis past its limit, two spaces apart, TURNS to the right.
    columns = [
        _column(
            [header, *(printable(row[i], keep="") for row in rows)],
            limits[i],
            right=header == "TURNS",
        )
        for i, header in enumerate(shown)
    ]
    lines = ["  ".join(cells).rstrip() for cells in zip(*columns, strict=True)]
    if not stacked or width is None:
        return "\n".join(lines)
    out = [lines[0]]
    for line, row in zip(lines[1:], rows, strict=True):
        [title] = _column([printable(row[4], keep="")], max(1, width - 2), right=False)
        out += [line, f"  {title.rstrip()}"]
    return "\n".join(out)


def _column(cells: list[str], limit: int | None, *, right: bool) -> list[str]:
    """`cells` each made exactly as wide as the widest (at most `limit`) in terminal cells."""
    from rich.cells import cell_len, set_cell_size

    if all(cell.isascii() for cell in cells):
        width = max(map(len, cells))
        if limit is None or width <= limit:
            # The common case, in C: one character is one cell.
            return [cell.rjust(width) if right else cell.ljust(width) for cell in cells]
    sizes = [cell_len(cell) for cell in cells]
    width = max(sizes) if limit is None else min(max(sizes), limit)
    out = []
    for cell, size in zip(cells, sizes, strict=True):
        if size > width:
            out.append(set_cell_size(cell, width - 1) + "…")
        else:
            pad = " " * (width - size)
            out.append(pad + cell if right else cell + pad)
    return out


@_clear_errors
@_reader
def show(
    session_id: SessionId,
    fmt: Annotated[
        ShowFormat, typer.Option("--format", "-f", help="Output format.")
    ] = ShowFormat.text,
    embed_images: Annotated[
        bool,
        typer.Option(
            "--embed-images",
            help="json: include image bytes (base64) beside the placeholders. The html page "
            "always shows the pictures it holds, inline, so it is self-contained.",
        ),
    ] = False,
    location: StoreOption = None,
) -> None:
    """Print one session as text, Markdown, JSON or self-contained HTML.

    Example: carryall sessions show last --format markdown
    """
    sys.stdout.write(_render(location, session_id, fmt, embed_images)[1])


@_clear_errors
@_reader
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
    """Delete the image blobs no session refers to (a crash mid-write can leave some behind).

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
            help="A Python regular expression; every match becomes \\[redacted].",
        ),
    ],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    location: StoreOption = None,
) -> None:
    """Remove a string from a session's every version and from the recall index.

    Unlike every other change to a session, this keeps no earlier version:
    the transcript is rewritten, so the string is gone for good. Every field
    is searched (text, tool calls and results, attachment names and URLs,
    plain text documents, titles, failed notes, downgrade reasons, the
    working folder); signatures and image bytes never are, and signed
    thinking that matches loses its signature. New events are redacted the
    same way as they are written (built-in API key shapes plus the config
    file's \\[redact] patterns).

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


@_clear_errors
def repair(session_id: SessionId, location: StoreOption = None) -> None:
    """Turn a history no wire will take into the nearest valid one, naming every change.

    For a session that shows but cannot be continued or exported: a call
    answered twice or never, a result for no call, an image in a model's
    turn, a signature from a wire this carryall does not know. The repair
    is recorded as one rewrite that lists its changes; the old history
    stays as an earlier version of the session.

    Example: carryall sessions repair last
    """
    from carryall.sessions.repair import repair_history

    store = _store(location)
    session = store.open(session_id)
    current = session.messages()
    repaired, changes = repair_history(current)
    if not changes:
        echo(f"session {session.id}: every wire takes its history; nothing to repair", err=True)
        return
    session.rewrite(current, repaired, changes=changes)
    for change in changes:
        echo(f"  {change}", err=True)
    echo(
        f"repaired session {session.id}: {len(changes)} change(s), recorded as a rewrite; "
        "the old history is kept as an earlier version",
        err=True,
    )


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


# -- stats ----------------------------------------------------------------------


@_clear_errors
@_reader
def stats(
    since: Annotated[
        str | None,
        typer.Option(help="Only requests since then: 2025-01-31, 2025-01-31T09:00, 7d, 12h."),
    ] = None,
    until: Annotated[
        str | None,
        typer.Option(help="Only requests until then, in the same forms as --since."),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print every figure as JSON instead of tables.")
    ] = False,
    location: StoreOption = None,
) -> None:
    """What the recorded requests used and cost: per session, per model, per backend.

    Tokens follow one meaning on every wire: input excludes the cache (its
    reads and writes are counted apart) and output includes reasoning. Each
    request is priced when it was sent, from genai-prices (the cost extra);
    a price nobody knows is a dash, a local model is free. CACHE% is the
    share of input tokens read from the cache.

    Example: carryall sessions stats --since 7d
    """
    from carryall.sessions.stats import usage_stats

    start = _since(since) if since else None
    end = _since(until, "--until") if until else None
    if start is not None and end is not None and end < start:
        fail("--until is before --since: the window holds no request", 2)
    problems: list[str] = []
    found = usage_stats(
        _store(location), since=start, until=end, on_error=lambda e: problems.append(str(e))
    )
    for problem in problems:
        echo(f"warning: {problem}", err=True)
    if as_json:
        text = json.dumps(found.as_dict(), indent=2, ensure_ascii=False)
        typer.echo(json_printable(text))
        return
    if not found.total.requests:
        echo("no recorded usage" + (" in that window" if since or until else ""), err=True)
        return
    from carryall.usage import format_cost

    def table(heading: str, rows: list[tuple[str, Totals]]) -> list[str]:
        out = [f"{heading:<32} {'REQ':>4} {'IN':>7} {'OUT':>7} {'CACHE%':>6} {'COST':>18}"]
        for name, totals in rows:
            share = totals.cache_read_share
            out.append(
                f"{printable(shorten(name, 32), keep=''):<32} {totals.requests:>4} "
                f"{_count(totals.input_tokens):>7} {_count(totals.output_tokens):>7} "
                f"{'' if share is None else f'{share:.0%}':>6} {format_cost(totals.cost):>18}"
            )
        return out

    by_session = [(f"{row.id} {row.title or ''}".rstrip(), row.totals) for row in found.sessions]
    lines = [
        *table("SESSION", by_session),
        "",
        *table("MODEL", [(f"{b}/{m}", t) for (b, m), t in found.by_model()]),
        "",
        *table("BACKEND", found.by_backend()),
        "",
        "Total: " + found.total.summary(),
    ]
    _paged("\n".join(lines))


def _count(tokens: int) -> str:
    """A token count in at most 7 characters: 950, 12,345, 1.2M."""
    if tokens < 1_000_000:
        return f"{tokens:,}"
    return f"{tokens / 1_000_000:.1f}M"


# -- recall ---------------------------------------------------------------------


@_clear_errors
@_reader
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
    indexing = _Indexing()
    try:
        hits = store.recall.search(
            words,
            since=_since(since) if since else None,
            role=role.value if role else None,
            session=store.resolve(session) if session else None,
            limit=limit,
            progress=indexing,
        )
    except KeyboardInterrupt:
        indexing.stopped()
        raise
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


class _Indexing:
    """`recall`'s account on stderr of a long catch-up of the index (a first search).

    Silent below `SHOWN_FROM` sessions, where the wait is short. On a
    terminal one line counts up in place; elsewhere (a log) one line says
    the catch-up began and one that it ended.
    """

    SHOWN_FROM = 100

    def __init__(self) -> None:
        self.done = self.total = 0
        self._tty = sys.stderr.isatty()
        self._shown = 0.0

    def __call__(self, done: int, total: int) -> None:
        import time

        self.done, self.total = done, total
        if total < self.SHOWN_FROM:
            return
        if not self._tty:
            if done == 0:
                typer.echo(
                    f"recall: indexing {total:,} sessions (Ctrl-C stops; what is indexed is kept)",
                    err=True,
                )
            elif done == total:
                typer.echo(f"recall: indexed {total:,} sessions", err=True)
            return
        clock = time.monotonic()
        if done not in (0, total) and clock - self._shown < 0.1:
            return
        self._shown = clock
        end = "\n" if done == total else ""
        sys.stderr.write(
            f"\rrecall: indexed {done:,} of {total:,} sessions "
            f"(Ctrl-C stops; what is indexed is kept){end}"
        )
        sys.stderr.flush()

    def stopped(self) -> None:
        """Ctrl-C during the catch-up: say how far it got and that the rest waits."""
        if self.total >= self.SHOWN_FROM and self.done < self.total:
            typer.echo(
                f"\nrecall: stopped after indexing {self.done:,} of {self.total:,} sessions; "
                "the next search goes on from there",
                err=True,
            )


# -- tui --------------------------------------------------------------------------


@_clear_errors
@_reader
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


def _since(text: str, option: str = "--since") -> datetime:
    """A --since (or --until) value: a relative age (7d, 12h, 30m, 2w) or an ISO date or time."""
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
            f"{text!r} is neither an age (7d, 12h, 30m) nor an ISO date/time", param_hint=option
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
    sessions_app.command("stats")(stats)
    sessions_app.command("export")(export)
    sessions_app.command("import")(import_file)
    sessions_app.command("rm")(remove)
    sessions_app.command("gc")(collect)
    sessions_app.command("redact")(redact)
    sessions_app.command("repair")(repair)
    sessions_app.command("copy")(copy)
    app.add_typer(sessions_app, name="sessions")
    app.command("recall")(recall)
    app.command("tui")(tui)
