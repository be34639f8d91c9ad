"""Provider-hosted tools, declared and answered: every kind on every wire, sent or refused.

Declared: each `HostedTool` kind goes into the wire's own tool definition
where the wire runs it (the body validates against the official SDK's
request type), and is refused with a `HostedToolError` naming the kind and
the wire where it does not, before anything is sent. Answered: recorded
answers holding server-tool calls and results (the 2026 corpus) decode
into `ServerToolCall` and `ServerToolResult`, cited text into `Citation`s,
and are recorded in a session and read back whole.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from carryall.blocks import Message, ServerToolCall, ServerToolResult, Text
from carryall.errors import HostedToolError
from carryall.providers import Capabilities, HostedTool, Request
from carryall.providers import anthropic as anthropic_wire
from carryall.providers import bedrock as bedrock_wire
from carryall.providers import gemini as gemini_wire
from carryall.providers import openai as openai_wire
from carryall.providers import responses as responses_wire
from carryall.providers.hosted import WIRE_KINDS
from carryall.sessions import Store
from tests.support.histories import sdk_check
from tests.support.recorded import anthropic_sdk_check, beta_only
from tests.support.recorded_2026 import decoded, exchanges
from tests.support.sdk_openai import check_openai_request
from tests.support.sdk_wires import (
    check_bedrock_request,
    check_gemini_request,
    check_responses_request,
)

KINDS = (
    "web_search",
    "web_fetch",
    "code_execution",
    "file_search",
    "url_context",
    "mcp",
    "advisor",
)

CONFIG: dict[str, dict[str, Any]] = {
    "file_search": {
        "vector_store_ids": ["vs_1"],
        "file_search_store_names": ["fileSearchStores/a"],
    },
    "mcp": {"server_url": "https://mcp.example.com/sse", "server_label": "docs"},
    "advisor": {"model": "claude-opus-4-8", "max_tokens": 1024},
}
"""Settings a kind cannot go without on some wire; each wire is given the ones it takes."""

_TAKES = {
    ("openai-responses", "file_search"): {"vector_store_ids"},
    ("gemini", "file_search"): {"file_search_store_names"},
}


def _tool(wire: str, kind: str) -> HostedTool:
    wanted = _TAKES.get((wire, kind), set(CONFIG.get(kind, {})))
    return HostedTool(kind, {k: v for k, v in CONFIG.get(kind, {}).items() if k in wanted})  # type: ignore[arg-type]


def _request(*hosted: HostedTool, model: str = "m") -> Request:
    return Request(model=model, messages=(Message.user("What is new today?"),), hosted_tools=hosted)


Encoder = Callable[[Request], dict[str, Any]]

ENCODERS: dict[str, Encoder] = {
    "anthropic": lambda r: anthropic_wire.encode(r, Capabilities()).body,
    "openai-responses": lambda r: responses_wire.encode(r, Capabilities()).body,
    "gemini": lambda r: gemini_wire.encode(r, Capabilities()).body,
    "openai": lambda r: openai_wire.encode(r, Capabilities(), "openai").body,
    "llama-server": lambda r: openai_wire.encode(r, Capabilities(), "llama-server").body,
    "bedrock": lambda r: bedrock_wire.encode(r, Capabilities()).body,
}


def _anthropic_check(body: dict[str, Any]) -> None:
    """The SDK's request type; its beta type for a body holding a beta (the MCP connector, the
    advisor), which must then hold one: a beta kind that fits the plain type is a wrong one."""
    beta = "mcp_servers" in body or any(
        str(tool.get("type", "")).startswith("advisor_") for tool in body.get("tools", ())
    )
    assert bool(beta_only(body)) == beta, beta_only(body)
    anthropic_sdk_check(body)


CHECKS: dict[str, Callable[[dict[str, Any]], None]] = {
    "anthropic": _anthropic_check,
    "openai-responses": check_responses_request,
    "gemini": check_gemini_request,
    "openai": check_openai_request,
    "llama-server": check_openai_request,
    "bedrock": check_bedrock_request,
}

WHERE: dict[tuple[str, str], Callable[[dict[str, Any]], Any]] = {
    ("anthropic", "web_search"): lambda b: b["tools"][-1]["type"] == "web_search_20250305",
    ("anthropic", "web_fetch"): lambda b: b["tools"][-1]["type"] == "web_fetch_20250910",
    ("anthropic", "code_execution"): lambda b: b["tools"][-1]["type"].startswith("code_execution"),
    ("anthropic", "mcp"): lambda b: (
        b["mcp_servers"] == [{"type": "url", "url": "https://mcp.example.com/sse", "name": "docs"}]
    ),
    ("anthropic", "advisor"): lambda b: (
        b["tools"][-1]
        == {
            "type": "advisor_20260301",
            "name": "advisor",
            "model": "claude-opus-4-8",
            "max_tokens": 1024,
        }
    ),
    ("openai-responses", "web_search"): lambda b: b["tools"][-1] == {"type": "web_search"},
    ("openai-responses", "file_search"): lambda b: b["tools"][-1]["vector_store_ids"] == ["vs_1"],
    ("openai-responses", "code_execution"): lambda b: b["tools"][-1]["type"] == "code_interpreter",
    ("openai-responses", "mcp"): lambda b: b["tools"][-1]["server_label"] == "docs",
    ("gemini", "web_search"): lambda b: b["tools"][-1] == {"googleSearch": {}},
    ("gemini", "url_context"): lambda b: b["tools"][-1] == {"urlContext": {}},
    ("gemini", "code_execution"): lambda b: b["tools"][-1] == {"codeExecution": {}},
    ("gemini", "file_search"): lambda b: b["tools"][-1]["fileSearch"]["fileSearchStoreNames"],
    ("openai", "web_search"): lambda b: b["web_search_options"] == {},
}
"""Where each kind lands on each wire that runs it: the golden of the declaration."""


def test_the_table_and_the_goldens_name_the_same_kinds() -> None:
    assert {(w, k) for w, kinds in WIRE_KINDS.items() for k in kinds} == set(WHERE)
    assert set(WIRE_KINDS) == set(ENCODERS)


@pytest.mark.parametrize(("wire", "kind"), sorted(WHERE))
def test_a_hosted_kind_is_declared_natively_and_the_sdk_takes_it(wire: str, kind: str) -> None:
    body = ENCODERS[wire](_request(_tool(wire, kind)))
    assert WHERE[wire, kind](body), body
    CHECKS[wire](body)


@pytest.mark.parametrize(
    ("wire", "kind"),
    sorted((w, k) for w in WIRE_KINDS for k in KINDS if k not in WIRE_KINDS[w]),
)
def test_a_kind_the_wire_lacks_is_refused_by_name_before_sending(wire: str, kind: str) -> None:
    with pytest.raises(HostedToolError) as caught:
        ENCODERS[wire](_request(HostedTool(kind, CONFIG.get(kind, {}))))  # type: ignore[arg-type]
    assert (caught.value.kind, caught.value.wire) == (kind, wire)
    assert f"hosted tool {kind!r} on the {wire} wire" in str(caught.value)


def test_a_setting_the_wire_does_not_take_is_refused_not_dropped() -> None:
    with pytest.raises(HostedToolError, match="'max_uses' is not one it takes"):
        ENCODERS["gemini"](_request(HostedTool("web_search", {"max_uses": 3})))
    with pytest.raises(HostedToolError, match="needs the setting 'server_url'"):
        ENCODERS["openai-responses"](_request(HostedTool("mcp", {"server_label": "docs"})))
    body = ENCODERS["anthropic"](_request(HostedTool("web_search", {"max_uses": 3})))
    assert body["tools"] == [{"type": "web_search_20250305", "name": "web_search", "max_uses": 3}]
    sdk_check(body)


def test_the_advisor_is_declared_as_the_recording_declared_it_and_needs_its_model() -> None:
    """carryall's advisor declaration, from the recorded request's own settings, is that
    request's tool definition; without a model it is refused, never sent half-made."""
    from carryall.providers.hosted import ANTHROPIC_ADVISOR_BETA, anthropic_betas

    for exchange_id in (
        "anthropic/2026/advisor_tool_replay#0",
        "anthropic/2026/advisor_tool_stream#0",
    ):
        exchange = next(e for e in exchanges() if e.id == exchange_id)
        (recorded,) = exchange.request["tools"]
        settings = {k: v for k, v in recorded.items() if k not in ("type", "name")}
        request = _request(HostedTool("advisor", settings), model=exchange.model)
        body = ENCODERS["anthropic"](request)
        assert body["tools"] == [recorded]
        _anthropic_check(body)
        assert anthropic_betas(request) == (ANTHROPIC_ADVISOR_BETA,)
    with pytest.raises(HostedToolError, match="needs the setting 'model'"):
        ENCODERS["anthropic"](_request(HostedTool("advisor")))
    with pytest.raises(HostedToolError, match="'effort' is not one it takes"):
        ENCODERS["anthropic"](_request(HostedTool("advisor", {"model": "m", "effort": "high"})))


