"""A transcript written before the block model widened still loads and exports as it did."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from carryall.blocks import Message, messages_from_dicts
from carryall.interchange import export_messages
from carryall.sessions.jsonl import SessionStore
from carryall.sessions.redact import Redactor

FIXTURE = Path(__file__).parent.parent / "fixtures" / "transcripts"
SESSION = "20261201-110312-188c35"


@pytest.fixture
def old_session(tmp_path: Path) -> tuple[SessionStore, list[Message]]:
    # A copy, so opening it (which may take a lock) never writes into the fixture.
    shutil.copytree(FIXTURE / "store", tmp_path / "store")
    store = SessionStore(tmp_path / "store", redactor=Redactor((), builtin=False))
    return store, store.open(SESSION).messages()


def test_old_transcript_loads_with_every_version(
    old_session: tuple[SessionStore, list[Message]],
) -> None:
    store, messages = old_session
    session = store.open(SESSION)
    assert len(messages) == 4
    assert [len(v) for v in session.versions()] == [3, 4]
    assert session.meta.model == "claude-sonnet-4-5"
    assert messages[0].images()[0].to_bytes().startswith(b"\x89PNG")


def test_old_json_form_reads_as_the_loaded_history(
    old_session: tuple[SessionStore, list[Message]],
) -> None:
    _, messages = old_session
    old_form = json.loads((FIXTURE / "history.json").read_text())
    assert messages_from_dicts(old_form) == messages


@pytest.mark.parametrize("fmt", ["anthropic", "openai"])
def test_old_transcript_exports_byte_for_byte_as_it_did(
    old_session: tuple[SessionStore, list[Message]], fmt: str
) -> None:
    store, messages = old_session
    meta = store.open(SESSION).meta
    written = export_messages(fmt, messages, system=meta.system, model=meta.model)  # type: ignore[arg-type]
    assert written == (FIXTURE / f"export_{fmt}.json").read_text()
