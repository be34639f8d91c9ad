"""The prompt-mode instructions hold no placeholder answer a small model could copy."""

from __future__ import annotations

import re

import pytest

from carryall.providers import ToolSpec
from carryall.providers.calling_convention import describe_tools

TOOLS = [ToolSpec("list_dir", "List a folder.", {"type": "object", "properties": {}})]


@pytest.mark.parametrize("constrained", [True, False])
def test_the_words_for_an_answer_without_tools_hold_no_placeholder(constrained: bool) -> None:
    text = describe_tools(TOOLS, constrained=constrained)
    for line in text.splitlines():
        if "response" in line or "answer" in line:
            # A placeholder such as "<your answer>" or "..." inside a JSON string.
            assert not re.search(r'"\s*(<[^>]*>|\.\.\.)\s*"', line), line


@pytest.mark.parametrize("cut", ['{"resp', '{ "response" :', '{"response": "'])
def test_an_answer_cut_inside_the_envelope_shows_none_of_it(cut: str) -> None:
    from carryall.providers.prompt import decode_response

    data = {
        "id": "x",
        "object": "chat.completion",
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": cut},
                "finish_reason": "length",
            }
        ],
    }
    response = decode_response(data, constrained=True)
    assert response.message.text() == "" and response.stop_reason == "max_tokens"


def test_a_turn_that_may_call_no_tool_describes_none_and_answers_in_the_envelope() -> None:
    # Nothing to copy: no tool description or call syntax where no call may be made.
    text = describe_tools(TOOLS, constrained=True, tool_choice="none")
    assert "Do not call any tool" in text and '"response"' in text
    assert "list_dir" not in text and "tool_calls" not in text and "List a folder." not in text


def test_the_choices_a_grammar_holds_a_call_to_are_the_ones_described() -> None:
    from carryall.providers.prompt import response_schema

    spec = ToolSpec(
        "read_file",
        "Read a file.",
        {"type": "object", "properties": {"path": {"type": "string"}}},
        choices={"path": ("notes.txt", "plan.md")},
    )
    text = describe_tools([spec], constrained=True)
    assert '"enum": ["notes.txt", "plan.md"]' in text
    enforced = response_schema([spec])["anyOf"][0]["properties"]["tool_calls"]["items"]
    assert enforced["properties"]["arguments"]["properties"]["path"]["enum"] == [
        "notes.txt",
        "plan.md",
    ]


@pytest.mark.parametrize("constrained", [True, False])
@pytest.mark.parametrize("tool_choice", [None, "none"])
def test_how_results_read_is_said_without_an_example_line_to_copy(
    constrained: bool, tool_choice: str | None
) -> None:
    text = describe_tools(TOOLS, constrained=constrained, tool_choice=tool_choice)
    about_results = next(line for line in text.splitlines() if "[Tool results]" in line)
    assert "<" not in about_results and "[Result" not in about_results
    if tool_choice == "none":
        assert "<" not in text  # nothing at all to fill in where no call may be made
