"""Tool schemas made by msgspec from type hints, and the check that runs on the same struct."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from carryall.errors import ToolError
from carryall.tools import Tool, check_arguments
from carryall.tools._schema import read_docstring


def _many(
    count: int,
    ratio: float,
    pair: tuple[str, int],
    table: dict[str, list[int]],
    pick: Literal["z", "a"] | None = None,
    flags: list[Literal[2, 1]] | None = None,
    anything: Any = None,
) -> str:
    """Many."""
    return ""


def test_literal_values_keep_the_order_they_were_written() -> None:
    props = Tool.from_function(_many).input_schema["properties"]
    assert props["pick"]["anyOf"][0] == {"type": "string", "enum": ["z", "a"]}
    assert props["flags"]["anyOf"][0]["items"] == {"type": "integer", "enum": [2, 1]}


def test_a_fixed_tuple_says_its_items_without_items_false() -> None:
    pair = Tool.from_function(_many).input_schema["properties"]["pair"]
    assert pair == {
        "type": "array",
        "prefixItems": [{"type": "string"}, {"type": "integer"}],
        "minItems": 2,
        "maxItems": 2,
    }


def test_a_required_parameter_may_follow_an_optional_one() -> None:
    def f(first: int = 1, *, second: str) -> str:
        """F."""
        return second

    schema = Tool.from_function(f).input_schema
    assert list(schema["properties"]) == ["first", "second"]
    assert schema["required"] == ["second"]


def test_a_parameter_name_a_class_cannot_hold_still_works() -> None:
    def f(__mangled: str = "x") -> str:
        """F."""
        return __mangled

    made = Tool.from_function(f)
    assert list(made.input_schema["properties"]) == ["__mangled"]
    assert made.invoke({"__mangled": "y"}).text == "y"


def test_msgspec_bounds_reach_the_schema_and_the_check() -> None:
    def f(n: Annotated[int, msgspec.Meta(ge=1)]) -> str:
        """F."""
        return str(n)

    made = Tool.from_function(f)
    assert made.input_schema["properties"]["n"] == {"type": "integer", "minimum": 1}
    assert made.check({"n": 0}) == ["n: expected `int` >= 1"]
    assert made.check({"n": 1}) == []


def test_a_bound_that_does_not_fit_its_type_is_refused() -> None:
    def f(n: Annotated[str, msgspec.Meta(ge=1)]) -> str:
        """F."""
        return n

    with pytest.raises(ToolError, match=r"tool 'f': .*`ge`"):
        Tool.from_function(f)


def test_json_object_keys_are_strings() -> None:
    def f(table: dict[int, str]) -> str:
        """F."""
        return ""

    with pytest.raises(ToolError, match="parameter 'table': a JSON object's keys are strings"):
        Tool.from_function(f)


@pytest.mark.parametrize("hint", [complex, Path, Literal[1.5], list[bytes]])
def test_hints_that_are_not_plain_json_are_refused(hint: Any) -> None:
    def f(x: int) -> str:
        """F."""
        return ""

    f.__annotations__ = {"x": hint, "return": str}
    with pytest.raises(ToolError, match=r"parameter 'x'.*no JSON schema"):
        Tool.from_function(f)


def test_defaults_json_can_say_are_in_the_schema_and_others_are_not() -> None:
    def f(
        tags: list[str] = ["a"],  # noqa: B006 - a shared default is what is under test
        where: str = Path("."),  # type: ignore[assignment]
    ) -> str:
        """F."""
        return ""

    props = Tool.from_function(f).input_schema["properties"]
    assert msgspec.json.encode(props["tags"]["default"]) == b'["a"]'
    assert "default" not in props["where"]
    assert Tool.from_function(f).input_schema["required"] == []


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=3) | st.sampled_from(["z", "a"]),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner, max_size=3)
    ),
    max_leaves=8,
)
argument_names = st.sampled_from(
    ["count", "ratio", "pair", "table", "pick", "flags", "anything", "other"]
)


@given(st.dictionaries(argument_names, json_values | st.floats(allow_nan=False), max_size=8))
def test_every_refusal_is_listed_in_the_schema_walks_words(arguments: dict[str, Any]) -> None:
    made = Tool.from_function(_many)
    problems = made.check(arguments)
    walked = check_arguments(made.input_schema, arguments)
    integral_float_for_an_int = any(
        isinstance(arguments.get(name), float) and float(arguments[name]).is_integer()
        for name in ("count",)
    )
    if not integral_float_for_an_int:
        assert problems == walked


def test_numpy_and_wrapped_summaries_are_read() -> None:
    summary, params = read_docstring(
        "First line\ncontinues here.\n\nMore.\n\nParameters\n----------\n"
        "a : int\n    The a\n    value.\n"
    )
    assert summary == "First line continues here."
    assert params == {"a": "The a value."}


def test_attributes_are_not_parameters() -> None:
    _, params = read_docstring("S.\n\nArgs:\n    a: the a\n\nAttributes:\n    z: not one\n")
    assert params == {"a": "the a"}
