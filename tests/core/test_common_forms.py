"""Citations and provider-run tools as blocks: their JSON form, their readings, old transcripts.

A `Citation` rides on its `Text`; `ServerToolCall` and `ServerToolResult`
are provider-native blocks with a common reading. Every reader shows both
(cited text with numbered footnotes naming title and URL, a tool as its
query, code, output and sources), a transcript written before them still
loads as it was, and a cited text is never mistaken for a canonical one.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import msgspec

from carryall.blocks import (
    Citation,
    Footnotes,
    Message,
    Opaque,
    Origin,
    ServerToolCall,
    ServerToolResult,
    Text,
    block_from_dict,
    block_to_dict,
    footnoted,
    survey_history,
)
from carryall.providers import Capabilities, Request
from carryall.providers import anthropic as anthropic_wire
from carryall.providers import gemini as gemini_wire
from carryall.sessions import SessionMeta, render
from tests.support.histories import sdk_check

HOME = Origin("anthropic", "api.anthropic.com", "claude-x")
NATIVE = {
    "type": "web_search_result_location",
    "url": "https://example.com/a",
    "title": "Page A",
    "encrypted_index": "EI-1",
    "cited_text": "a quote",
}
PAGE = Citation("https://example.com/a", "Page A", "a quote", raw=json.dumps(NATIVE), origin=HOME)
OTHER = Citation("https://example.com/b", "Page B")
SEARCH = ServerToolCall.made(
    "server_tool_use",
    '{"type":"server_tool_use","id":"srv_1","name":"web_search","input":{"query":"q"}}',
    HOME,
    tool="web_search",
    id="srv_1",
    name="web_search",
    input={"query": "what is new"},
)
FOUND = ServerToolResult.made(
    "web_search_tool_result",
    '{"type":"web_search_tool_result","tool_use_id":"srv_1","content":[]}',
    HOME,
    tool="web_search",
    call_id="srv_1",
    sources=[PAGE, OTHER],
)
RAN = ServerToolCall.made(
    "executableCode", "", None, tool="code_execution", input={"code": "print(6 * 7)"}
)
OUTPUT = ServerToolResult.made("codeExecutionResult", "", None, tool="code_execution", output="42")
ANSWER = Message.assistant(
    [SEARCH, FOUND, RAN, OUTPUT, Text("A is new.", (PAGE,)), Text("B too.", (OTHER, PAGE))]
)


def test_the_common_forms_go_through_their_json_form_unchanged() -> None:
    for block in ANSWER.content:
        assert block_from_dict(json.loads(json.dumps(block_to_dict(block)))) == block
    assert Message.from_dict(ANSWER.to_dict()) == ANSWER
    assert type(block_from_dict(block_to_dict(FOUND))) is ServerToolResult


def test_a_plain_text_json_form_has_no_citations_key() -> None:
    assert block_to_dict(Text("hi")) == {"type": "text", "text": "hi"}


def test_an_old_transcripts_opaque_blocks_still_load_as_they_were() -> None:
    old = {
        "role": "assistant",
        "content": [
            {"type": "opaque", "kind": "server_tool_use", "raw": "{}", "text": "[server_tool_use]"},
            {"type": "text", "text": "It is sunny."},
            {"type": "opaque", "kind": "citations", "raw": "[]"},
        ],
    }
    message = Message.from_dict(old)
    assert [type(b) for b in message.content] == [Opaque, Text, Opaque]
    assert message.to_dict() == old


def test_the_readings_word_what_the_tools_did() -> None:
    assert SEARCH.text == "[web_search: what is new]"
    assert FOUND.text == (
        "[web_search result]\n1. Page A <https://example.com/a>\n2. Page B <https://example.com/b>"
    )
    assert RAN.text == "[code_execution]\n```\nprint(6 * 7)\n```"
    assert OUTPUT.text == "[code_execution result]\n42"


def test_footnotes_number_each_source_once_per_message() -> None:
    notes = Footnotes()
    assert notes.mark(Text("A is new.", (PAGE,))) == "A is new. [1]"
    assert notes.mark(Text("B too.", (OTHER, PAGE))) == "B too. [2] [1]"
    assert notes.text() == "[1] Page A <https://example.com/a>\n[2] Page B <https://example.com/b>"
    plain = (Text("nothing cited"),)
    assert footnoted(plain) is plain


def test_cited_text_is_never_canonical() -> None:
    history = [Message.user("hi"), Message.assistant([Text("A is new.", (PAGE,))])]
    assert survey_history(history).irregular == [1]


def test_every_reader_shows_the_footnotes_and_the_tools() -> None:
    meta = SessionMeta(id="20261205-000000-abcdef", created=datetime(2026, 12, 5, tzinfo=UTC))
    history = [Message.user("What is new?"), ANSWER]
    for fmt in ("text", "markdown", "html"):
        shown = render(fmt, meta, history)
        assert "A is new. [1]" in shown, fmt
        assert "B too. [2] [1]" in shown, fmt
        assert "[web_search: what is new]" in shown, fmt
        assert "print(6 * 7)" in shown and "42" in shown, fmt
        assert "https://example.com/b" in shown, fmt
    exported = json.loads(render("json", meta, history))
    blocks = exported["messages"][1]["content"]
    assert [b["type"] for b in blocks][:4] == [
        "server_tool_call",
        "server_tool_result",
        "server_tool_call",
        "server_tool_result",
    ]
    assert blocks[4]["citations"][0]["url"] == "https://example.com/a"


def test_home_gets_the_native_forms_and_another_wire_the_readings() -> None:
    history = [Message.user("What is new?"), ANSWER, Message.user("Thanks.")]
    home = anthropic_wire.encode(
        Request(model="claude-x", endpoint="api.anthropic.com", messages=tuple(history)),
        Capabilities(),
    )
    content = home.body["messages"][1]["content"]
    assert content[0]["type"] == "server_tool_use"
    assert content[1]["type"] == "web_search_tool_result"
    [cited] = [part for part in content if part.get("text") == "A is new."]
    assert cited["citations"] == [NATIVE]  # its own origin's, as it came
    # A source of no origin is nobody's native form: that text gets footnotes even here.
    assert any(part.get("text") == "B too. [1] [2]" for part in content)
    sdk_check(home.body)
    away = gemini_wire.encode(Request(model="gemini-x", messages=tuple(history)), Capabilities())
    texts = [p.get("text", "") for p in away.body["contents"][1]["parts"]]
    assert "[web_search: what is new]" in texts
    assert "A is new. [1]" in texts
    assert texts[-1] == ("[1] Page A <https://example.com/a>\n[2] Page B <https://example.com/b>")
    kinds = [d.kind for d in away.downgrades]
    assert kinds.count("citations") == 2 and "opaque" in kinds


def test_the_forms_are_plain_values() -> None:
    assert msgspec.structs.replace(PAGE, title="T") != PAGE
    assert hash(PAGE) == hash(Citation(**msgspec.structs.asdict(PAGE)))


def test_bedrock_cited_content_is_cited_text_home_as_it_came_elsewhere_footnoted() -> None:
    from carryall.providers import bedrock as bedrock_wire
    from tests.support.sdk_wires import BEDROCK_MODEL, check_bedrock_request

    citation = {
        "title": "handbook.pdf",
        "sourceContent": [{"text": "Leave is 25 days."}],
        "location": {"documentChar": {"documentIndex": 0, "start": 10, "end": 27}},
    }
    cited = {"content": [{"text": "You get 25 days."}], "citations": [citation]}
    body = {
        "output": {"message": {"role": "assistant", "content": [{"citationsContent": cited}]}},
        "stopReason": "end_turn",
        "usage": {"inputTokens": 10, "outputTokens": 5, "totalTokens": 15},
    }
    endpoint = "bedrock-runtime.us-east-1.amazonaws.com"
    answer = bedrock_wire.decode_response(body, endpoint=endpoint, model=BEDROCK_MODEL).message
    [text] = answer.content
    assert isinstance(text, Text) and text.text == "You get 25 days."
    [source] = text.citations
    assert (source.title, source.cited_text, source.start, source.end) == (
        "handbook.pdf",
        "Leave is 25 days.",
        10,
        27,
    )
    history = (Message.user("How much leave?"), answer, Message.user("Thanks."))
    home = bedrock_wire.encode(
        Request(model=BEDROCK_MODEL, endpoint=endpoint, messages=history), Capabilities()
    )
    assert home.body["messages"][1]["content"] == [{"citationsContent": cited}]
    check_bedrock_request(home.body)
    away = anthropic_wire.encode(Request(model="claude-x", messages=history), Capabilities())
    assert [p["text"] for p in away.body["messages"][1]["content"]] == [
        "You get 25 days. [1]",
        "[1] handbook.pdf",
    ]


def test_an_old_transcripts_citations_still_go_back_on_their_text() -> None:
    # Written before `Citation`: the citations rode an `Opaque` of kind
    # `citations` right after their text, and go back onto it at home.
    old = Message.from_dict(
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "It is sunny."},
                {
                    "type": "opaque",
                    "kind": "citations",
                    "raw": json.dumps([NATIVE]),
                    "origin": msgspec.to_builtins(HOME),
                },
            ],
        }
    )
    history = (Message.user("Weather?"), old, Message.user("Thanks."))
    request = Request(model="claude-x", endpoint="api.anthropic.com", messages=history)
    body = anthropic_wire.encode(request, Capabilities()).body
    assert body["messages"][1]["content"] == [
        {"type": "text", "text": "It is sunny.", "citations": [NATIVE]}
    ]
    sdk_check(body)
