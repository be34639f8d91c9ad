"""`carryall sessions stats`, and the usage `run` records that `sessions show` prints.

`run` goes to a scripted backend (tests/support) whose answers carry usage;
the stats are read back from the sessions it and the store API recorded.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from carryall.blocks import Message, Text
from carryall.providers import Response
from carryall.sessions import Store
from carryall.sessions._transcript import format_time
from carryall.usage import RequestUsage, Usage
from tests.support.cli import invoke, script


def _now() -> datetime:
    # Taken when a test records, never at import: a worker may run this
    # module's tests minutes after collecting it, and a window such as
    # `--since 10m` is measured from the real time of the command.
    return datetime.now(UTC).replace(microsecond=0)


def _answer(text: str, n: int) -> Response:
    return Response(
        message=Message.assistant([Text(text)]),
        stop_reason="end_turn",
        usage=Usage(input_tokens=n, output_tokens=n + 1, cache_read_input_tokens=3 * n),
        raw_usage={"prompt_tokens": 4 * n, "completion_tokens": n + 1},
        model="scripted-1-dated",
    )


def _recorded(backend: str, model: str, hours_ago: float, n: int, now: datetime) -> RequestUsage:
    return RequestUsage(
        time=now - timedelta(hours=hours_ago),
        backend=backend,
        wire=backend,
        model=model,
        usage=Usage(input_tokens=n, output_tokens=10, cache_read_input_tokens=n),
        duration=1.0,
    )


def _two_sessions(home: Path, now: datetime | None = None) -> tuple[str, str]:
    # Created before the requests they record, as a run creates them.
    now = now or _now()
    store = Store()
    local = store.create(backend="local", model="SmolLM2")
    hosted = store.create(backend="openai", model="my-finetune")
    history = [Message.user("ask"), Message.assistant([Text("answer")])]
    local.record([], history, usage=[_recorded("local", "SmolLM2", 0.5, 100, now)])
    hosted.record(
        [],
        history,
        usage=[
            _recorded("openai", "my-finetune", 0.4, 1_000, now),
            _recorded("openai", "my-finetune", 0.1, 2_000, now),
        ],
    )
    return local.id, hosted.id


def test_run_records_each_requests_usage_and_show_prints_it(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script(monkeypatch, _answer("one", 7))
    assert invoke("run", "first").exit_code == 0
    script(monkeypatch, _answer("two", 9))
    assert invoke("run", "-c", "second").exit_code == 0
    session = Store().open("last")
    assert [r.usage for r in session.usage()] == [_answer("", 7).usage, _answer("", 9).usage]
    assert {(r.backend, r.answered) for r in session.usage()} == {("scripted", "scripted-1-dated")}

    shown = json.loads(invoke("sessions", "show", "last", "-f", "json").stdout)["usage"]
    assert [r["raw"] for r in shown["requests"]] == [
        _answer("", 7).raw_usage,
        _answer("", 9).raw_usage,
    ]
    assert shown["total"]["input_tokens"] == 16 and shown["total"]["cost"] == "—"
    text = invoke("sessions", "show", "last").stdout
    assert "7 in, 8 out, 21 cache read, 0 cache write" in text
    assert "Total: 2 requests, 16 in, 18 out" in text


def test_stats_table_names_each_session_model_and_backend_with_cost(home: Path) -> None:
    local, hosted = _two_sessions(home)
    result = invoke("sessions", "stats")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["SESSION", "REQ", "IN", "OUT", "CACHE%", "COST"]
    hosted_row = next(line for line in lines if line.startswith(hosted))
    assert hosted_row.split()[-5:] == ["2", "3,000", "20", "50%", "—"]
    local_row = next(line for line in lines if line.startswith(local))
    assert local_row.endswith("free (local model)")
    assert any(line.startswith("openai/my-finetune ") for line in lines)
    assert any(line.startswith("local ") for line in lines)
    assert lines[-1].startswith("Total: 3 requests, 3,100 in, 30 out")
    assert lines[-1].endswith("cost —")  # one unpriced request: never "$0.00"
    assert all(len(line) <= 80 for line in lines[:-1])


def test_stats_json_over_a_window(home: Path) -> None:
    now = _now()
    local, hosted = _two_sessions(home, now)
    since = format_time(now - timedelta(minutes=45))
    until = format_time(now - timedelta(minutes=15))
    result = invoke("sessions", "stats", "--since", since, "--until", until, "--json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["total"]["requests"] == 2
    assert {s["id"]: s["requests"] for s in data["sessions"]} == {local: 1, hosted: 1}
    by_backend = {b["backend"]: b for b in data["backends"]}
    assert by_backend["local"]["free"] is True and by_backend["local"]["cost_usd"] is None
    assert by_backend["openai"]["cost"] == "—"
    assert data["models"][0]["input_tokens"] + data["models"][1]["input_tokens"] == 1_100
    assert data["sessions"][0]["cache_read_share"] == 0.5

    recent = json.loads(invoke("sessions", "stats", "--since", "10m", "--json").stdout)
    assert recent["total"]["requests"] == 1 and recent["sessions"][0]["id"] == hosted


def test_stats_refuses_an_empty_or_unreadable_window(home: Path) -> None:
    _two_sessions(home)
    backwards = invoke("sessions", "stats", "--since", "1h", "--until", "2h")
    assert backwards.exit_code == 2 and "--until is before --since" in backwards.stderr
    nonsense = invoke("sessions", "stats", "--until", "soon")
    assert nonsense.exit_code == 2 and "--until" in nonsense.stderr
    empty = invoke("sessions", "stats", "--until", "2000-01-01")
    assert empty.exit_code == 0 and "no recorded usage in that window" in empty.stderr