def test_hosted_tools_ride_after_the_function_tools() -> None:
    from carryall.providers import ToolSpec

    spec = ToolSpec("lookup", "Looks a word up.", {"type": "object", "properties": {}})
    request = Request(
        model="m",
        messages=(Message.user("hi"),),
        tools=(spec,),
        hosted_tools=(HostedTool("code_execution"),),
    )
    body = ENCODERS["anthropic"](request)
    assert [t["name"] for t in body["tools"]] == ["lookup", "code_execution"]
    sdk_check(body)
    body = ENCODERS["gemini"](request)
    assert body["tools"][-1] == {"codeExecution": {}} and "functionDeclarations" in body["tools"][0]
    check_gemini_request(body)


# -- answered ------------------------------------------------------------------------

SERVED = {
    "responses/2026/web_search_alias_continued#0": ("web_search", False),
    "responses/2026/code_interpreter_with_reasoning#0": ("code_execution", False),
    "responses/2026/file_search_with_results#0": ("file_search", True),
    "responses/2026/mcp_server_tool#0": ("mcp", False),
    "responses/2026/url_citation_annotations#0": ("web_search", True),
    "anthropic/2026/code_execution_stream#0": ("code_execution", False),
    "anthropic/2026/advisor_tool_replay#0": ("advisor", False),
    "anthropic/2026/llm_web_search_stream#0": ("web_search", True),
    "gemini/2026/grounding_web_search#0": ("web_search", True),
    "gemini/2026/url_context_stream#0": ("url_context", True),
    "openai_compatible/2026/groq_compound_executed_tools#0": ("web_search", False),
    "openai_compatible/2026/openrouter_web_search_annotations#0": ("", True),
}
"""Recorded answers holding a provider-run tool (its common kind) and whether text cites sources."""


