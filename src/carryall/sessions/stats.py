"""What sessions used and cost, added up: per session, per model, per backend, over a window.

`usage_stats` reads every session a store holds that may have a request in
the window (a session last written before it starts cannot) and adds up
the `RequestUsage` records whose time falls in it, each priced when it was
sent (`carryall.usage`). Prices are looked up only for the records
counted, so a store with no usage loads no price data.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from carryall.errors import TranscriptError
from carryall.sessions._transcript import format_time
from carryall.usage import Totals

if TYPE_CHECKING:
    from carryall.sessions.protocol import AnyStore

__all__ = ["SessionUsage", "UsageStats", "usage_stats"]


@dataclass
class SessionUsage:
    """One session's totals in the window, with what a table names it by."""

    id: str
    title: str | None
    backend: str
    model: str
    totals: Totals = field(default_factory=Totals)


@dataclass
class UsageStats:
    """Totals over a window: each session's, each model's, each backend's, and all of them.

    Sessions are the one written last first; models and backends the most
    requested first. A model is keyed by backend and the model asked for
    (the model that answered may be a dated version of it).
    """

    since: datetime | None = None
    until: datetime | None = None
    sessions: list[SessionUsage] = field(default_factory=list)
    models: dict[tuple[str, str], Totals] = field(default_factory=dict)
    backends: dict[str, Totals] = field(default_factory=dict)
    total: Totals = field(default_factory=Totals)

    def as_dict(self) -> dict[str, Any]:
        """The stats as JSON values (`Totals.as_dict` for every row)."""
        return {
            "since": None if self.since is None else format_time(self.since),
            "until": None if self.until is None else format_time(self.until),
            "sessions": [
                {
                    "id": s.id,
                    "title": s.title,
                    "backend": s.backend,
                    "model": s.model,
                    **s.totals.as_dict(),
                }
                for s in self.sessions
            ],
            "models": [
                {"backend": backend, "model": model, **totals.as_dict()}
                for (backend, model), totals in self.by_model()
            ],
            "backends": [
                {"backend": backend, **totals.as_dict()} for backend, totals in self.by_backend()
            ],
            "total": self.total.as_dict(),
        }

    def by_model(self) -> list[tuple[tuple[str, str], Totals]]:
        """`((backend, model), totals)` rows, the most requested first."""
        return sorted(self.models.items(), key=_requests, reverse=True)

    def by_backend(self) -> list[tuple[str, Totals]]:
        """`(backend, totals)` rows, the most requested first."""
        return sorted(self.backends.items(), key=_requests, reverse=True)


def usage_stats(
    store: AnyStore,
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    on_error: Callable[[TranscriptError], None] | None = None,
) -> UsageStats:
    """Add up the usage recorded in `store` from `since` to `until` (both optional, inclusive).

    A session that cannot be read goes to `on_error` (else its error is
    raised), and the others are still counted.
    """
    stats = UsageStats(since, until)
    for info in store.list(on_error=on_error):
        if since is not None and info.updated < since:
            continue  # every request it records was sent before its last write
        try:
            records = store.open(info.meta.id).usage()
        except TranscriptError as exc:
            if on_error is None:
                raise
            on_error(exc)
            continue
        row = SessionUsage(info.meta.id, info.meta.title, info.meta.backend, info.meta.model)
        for record in records:
            if (since is not None and record.time < since) or (
                until is not None and record.time > until
            ):
                continue
            cost = record.cost()
            for totals in (
                row.totals,
                stats.models.setdefault((record.backend, record.model), Totals()),
                stats.backends.setdefault(record.backend, Totals()),
                stats.total,
            ):
                totals.add(record.usage, cost, record.duration)
        if row.totals.requests:
            stats.sessions.append(row)
    return stats


def _requests(row: tuple[Any, Totals]) -> int:
    return row[1].requests
