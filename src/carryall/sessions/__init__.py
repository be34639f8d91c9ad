"""Sessions: every run recorded append-only, read back, rendered and searched.

store = Store()                                   # $CARRYALL_HOME/sessions
session = store.create(backend="anthropic", model="...", cwd=".")
session.record(started_from, left_behind)         # "append" or "rewrite"
store.open(session.id).messages()                 # the history to continue
store.recall.search("flaky test")                 # ranked hits across sessions

`Store` is a `SessionStore` (the transcripts, which know no index) with its
`RecallIndex` subscribed as a `StoreListener`; other derived data listens
the same way (`SessionStore(listeners=[...])`). `open_store` opens it, or
the PostgreSQL store (`carryall.sessions.postgres`) for a `postgresql://`
URL; both keep the promises of `AnyStore` (`carryall.sessions.protocol`). Importing and exporting
whole histories in wire formats is `carryall.interchange`.
"""

from carryall.sessions._core import SessionInfo
from carryall.sessions._transcript import FORMAT_VERSION, SessionMeta, SystemChange
from carryall.sessions.indexed import Store, open_store
from carryall.sessions.jsonl import (
    Recorded,
    Session,
    SessionStore,
    StoreListener,
    default_root,
)
from carryall.sessions.protocol import AnySession, AnyStore, NewSession, Recall, RecordKind
from carryall.sessions.recall import Hit, RecallIndex, fts_query
from carryall.sessions.render import (
    export_dict,
    render,
    render_html,
    render_json,
    render_markdown,
    render_message_text,
    render_text,
    searchable_text,
)

__all__ = [
    "FORMAT_VERSION",
    "AnySession",
    "AnyStore",
    "Hit",
    "NewSession",
    "Recall",
    "RecallIndex",
    "RecordKind",
    "Recorded",
    "Session",
    "SessionInfo",
    "SessionMeta",
    "SessionStore",
    "Store",
    "StoreListener",
    "SystemChange",
    "default_root",
    "export_dict",
    "fts_query",
    "open_store",
    "render",
    "render_html",
    "render_json",
    "render_markdown",
    "render_message_text",
    "render_text",
    "searchable_text",
]