def _recorded() -> dict[str, Any]:
    return {exchange.id: exchange for exchange in exchanges() if exchange.id in SERVED}


def test_every_served_recording_is_in_the_corpus() -> None:
    assert set(_recorded()) == set(SERVED)


@pytest.mark.parametrize("exchange_id", sorted(SERVED))
def test_a_recorded_server_tool_answer_decodes_into_the_common_form_and_is_recorded(
    exchange_id: str, tmp_path: Path
) -> None:
    kind, cites = SERVED[exchange_id]
    answer = decoded(_recorded()[exchange_id]).message
    calls = [b for b in answer.content if isinstance(b, ServerToolCall)]
    results = [b for b in answer.content if isinstance(b, ServerToolResult)]
    if kind:
        assert kind in {c.tool for c in calls}, [c.tool for c in calls]
        assert all(c.text.startswith(f"[{c.tool}") for c in calls)
        assert all(r.text.startswith(f"[{r.tool} ") for r in results)
    cited = [c for b in answer.content if isinstance(b, Text) for c in b.citations]
    assert bool(cited) == cites
    assert all(c.url or c.title or c.source for c in cited)
    store = Store(tmp_path / "sessions")
    session = store.create(backend="test", model="m")
    history = [Message.user("asked"), answer]
    session.record([], history)
    assert store.open(session.id).messages() == history


