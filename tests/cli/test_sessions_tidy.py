"""Sessions that stay tidy: `last`, `rm` of several and of the empty ones, import refusals,
`carryall paths`, and `sessions list` at 80 columns."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from carryall.blocks import Message, Text
from carryall.cli import app
from carryall.sessions import Store

runner = CliRunner()


def invoke(
    *args: str, input: str | None = None, columns: int | None = None
) -> tuple[int, str, str]:
    env = {"COLUMNS": str(columns)} if columns is not None else None
    result = runner.invoke(app, list(args), input=input, env=env)
    return result.exit_code, result.stdout, result.stderr


def _session(title: str | None = "a question", turns: int = 2, backend: str = "fake") -> str:
    session = Store().create(backend=backend, model="tiny", title=title)
    history = [Message.user("q"), Message.assistant([Text("a")])][:turns]
    if history:
        session.record([], history)
    return session.id


# -- last ---------------------------------------------------------------------------


def test_last_names_the_newest_session_in_show(home: Path) -> None:
    _session("first one")
    newest = _session("second one")
    code, out, err = invoke("sessions", "show", "last")
    assert code == 0, err
    assert out.startswith(f"Session {newest}\n")


def test_last_with_no_sessions_is_a_clear_error(home: Path) -> None:
    code, _, err = invoke("sessions", "show", "last")
    assert code == 1
    assert "error: no session yet in" in err


# -- rm -----------------------------------------------------------------------------


def test_rm_takes_several_ids(home: Path) -> None:
    one, two, kept = _session(), _session(), _session()
    code, _, err = invoke("sessions", "rm", one, two, "-y")
    assert code == 0, err
    assert f"removed session {one}" in err and f"removed session {two}" in err
    assert [i.meta.id for i in Store().list()] == [kept]


def test_rm_empty_removes_only_sessions_without_messages(home: Path) -> None:
    full = _session(turns=2)
    empty_a, empty_b = _session(None, turns=0), _session(None, turns=0)
    code, _, err = invoke("sessions", "rm", "--empty", "-y")
    assert code == 0, err
    assert {f"removed session {empty_a}", f"removed session {empty_b}"} <= set(err.splitlines())
    assert [i.meta.id for i in Store().list()] == [full]


def test_rm_asks_first_and_keeps_on_no(home: Path) -> None:
    one = _session()
    code, out, _ = invoke("sessions", "rm", one, input="n\n")
    assert code == 1
    assert one in out and "Delete 1 session(s)?" in out
    assert len(Store().list()) == 1


def test_rm_with_an_unknown_id_removes_nothing(home: Path) -> None:
    one = _session()
    code, _, err = invoke("sessions", "rm", one, "nope", "-y")
    assert code == 1
    assert "error: no session 'nope'" in err
    assert len(Store().list()) == 1


def test_rm_with_nothing_named_says_what_to_name(home: Path) -> None:
    code, _, err = invoke("sessions", "rm", "-y")
    assert code == 2
    assert "name the sessions to remove" in err


# -- import refusals ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("document", "wording"),
    [
        ({"foo": 1}, "no messages to import"),
        ([], "no messages to import"),
        ({"messages": []}, "no messages to import"),
        (
            [
                {"role": "user", "content": "hi"},
                {"role": "tool", "tool_call_id": "call_9", "content": "orphan"},
            ],
            "call_9",
        ),
    ],
)
def test_import_refuses_what_it_cannot_use_before_writing(
    home: Path, tmp_path: Path, document: object, wording: str
) -> None:
    path = tmp_path / "in.json"
    path.write_text(json.dumps(document))
    code, out, err = invoke("sessions", "import", str(path))
    assert code == 1
    assert err.startswith(f"error: {path}") and wording in err
    assert out == ""
    assert Store().list() == []


def test_an_orphan_result_is_refused_naming_its_message(home: Path, tmp_path: Path) -> None:
    path = tmp_path / "in.json"
    document = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {"role": "tool", "tool_call_id": "call_9", "content": "orphan"},
    ]
    path.write_text(json.dumps(document))
    _, _, err = invoke("sessions", "import", str(path))
    assert re.search(r"message 2\b", err), err


def test_an_imported_wire_file_claims_no_backend_and_says_where_it_came_from(
    home: Path, tmp_path: Path
) -> None:
    path = tmp_path / "chat.json"
    path.write_text(json.dumps([{"role": "user", "content": "hi"}]))
    code, out, err = invoke("sessions", "import", str(path))
    assert code == 0, err
    meta = Store().open(out.strip()).meta
    assert meta.backend == ""
    assert meta.origin == f"openai messages from {path}"
    assert f"imported: openai messages from {path}" in invoke("sessions", "show", "last")[1]


# -- paths --------------------------------------------------------------------------


def test_paths_prints_where_config_sessions_and_cache_live(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CARRYALL_CACHE_DIR", str(tmp_path / "cache"))
    code, out, err = invoke("paths", "--json")
    assert code == 0, err
    assert json.loads(out) == {
        "config": str(home / "config.toml"),
        "sessions": str(home / "sessions"),
        "cache": str(tmp_path / "cache"),
    }
    code, out, _ = invoke("paths", "--store", str(tmp_path / "elsewhere"))
    assert f"sessions:  {tmp_path / 'elsewhere'}" in out.splitlines()


# -- 80 columns ---------------------------------------------------------------------

LONG_TITLE = "Please read the notes file and summarise the three main points of it"


def test_sessions_list_at_80_columns_keeps_id_age_turns_and_backend_whole(home: Path) -> None:
    ids = [_session(LONG_TITLE, backend="anthropic-with-a-long-backend-name") for _ in range(3)]
    code, out, err = invoke("sessions", "list", columns=80)
    assert code == 0, err
    header, *lines = out.splitlines()
    assert header.split() == ["ID", "AGE", "TURNS", "BACKEND"]
    # Too wide for the title beside them: each title on its own line under its row.
    rows, titles = lines[0::2], lines[1::2]
    assert len(rows) == len(titles) == 3
    for line in [header, *lines]:
        assert len(line) <= 80, line
    for row, title, session_id in zip(rows, titles, reversed(ids), strict=True):
        cells = re.split(r"\s{2,}", row)
        assert cells[0] == session_id
        assert re.fullmatch(r"now|\d+[smhdw]", cells[1]), cells[1]
        assert cells[2] == "2"
        assert cells[3] == "anthropic-with-a-long-backend-name/tiny"
        assert title.startswith("  ") and title.strip() == LONG_TITLE


def test_sessions_list_without_a_width_cuts_nothing(home: Path) -> None:
    _session(LONG_TITLE, backend="anthropic-with-a-long-backend-name")
    _, out, _ = invoke("sessions", "list")
    assert LONG_TITLE in out and "anthropic-with-a-long-backend-name/tiny" in out


def test_import_names_what_the_file_held_that_no_block_keeps(home: Path, tmp_path: Path) -> None:
    path = tmp_path / "in.json"
    document = [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {"role": "assistant", "content": "hello", "zz_annotations": [{"url": "https://a.example"}]},
    ]
    path.write_text(json.dumps(document))
    code, out, err = invoke("sessions", "import", str(path))
    assert code == 0
    assert "not kept: message 1: field: messages[1].zz_annotations" in err
    session_id = out.strip()
    assert [d.kind for d in Store().open(session_id).downgrades()] == ["field"]
