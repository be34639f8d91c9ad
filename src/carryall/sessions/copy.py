"""Moving sessions between stores: every session, every version, every blob, checked after.

`carryall sessions copy --from URL --to URL` is this module. A session moves
as its store keeps it (`AnyStore.export_events`: the header meta and the
event lines), so versions, times and titles come across unchanged, and
blobs go first so that no copied line points at bytes the target lacks.
After each session is written it is read back from the target and compared
with the source: the same meta, the same event lines, and every blob it
refers to present and matching its hash.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from carryall.errors import TranscriptError
from carryall.sessions._transcript import SessionMeta, Stored, decode_event, has_blob
from carryall.sessions.protocol import AnyStore

__all__ = ["Copied", "copy_sessions"]


@dataclass(frozen=True)
class Copied:
    """What a copy did: sessions written, sessions already there and equal, events and blobs."""

    copied: int
    already: int
    events: int
    blobs: int


def copy_sessions(
    source: AnyStore,
    target: AnyStore,
    *,
    on_session: Callable[[str], None] | None = None,
) -> Copied:
    """Copy every session of `source` into `target` and verify each one there.

    A session the target already holds is left alone when it is equal
    (so a copy that was interrupted can be run again) and is an error when
    it differs: nothing is ever overwritten. `on_session` hears each id as
    it is done.
    """
    copied = already = events = 0
    blobs: set[str] = set()
    for info in reversed(source.list()):  # oldest first: a partial copy is a prefix in time
        session_id = info.meta.id
        meta, lines = source.export_events(session_id)
        hashes = _hashes(lines, f"{source.location} session {session_id}")
        if _holds(target, session_id):
            if target.export_events(session_id) != (meta, lines):
                raise TranscriptError(
                    f"session {session_id} is already in {target.location} and differs from "
                    f"the one in {source.location}; nothing of it was copied"
                )
            already += 1
        else:
            for sha in sorted(hashes - blobs):
                target.put_blob(source.get_blob(sha))
            target.import_events(meta, lines)
            copied += 1
            events += len(lines)
        blobs |= hashes
        _verify(source, target, session_id, meta, lines, hashes)
        if on_session is not None:
            on_session(session_id)
    return Copied(copied=copied, already=already, events=events, blobs=len(blobs))


def _holds(store: AnyStore, session_id: str) -> bool:
    try:
        return store.resolve(session_id) == session_id
    except TranscriptError:
        return False


def _verify(
    source: AnyStore,
    target: AnyStore,
    session_id: str,
    meta: SessionMeta,
    lines: list[bytes],
    hashes: Iterable[str],
) -> None:
    """The session as the target now keeps it equals the source's, blobs included."""
    if target.export_events(session_id) != (meta, lines):
        raise TranscriptError(
            f"session {session_id}: the copy in {target.location} does not equal the source"
        )
    for sha in hashes:
        target.get_blob(sha)  # checked against its hash, so equal bytes


def _hashes(lines: list[bytes], where: str) -> set[str]:
    found: set[str] = set()
    for line_no, line in enumerate(lines, 2):
        if not has_blob(line):
            continue
        for message in decode_event(line, where, line_no).messages:
            found.update(b.sha256 for b in message.content if isinstance(b, Stored) and b.sha256)
    return found
