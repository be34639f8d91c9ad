"""`Store`: the session store with its recall index listening, as carryall uses it.

`SessionStore` (in `store`) keeps the transcripts and knows no index;
`RecallIndex` (in `recall`) keeps the full-text index and reads the store
through its public methods. This is the one place the two are put together,
so the imports run one way (indexed -> recall -> store -> transcript) and a
store without an index is just `SessionStore`. Every `run`, `chat` and
`sessions import` opens `Store()`, so `carryall recall` finds what they
recorded without a catch-up pass.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

from carryall.sessions.recall import RecallIndex
from carryall.sessions.redact import Redactor
from carryall.sessions.store import SessionStore, StoreListener

__all__ = ["Store"]


class Store(SessionStore):
    """A session store whose recall index hears every write and every removal.

    `Store()` uses `default_root()`; tests and tools pass their own root.
    The index is derived data: a failure to update it never fails a
    recording, and a search first catches it up from the files. With
    `recall=False` the index does not listen; it is still there to search,
    so that only moves the indexing cost to the next search.
    """

    def __init__(
        self,
        root: str | os.PathLike[str] | None = None,
        *,
        recall: bool = True,
        listeners: Iterable[StoreListener] = (),
        lock_timeout: float = 30.0,
        redactor: Redactor | None = None,
    ) -> None:
        super().__init__(root, listeners=listeners, lock_timeout=lock_timeout, redactor=redactor)
        self.recall = RecallIndex(self)
        """The full-text index over every session (`carryall recall`)."""
        if recall:
            self.listeners.append(self.recall)

    def redact(self, session_id: str, pattern: str | re.Pattern[str]) -> int:
        """`SessionStore.redact`, then the index compacted so no deleted row keeps the string."""
        changed = super().redact(session_id, pattern)
        self.recall.purge()
        return changed
