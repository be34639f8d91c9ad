"""`recall` arguments a person (or a script) can get wrong: each a one-line error or a bound."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from carryall._commands import sessions as commands
from carryall.blocks import Message, Text
from carryall.errors import TranscriptError
from carryall.sessions import Store


@pytest.fixture
def home(home: Path) -> Path:
    """The shared fresh home, holding one session to recall."""
    session = Store().create(backend="fake", model="m")
    session.record([], [Message.user("the lighthouse keeper"), Message.assistant([Text("waves")])])
    return home


@pytest.fixture
def app() -> typer.Typer:
    app = typer.Typer()
    commands.register(app)
    return app


def _recall(app: typer.Typer, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["recall", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


def test_recall_query_with_invalid_utf8_is_one_line(home: Path, app: typer.Typer) -> None:
    # What the command line hands over for the bytes b"\xff\xfe" (surrogateescape).
    code, _, err = _recall(app, "keeper", b"\xff\xfe".decode("utf-8", "surrogateescape"))
    assert code == 1
    assert err.strip() == "error: recall: the query is not valid UTF-8 text"


@pytest.mark.parametrize("since", ["99999999999d", "9" * 5000 + "d", "0001-01-01"])
def test_recall_since_far_back_finds_everything(home: Path, app: typer.Typer, since: str) -> None:
    code, out, err = _recall(app, "keeper", "--since", since)
    assert code == 0, err
    assert "lighthouse" in out


def test_recall_limit_two_to_the_63_is_one_line(home: Path, app: typer.Typer) -> None:
    code, _, err = _recall(app, "keeper", "--limit", str(2**63))
    assert code == 1
    assert "is more than 10000" in err and len(err.strip().splitlines()) == 1


def test_recall_twenty_thousand_word_query_is_refused_at_once(home: Path) -> None:
    # On main it ran for 15 s (150,000 words: past 10 minutes): now refused before any search.
    with pytest.raises(TranscriptError, match="20000 different words; at most 64"):
        Store().recall.search(" ".join(f"w{i}" for i in range(20_000)))


def test_recall_repeated_words_count_once(home: Path) -> None:
    hits = Store().recall.search(" ".join(["keeper"] * 20_000))
    assert [h.message for h in hits] == [0]
