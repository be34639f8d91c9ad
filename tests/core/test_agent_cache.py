"""The agent's caching policy: automatic unless told, one cache key for the whole conversation."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from carryall.agent import Agent
from carryall.blocks import Downgrade, Message
from carryall.errors import CarryallError
from carryall.providers.caching import conversation_key
from tests.support.agent import ScriptedBackend, say


class Recorded:
    """A session lookalike with an id, recording nothing."""

    id = "20261205-031500-abcdef"

    def messages(self) -> list[Message]:
        return []

    def record(
        self,
        started_from: Sequence[Message],
        left_behind: Sequence[Message],
        downgrades: Sequence[Downgrade] = (),
    ) -> str:
        return "appended"


def test_every_request_of_a_turn_asks_for_automatic_caching_under_the_session_key() -> None:
    backend = ScriptedBackend(say("one"), say("two"))
    agent = Agent(backend, session=Recorded())
    agent.send("a")
    agent.send("b")
    assert [(r.cache, r.cache_key) for r in backend.requests] == [
        ("auto", conversation_key(Recorded.id))
    ] * 2
    assert Recorded.id not in backend.requests[0].cache_key


def test_without_a_session_the_key_is_left_to_the_wire_and_a_given_one_is_kept() -> None:
    assert Agent(ScriptedBackend()).request().cache_key == ""
    given = Agent(ScriptedBackend(), session=Recorded(), cache_key="mine", cache="off")
    assert (given.request().cache, given.request().cache_key) == ("off", "mine")


def test_a_policy_that_is_neither_auto_nor_off_is_refused() -> None:
    with pytest.raises(CarryallError, match="'auto' or 'off', got 'always'"):
        Agent(ScriptedBackend(), cache="always")  # type: ignore[arg-type]