def test_a_server_tool_answer_goes_to_another_wire_as_its_reading_and_home_as_it_came() -> None:
    exchange = _recorded()["responses/2026/web_search_alias_continued#0"]
    # As the transport hands it on: stamped with the name the request asked by.
    answer = decoded(exchange).as_requested(exchange.model).message
    history = [Message.user("asked"), answer, Message.user("thanks")]
    home = Request(model=exchange.model, endpoint=exchange.endpoint, messages=tuple(history))
    body = responses_wire.encode(home, Capabilities()).body
    sent_kinds = [item.get("type") for item in body["input"]]
    assert "web_search_call" in sent_kinds
    check_responses_request(body)
    away = Request(model="claude-x", messages=tuple(history))
    encoded = anthropic_wire.encode(away, Capabilities())
    texts = [
        part["text"] for part in encoded.body["messages"][1]["content"] if part["type"] == "text"
    ]
    call = next(b for b in answer.content if isinstance(b, ServerToolCall))
    assert call.text in texts
    assert any(d.kind == "opaque" and d.index == 1 for d in encoded.downgrades)
    sdk_check(encoded.body)


def test_the_mcp_connector_opts_into_its_beta_on_the_wire() -> None:
    pytest.importorskip("anthropic")
    from carryall.providers.hosted import ANTHROPIC_MCP_BETA
    from carryall.transport.anthropic import AnthropicBackend
    from tests.support.scripted import Reply, served

    mcp = _tool("anthropic", "mcp")
    with served([Reply(sse="anthropic_text.sse"), Reply(sse="anthropic_text.sse")]) as server:
        backend = AnthropicBackend(model="claude-x", api_key="k", base_url=server.url)
        try:
            backend.complete(_request(mcp, model="claude-x"))
            backend.complete(_request(model="claude-x"))
        finally:
            backend.close()
    with_mcp, without = server.requests
    assert with_mcp["headers"].get("anthropic-beta") == ANTHROPIC_MCP_BETA
    assert with_mcp["body"]["mcp_servers"][0]["name"] == "docs"
    assert "anthropic-beta" not in without["headers"] and "mcp_servers" not in without["body"]


def test_a_declared_advisor_opts_into_its_beta_beside_the_mcp_connectors() -> None:
    pytest.importorskip("anthropic")
    from carryall.providers.hosted import ANTHROPIC_ADVISOR_BETA, ANTHROPIC_MCP_BETA
    from carryall.transport.anthropic import AnthropicBackend
    from tests.support.scripted import Reply, served

    advisor = _tool("anthropic", "advisor")
    mcp = _tool("anthropic", "mcp")
    with served([Reply(sse="anthropic_text.sse"), Reply(sse="anthropic_text.sse")]) as server:
        backend = AnthropicBackend(model="claude-x", api_key="k", base_url=server.url)
        try:
            backend.complete(_request(advisor, model="claude-x"))
            backend.complete(_request(advisor, mcp, model="claude-x"))
        finally:
            backend.close()
    alone, both = server.requests
    assert alone["headers"].get("anthropic-beta") == ANTHROPIC_ADVISOR_BETA
    assert alone["body"]["tools"][-1]["type"] == "advisor_20260301"
    assert both["headers"].get("anthropic-beta") == f"{ANTHROPIC_ADVISOR_BETA},{ANTHROPIC_MCP_BETA}"
