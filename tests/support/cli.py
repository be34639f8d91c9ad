"""Running the command line in-process for tests, with a scripted backend behind it."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from typer.testing import CliRunner

from carryall._commands import agent as agent_commands
from carryall.cli import app
from tests.support.agent import ScriptedBackend, Step

PNG_1X1 = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


runner = CliRunner()


class Opened:
    """What the command asked `_open_backend` for, and the backend it got."""

    def __init__(self) -> None:
        self.setups: list[Any] = []
        self.backend: ScriptedBackend | None = None


def script(monkeypatch: pytest.MonkeyPatch, *steps: Step) -> Opened:
    opened = Opened()

    def fake_open(setup: Any) -> ScriptedBackend:
        opened.setups.append(setup)
        opened.backend = ScriptedBackend(*steps)
        return opened.backend

    monkeypatch.setattr(agent_commands, "_open_backend", fake_open)
    return opened


def invoke(*args: str, input: str | None = None) -> Any:
    return runner.invoke(app, list(args), input=input, catch_exceptions=False)
