"""carryall.schema and the agent's structured answers: schemas from types, answers checked.

What a type becomes as a schema (closed when strict), what an answer
becomes as the caller's type, and how a mismatch is named: by the JSON
path of the first wrong place, whichever library checked it.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal, TypedDict

import msgspec
import pydantic
import pytest

from carryall.agent import Agent
from carryall.blocks import Message, Text, ToolUse
from carryall.errors import CarryallError, StructuredOutputError
from carryall.providers import OutputSchema, Response
from carryall.schema import answer_text, output_schema, parse, schema_of
from tests.support.agent import ScriptedBackend, call, say


class Item(msgspec.Struct):
    name: str
    qty: int


class Order(msgspec.Struct):
    customer: str
    items: list[Item]
    note: str = ""


class Mood(TypedDict):
    mood: Literal["happy", "sad"]


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Person(pydantic.BaseModel):
    name: str
    age: int


class Tree(msgspec.Struct):
    label: str
    children: list[Tree] = []


ORDER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "customer": {"type": "string"},
        "items": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "qty": {"type": "integer"}},
                "required": ["name", "qty"],
            },
        },
    },
    "required": ["customer", "items"],
}


# -- schemas from types --------------------------------------------------------------


def test_a_struct_is_sent_closed_with_its_root_written_out() -> None:
    output = output_schema(Order)
    assert output.name == "Order" and output.strict
    schema = output.schema
    assert schema["type"] == "object"
    assert schema["required"] == ["customer", "items", "note"]
    assert schema["additionalProperties"] is False
    assert "default" not in schema["properties"]["note"]
    item = schema["$defs"]["Item"]
    assert item["required"] == ["name", "qty"] and item["additionalProperties"] is False
    assert schema["properties"]["items"]["items"] == {"$ref": "#/$defs/Item"}


def test_a_recursive_struct_keeps_its_own_definition() -> None:
    schema = output_schema(Tree).schema
    assert schema["properties"]["children"]["items"] == {"$ref": "#/$defs/Tree"}
    assert schema["$defs"]["Tree"]["type"] == "object"


def test_not_strict_keeps_the_types_own_schema() -> None:
    schema = output_schema(Order, strict=False).schema
    assert schema["required"] == ["customer", "items"]
    assert "additionalProperties" not in schema


def test_a_typeddict_a_dataclass_and_a_pydantic_model_each_describe_themselves() -> None:
    assert schema_of(Mood)["properties"] == {"mood": {"enum": ["happy", "sad"]}}
    assert schema_of(Point)["required"] == ["x", "y"]
    person = output_schema(Person)
    assert person.name == "Person"
    assert person.schema["properties"]["age"]["type"] == "integer"
    assert person.schema["additionalProperties"] is False


def test_a_schema_dict_is_sent_as_given_and_checked_first() -> None:
    assert output_schema(ORDER_SCHEMA) == OutputSchema(ORDER_SCHEMA, "answer", True)
    assert output_schema(ORDER_SCHEMA, name="order").name == "order"
    with pytest.raises(CarryallError, match=r"not a valid JSON Schema: at \$\.type"):
        output_schema({"type": "objekt"})


def test_a_type_msgspec_cannot_describe_is_a_clear_error() -> None:
    with pytest.raises(CarryallError, match="cannot describe"):
        output_schema(object)


def test_a_type_name_becomes_a_name_the_wires_take() -> None:
    odd = msgspec.defstruct("Odd name.v2", [("a", int)])
    assert output_schema(odd).name == "Odd_name_v2"


# -- answers checked -------------------------------------------------------------------


def test_an_answer_becomes_an_instance_of_the_callers_type() -> None:
    text = '{"customer": "Ann", "items": [{"name": "pear", "qty": 2}]}'
    assert parse(text, Order) == Order("Ann", [Item("pear", 2)])
    assert parse('{"mood": "sad"}', Mood) == {"mood": "sad"}
    assert parse('{"x": 1, "y": 2}', Point) == Point(1, 2)
    assert parse('{"name": "Bo", "age": 7}', Person) == Person(name="Bo", age=7)
    assert parse(text, ORDER_SCHEMA)["items"][0]["qty"] == 2


@pytest.mark.parametrize(
    ("spec", "path", "reason"),
    [
        (Order, "$.items[1].qty", "Expected `int`, got `str`"),
        (ORDER_SCHEMA, "$.items[1].qty", "'two' is not of type 'integer'"),
        (OutputSchema(ORDER_SCHEMA), "$.items[1].qty", "'two' is not of type 'integer'"),
    ],
)
def test_a_mismatch_names_its_json_path(spec: Any, path: str, reason: str) -> None:
    text = '{"customer": "Ann", "items": [{"name": "a", "qty": 1}, {"name": "b", "qty": "two"}]}'
    with pytest.raises(StructuredOutputError) as caught:
        parse(text, spec)
    assert (caught.value.path, caught.value.reason) == (path, reason)
    assert caught.value.answer == text
    assert str(caught.value) == f"the answer does not match the schema: at {path}: {reason}"


def test_a_pydantic_mismatch_names_its_path_too() -> None:
    with pytest.raises(StructuredOutputError) as caught:
        parse('{"name": "Bo", "age": "old"}', Person)
    assert caught.value.path == "$.age"
    assert "integer" in caught.value.reason


def test_a_missing_field_is_named_at_its_object() -> None:
    with pytest.raises(StructuredOutputError) as caught:
        parse('{"customer": "Ann"}', Order)
    assert caught.value.path == "$"
    assert "items" in caught.value.reason
    with pytest.raises(StructuredOutputError, match=r"at \$: 'items' is a required property"):
        parse('{"customer": "Ann"}', ORDER_SCHEMA)


def test_an_enum_mismatch_is_named() -> None:
    with pytest.raises(StructuredOutputError, match=r"at \$\.mood: Invalid enum value 'glad'"):
        parse('{"mood": "glad"}', Mood)


def test_text_that_is_not_json_is_named_as_such() -> None:
    with pytest.raises(StructuredOutputError, match=r"at \$: not JSON"):
        parse("Sure! Here is the order.", Order)


def test_an_answer_cut_at_the_limit_says_so() -> None:
    cut = Response(message=Message.assistant([Text('{"customer": "An')]), stop_reason="max_tokens")
    with pytest.raises(StructuredOutputError, match="cut off at the output limit"):
        parse(cut, Order)


def test_one_code_fence_around_the_json_is_read_through() -> None:
    assert answer_text('```json\n{"mood": "happy"}\n```') == '{"mood": "happy"}'
    assert parse('```\n{"mood": "happy"}\n```', Mood) == {"mood": "happy"}


def test_a_refusal_or_a_turn_ending_on_calls_is_not_an_answer() -> None:
    refused = Response(
        message=Message.assistant([Text("")]), stop_reason="refusal", refusal="I can't."
    )
    with pytest.raises(StructuredOutputError, match=r"the model refused: I can't\."):
        parse(refused, Mood)
    calls = call(ToolUse("c1", "read_file", {"path": "a"}))
    with pytest.raises(StructuredOutputError, match="ended on tool calls"):
        parse(calls, Mood)


# -- the agent ---------------------------------------------------------------------------


def test_ask_sends_the_schema_on_every_request_and_returns_the_instance() -> None:
    backend = ScriptedBackend(
        call(ToolUse("c1", "missing_tool", {})),
        say('{"customer": "Ann", "items": []}'),
    )
    agent = Agent(backend)
    order = agent.ask("Ann's order?", Order)
    assert order == Order("Ann", [])
    assert [r.output_schema for r in backend.requests] == [output_schema(Order)] * 2
    # The next turn asks for nothing it did not name.
    backend.steps.append(say("plain"))
    agent.send("thanks")
    assert backend.requests[-1].output_schema is None


def test_send_checks_the_answer_and_keeps_it_in_the_history() -> None:
    backend = ScriptedBackend(say('{"mood": "glad"}'))
    agent = Agent(backend)
    with pytest.raises(StructuredOutputError) as caught:
        agent.send("How do I feel?", schema=Mood)
    assert caught.value.path == "$.mood"
    assert agent.messages[-1] == Message.assistant([Text('{"mood": "glad"}')])


def test_an_agents_own_schema_applies_to_every_turn() -> None:
    backend = ScriptedBackend(say('{"mood": "happy"}'), say('{"mood": "sad"}'))
    agent = Agent(backend, schema=Mood)
    agent.send("one")
    assert agent.ask("two", Mood) == {"mood": "sad"}
    assert all(r.output_schema == output_schema(Mood) for r in backend.requests)


def test_a_bad_schema_is_refused_before_the_prompt_joins_the_history() -> None:
    agent = Agent(ScriptedBackend())
    with pytest.raises(CarryallError, match="not a valid JSON Schema"):
        agent.send("hi", schema={"type": 5})
    assert agent.messages == []
