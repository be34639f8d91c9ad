"""`carryall.request_options`: `-o` pairs and options tables, read, layered and shown again."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from carryall.errors import CarryallError
from carryall.providers import ModelOptions
from carryall.request_options import (
    KNOWN_KEYS,
    RequestOptions,
    as_pairs,
    layered,
    parse_pairs,
    read_table,
)


def test_values_are_json_where_they_parse_and_text_otherwise() -> None:
    table = parse_pairs(
        ["temperature=0.2", "seed=7", "store=true", "service_tier=flex", "stop=END", "top_p=1"]
    )
    assert table == {
        "temperature": 0.2,
        "seed": 7,
        "store": True,
        "service_tier": "flex",
        "stop": ["END"],
        "top_p": 1,
    }
    checked = read_table(table, "-o")
    assert checked.options == ModelOptions(
        temperature=0.2, seed=7, store=True, service_tier="flex", stop=("END",), top_p=1.0
    )


def test_extra_keys_nest_under_their_wire_and_reasoning_is_apart() -> None:
    table = parse_pairs(
        ["extra.openai.user=abc", "extra.gemini.generationConfig.candidateCount=1", "effort=low"]
    )
    assert table == {
        "extra": {"openai": {"user": "abc"}, "gemini": {"generationConfig": {"candidateCount": 1}}},
        "effort": "low",
    }
    checked = read_table(table, "-o")
    assert checked == RequestOptions(
        options=ModelOptions(extra=table["extra"]), effort="low", thinking=None
    )


def test_an_unknown_key_names_itself_and_every_known_one() -> None:
    with pytest.raises(CarryallError) as caught:
        parse_pairs(["temprature=0.2"])
    assert (
        str(caught.value)
        == f"-o temprature: no such option; known options: {', '.join(KNOWN_KEYS)}"
    )
    assert "extra.WIRE.KEY" in KNOWN_KEYS and "thinking_budget" in KNOWN_KEYS


def test_later_tables_go_over_earlier_ones_extra_key_by_key() -> None:
    config = {"temperature": 0.9, "seed": 7, "extra": {"openai": {"user": "a", "metadata": {}}}}
    line = {"temperature": 0.1, "extra": {"openai": {"user": "b"}}}
    assert layered(config, None, line) == {
        "temperature": 0.1,
        "seed": 7,
        "extra": {"openai": {"user": "b", "metadata": {}}},
    }


_values = st.one_of(
    st.integers(-100, 100),
    st.floats(0, 2, allow_nan=False),
    st.booleans(),
    st.text("abcdefgh-_", min_size=1, max_size=8).filter(lambda t: t not in ("true", "false")),
)
_tables = st.fixed_dictionaries(
    {},
    optional={
        "temperature": st.floats(0, 2, allow_nan=False),
        "seed": st.integers(0, 2**31),
        "stop": st.lists(st.text('ab ,"]', min_size=1, max_size=5), min_size=1, max_size=3),
        "parallel_tool_calls": st.booleans(),
        "service_tier": st.sampled_from(["flex", "auto", "priority"]),
        "extra": st.fixed_dictionaries(
            {"openai": st.dictionaries(st.sampled_from(["user", "n", "x_y"]), _values, min_size=1)}
        ),
    },
)


@given(_tables)
def test_a_table_shown_as_pairs_reads_back_as_itself(table: dict[str, Any]) -> None:
    assert parse_pairs(as_pairs(table)) == table


def test_a_damaged_table_is_still_shown_as_it_is_held() -> None:
    assert as_pairs({"extra": {"openai": "user=abc"}, "stop": ["a b"]}) == [
        "extra.openai=user=abc",
        'stop=["a b"]',
    ]
