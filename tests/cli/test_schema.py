"""`carryall run --schema`: the schema asked for, the checked answer printed, kept for `-c`.

Over the scripted backend, so what is pinned is what the command sends,
prints and records; the real server answering through a grammar is
tests/local/test_structured.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from carryall.providers import OutputSchema
from carryall.sessions import Store
from tests.support.agent import say
from tests.support.cli import invoke, script

SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
}
INLINE = json.dumps(SCHEMA)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


def _run(workspace: Path, *argv: str) -> list[str]:
    return ["run", *argv, "-w", str(workspace), "--tools", "none"]


def test_inline_schema_is_sent_and_the_checked_answer_printed(
    monkeypatch: pytest.MonkeyPatch, home: Path, workspace: Path
) -> None:
    opened = script(monkeypatch, say('{"name":"Ann","age":30}'))
    result = invoke(*_run(workspace, "Who?", "--schema", INLINE))
    assert result.exit_code == 0, result.stderr
    # Only the checked JSON on standard output, nothing streamed before it.
    assert json.loads(result.stdout) == {"name": "Ann", "age": 30}
    assert result.stdout == json.dumps({"name": "Ann", "age": 30}, indent=2) + "\n"
    assert opened.backend is not None
    [request] = opened.backend.requests
    assert request.output_schema == OutputSchema(SCHEMA)


def test_a_schema_file_is_read(
    monkeypatch: pytest.MonkeyPatch, home: Path, workspace: Path, tmp_path: Path
) -> None:
    path = tmp_path / "person.json"
    path.write_text(INLINE)
    opened = script(monkeypatch, say('{"name":"Bo","age":7}'))
    result = invoke(*_run(workspace, "Who?", "--schema", str(path)))
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == {"name": "Bo", "age": 7}
    assert opened.backend is not None
    assert opened.backend.requests[0].output_schema == OutputSchema(SCHEMA)


def test_an_answer_that_does_not_match_fails_naming_the_place(
    monkeypatch: pytest.MonkeyPatch, home: Path, workspace: Path
) -> None:
    script(monkeypatch, say('{"name":"Ann","age":"thirty"}'))
    result = invoke(*_run(workspace, "Who?", "--schema", INLINE))
    assert result.exit_code == 1
    assert result.stdout == ""
    said = " ".join(result.stderr.split())
    assert "the answer does not match the schema: at $.age: 'thirty' is not of type" in said
    assert 'the answer: {"name":"Ann","age":"thirty"}' in said
    # The answer was said: the session keeps it.
    [info] = Store(home / "sessions").list()
    messages = Store(home / "sessions").open(info.meta.id).messages()
    assert messages[-1].text() == '{"name":"Ann","age":"thirty"}'


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("{not json", "--schema is not JSON"),
        ("missing.json", "cannot read the schema file 'missing.json'"),
        ('{"type": "objekt"}', "the output schema is not a valid JSON Schema: at $.type"),
    ],
)
def test_a_bad_schema_is_one_line_before_anything_runs(
    monkeypatch: pytest.MonkeyPatch, home: Path, workspace: Path, given: str, message: str
) -> None:
    opened = script(monkeypatch)
    result = invoke(*_run(workspace, "Who?", "--schema", given))
    assert result.exit_code == 1
    assert message in " ".join(result.stderr.split())
    assert opened.backend is None


def test_json_output_carries_the_parsed_answer(
    monkeypatch: pytest.MonkeyPatch, home: Path, workspace: Path
) -> None:
    script(monkeypatch, say('{"name":"Ann","age":30}'))
    result = invoke(*_run(workspace, "Who?", "--schema", INLINE, "--json"))
    assert result.exit_code == 0, result.stderr
    turn = json.loads(result.stdout)
    assert turn["parsed"] == {"name": "Ann", "age": 30}
    assert turn["answer"] == '{"name":"Ann","age":30}'


def test_the_session_keeps_the_schema_and_c_asks_for_it_again(
    monkeypatch: pytest.MonkeyPatch, home: Path, workspace: Path
) -> None:
    script(monkeypatch, say('{"name":"Ann","age":30}'))
    assert invoke(*_run(workspace, "Who?", "--schema", INLINE)).exit_code == 0
    [info] = Store(home / "sessions").list()
    assert info.meta.output_schema == {"schema": SCHEMA, "name": "answer", "strict": True}
    opened = script(monkeypatch, say('{"name":"Bo","age":7}'))
    again = invoke(*_run(workspace, "And the other?", "-c"))
    assert again.exit_code == 0, again.stderr
    assert json.loads(again.stdout) == {"name": "Bo", "age": 7}
    assert opened.backend is not None
    assert opened.backend.requests[0].output_schema == OutputSchema(SCHEMA)
    shown = invoke("sessions", "show", "last")
    assert shown.exit_code == 0, shown.stderr
    compact = json.dumps(SCHEMA, separators=(",", ":"))
    assert f"schema:   answer {compact}" in shown.stdout
    exported = json.loads(invoke("sessions", "show", "last", "-f", "json").stdout)
    assert exported["session"]["output_schema"]["schema"] == SCHEMA


def test_a_run_without_schema_records_none(
    monkeypatch: pytest.MonkeyPatch, home: Path, workspace: Path
) -> None:
    opened = script(monkeypatch, say("Hello."))
    result = invoke(*_run(workspace, "hi"))
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "Hello.\n"
    assert opened.backend is not None
    assert opened.backend.requests[0].output_schema is None
    [info] = Store(home / "sessions").list()
    assert info.meta.output_schema is None
