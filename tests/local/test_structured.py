"""Structured output on the managed local server: SmolLM2-135M answers JSON that validates.

No mocks: the embedded llama-server holds the 135M model to each schema
with its JSON-schema grammar (`response_format` json_schema), so even
this model's answer is valid JSON of the right shape. Three schemas (a
flat object, a nested object with an array, an enum), each through the
Python API (`Agent.ask`, answered as the caller's type) and through
`carryall run --schema` (the printed JSON checked again here with
`jsonschema`). Nothing asserts on the model's wording, only on shape.
The strings and arrays are bounded in the schemas so an answer fits its
token budget on two busy cores.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import jsonschema
import msgspec
import pytest

from carryall import local
from carryall.agent import Agent
from carryall.backends import Backend, open_backend
from carryall.schema import output_schema
from tests.support.cli import invoke
from tests.support.local import LOCAL_STATUS

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not LOCAL_STATUS.ready,
        reason="the local backend is not installed: run `carryall local install`",
    ),
    pytest.mark.timeout(600),
]

MAX_TOKENS = 200

Short = Annotated[str, msgspec.Meta(max_length=16)]


class Person(msgspec.Struct):
    name: Short
    age: Annotated[int, msgspec.Meta(ge=0, le=120)]


class Line(msgspec.Struct):
    fruit: Short
    count: Annotated[int, msgspec.Meta(ge=1, le=9)]


class Order(msgspec.Struct):
    customer: Short
    items: Annotated[list[Line], msgspec.Meta(min_length=1, max_length=3)]


class Mood(enum.Enum):
    HAPPY = "happy"
    SAD = "sad"
    NEUTRAL = "neutral"


CASES: dict[str, tuple[type[Any], str]] = {
    "flat": (Person, "Alice is 30 years old. Give her name and age."),
    "nested": (Order, "Bob buys 2 apples and 3 pears. Give the customer and the items."),
    "enum": (Mood, "I just won the lottery! How do I feel?"),
}


@pytest.fixture(scope="module")
def backend() -> Iterator[Backend]:
    """The `local` backend over the process's managed server, started once for this module."""
    opened = open_backend("local", max_retries=1)
    try:
        yield opened
    finally:
        opened.close()
        local.shutdown_local_server()


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_api_answers_each_schema_as_the_callers_type(backend: Backend, case: str) -> None:
    spec, prompt = CASES[case]
    agent = Agent(backend, max_tokens=MAX_TOKENS)
    answer = agent.ask(prompt, spec)
    assert isinstance(answer, spec)
    # The answer the history holds is the JSON itself, valid by the schema that was sent.
    text = agent.messages[-1].text()
    jsonschema.validate(json.loads(text), output_schema(spec).schema)


@pytest.mark.parametrize("case", sorted(CASES))
def test_run_schema_prints_json_that_validates(
    backend: Backend, home: Path, tmp_path: Path, case: str
) -> None:
    spec, prompt = CASES[case]
    schema = output_schema(spec).schema
    workspace = tmp_path / "ws"
    workspace.mkdir()
    result = invoke(
        "run",
        prompt,
        "-b",
        "local",
        "--tools",
        "none",
        "--max-tokens",
        str(MAX_TOKENS),
        "-w",
        str(workspace),
        "--schema",
        json.dumps(schema),
    )
    assert result.exit_code == 0, result.stderr
    printed = json.loads(result.stdout)
    jsonschema.validate(printed, schema)
    assert msgspec.convert(printed, spec) is not None
