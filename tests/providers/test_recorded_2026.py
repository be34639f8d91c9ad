"""Every recorded 2026 exchange, held to the fidelity promise on all six wires.

The exchanges are real traffic recorded against the live APIs by other
projects' test suites (`tests/fixtures/recorded/<wire>/2026/`, sources in the
`SOURCES.md` beside each); llama-server's are carryall's own recordings of a
live llama-server, made by the `record.py` beside them, as no public suite
records that server with its requests. For each exchange, as far as the
recording holds the parts a check needs:

- `decode`: the answer (whole, or streamed through the stream decoder) keeps
  every value of its content, modelled in a block or in an `Opaque` block,
  or names it in the response's report;
- `stream`: a streamed answer decodes to what the whole answer the stream
  adds up to decodes to, its token probabilities too;
- `import`: the request's history imports keeping every value of its messages;
- `echo`: re-encoded for its own origin (model, endpoint), the imported
  history gives back the recorded messages;
- `sdk`: that body, and the next request after the answer, validate against
  the official SDK's request type of the server it goes to (OpenRouter's own
  for OpenRouter);
- `continue`: the next request, encoded for the model the request named (an
  alias, often) after decoding the answer, sends back everything of the
  answer that the recording's own next request sent back (signed thinking,
  thought signatures, encrypted reasoning, server-tool blocks);
- `alias`: the same, for every answer holding something only its model reads
  back (a signature, redacted thinking, an opaque block): all of it is sent
  to the model the request named, whether the recording continued or not;
- `flat`: the history with its answer goes through the flat form and back
  unchanged;
- `cross`: encoded for every other wire, each value the history holds is
  either sent or named by a downgrade of the message that held it, and the
  body validates against that wire's SDK type.

The checks are generic walks of the recorded JSON, never a list of expected
values. A check that fails on today's code is in the ledger
`tests/providers/recorded_2026_gaps.py` with its cause and runs as a strict
xfail: when the gap closes, the xfail fails and the entry is pruned.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest

from carryall.blocks import Message, Opaque, RedactedThinking, Text, Thinking, ToolUse
from carryall.providers import Encoded, Response
from carryall.rounds import from_flat, to_flat
from tests.providers.recorded_2026_gaps import GAPS
from tests.support.recorded_2026 import (
    TARGETS,
    WIRES,
    Exchange,
    Held,
    Leaf,
    decoded,
    describe,
    exchanges,
    fixture_files,
    held_by,
    held_by_response,
    leaves,
    lost,
    next_turn,
    request_for,
    unsent,
)

EXCHANGES = exchanges()


def _imported(exchange: Exchange) -> tuple[str | None, list[Message]]:
    assert exchange.request is not None
    return WIRES[exchange.wire].import_history(exchange.request)


def _own_encoded(exchange: Exchange, messages: list[Message], system: str | None) -> Encoded:
    wire = WIRES[exchange.wire]
    assert exchange.request is not None
    request = request_for(
        exchange.wire,
        exchange.model,
        exchange.endpoint,
        messages,
        system,
        wire.tools(exchange.request),
    )
    return wire.encode(request)


def _own_json(encoded: Encoded) -> dict[str, Any]:
    # As JSON values: a body may hold tuples where the recording has lists.
    body: dict[str, Any] = json.loads(json.dumps(encoded.body))
    return body


def _own_body(exchange: Exchange, messages: list[Message], system: str | None) -> dict[str, Any]:
    return _own_json(_own_encoded(exchange, messages, system))


# -- the checks, each a function of one exchange ------------------------------------------


def check_decode(exchange: Exchange) -> None:
    wire = WIRES[exchange.wire]
    response = decoded(exchange)
    whole = wire.assemble(exchange.data["stream"]) if "stream" in exchange.data else None
    if whole is not None:
        # A stream's values are those of the answer it adds up to (its deltas are pieces).
        content = wire.answer_content(whole)
    elif "stream" in exchange.data:
        content = wire.stream_content(exchange.data["stream"])
    else:
        content = wire.answer_content(exchange.data["response"])
    missing = lost(content, held_by_response(response), "answer")
    assert not missing, f"decode lost {describe(missing)}"


def _merged(message: Message) -> list[Any]:
    """A message's blocks with neighbouring texts joined, as a stream and a body may split them."""
    out: list[Any] = []
    for block in message.content:
        if isinstance(block, Text) and out and isinstance(out[-1], Text):
            out[-1] = Text(out[-1].text + block.text)
        else:
            out.append(block)
    return out


def check_stream(exchange: Exchange) -> None:
    wire = WIRES[exchange.wire]
    whole = wire.assemble(exchange.data["stream"])
    assert whole is not None, "the stream never finished its answer"
    streamed = decoded(exchange)
    body = wire.decode(whole, exchange.endpoint, exchange.model)
    assert _merged(streamed.message) == _merged(body.message), "stream and whole answer differ"
    assert streamed.stop_reason == body.stop_reason
    assert streamed.logprobs == body.logprobs, "stream and whole token probabilities differ"


def check_import(exchange: Exchange) -> None:
    request = exchange.request
    assert request is not None
    wire = WIRES[exchange.wire]
    system, messages = _imported(exchange)
    recorded = {"messages": request[wire.messages_key]}
    for key in ("system", "instructions", "systemInstruction", "system_instruction"):
        if key in request:
            recorded[key] = request[key]
    missing = lost(recorded, held_by(messages, system), "request")
    assert not missing, f"import lost {describe(missing)}"


def check_echo(exchange: Exchange) -> None:
    request = exchange.request
    assert request is not None
    key = WIRES[exchange.wire].messages_key
    system, messages = _imported(exchange)
    body = _own_body(exchange, messages, system)
    sent, recorded = body.get(key), request[key]
    if sent != recorded:
        at = next(
            (i for i, (a, b) in enumerate(zip(sent or [], recorded, strict=False)) if a != b),
            min(len(sent or []), len(recorded)),
        )
        got = json.dumps((sent or [])[at:][:1])[:160]
        want = json.dumps(recorded[at:][:1])[:160]
        raise AssertionError(f"echo differs at {key}[{at}]: sent {got} recorded {want}")


def _as_handed_on(exchange: Exchange) -> Response:
    """The answer as a backend hands it on to the history.

    The transport stamps every origin the decoder made with the model name
    the request asked by (`Response.as_requested`, in `transport/_sdk.py`),
    so the next request to that name (an alias, as often as not) is its home.
    """
    return decoded(exchange).as_requested(exchange.model)


def _continued(exchange: Exchange) -> tuple[list[Message], str | None]:
    system, messages = _imported(exchange)
    answer = _as_handed_on(exchange).message
    return [*messages, answer, next_turn(answer)], system


def check_sdk(exchange: Exchange) -> None:
    wire = WIRES[exchange.wire]
    system, messages = _imported(exchange)
    wire.sdk_check(_own_body(exchange, messages, system), exchange.model, exchange.endpoint)
    if exchange.answered:
        history, system = _continued(exchange)
        wire.sdk_check(_own_body(exchange, history, system), exchange.model, exchange.endpoint)


def check_continue(exchange: Exchange) -> None:
    wire = WIRES[exchange.wire]
    following = exchange.following
    assert following is not None and isinstance(following.get("request"), dict)
    history, system = _continued(exchange)
    encoded = _own_encoded(exchange, history, system)
    # What the request names as left off of the answer (its place: before the next turn).
    named = {d.reason.split(":", 1)[0] for d in encoded.downgrades if d.index == len(history) - 2}
    if "stream" in exchange.data:
        answer = wire.assemble(exchange.data["stream"]) or {}
    else:
        answer = exchange.data["response"]
    sent_back = {
        leaf.value
        for leaf in leaves(following["request"][wire.messages_key])
        if isinstance(leaf.value, str) and len(leaf.value) >= 8
    }
    wanted = [
        leaf
        for leaf in leaves(wire.answer_content(answer), "answer")
        if isinstance(leaf.value, str) and leaf.value in sent_back
    ]
    missing = [
        leaf
        for leaf in unsent(wanted, _own_json(encoded)[wire.messages_key])
        if _answer_field(leaf) not in named
    ]
    assert not missing, f"the next request to {exchange.model} left out {describe(missing)}"


def _answer_field(leaf: Leaf) -> str:
    """The field of the answer a value sat in (`groundingMetadata`), as a downgrade names it.

    A wire that has no place in a request for a field of its answer says so
    in a downgrade of the answer's message whose reason begins with that
    field's name, as a decoder names a field it does not keep by its path:
    every value under it is then named, not lost.
    """
    found = re.match(r"answer(?:\[\d+\])?\.([^.\[]+)", leaf.path)
    return found.group(1) if found else ""


def _signed(message: Message) -> list[str]:
    """What only the answering model can read back: signatures, redacted and opaque data."""
    out: list[str] = []
    for block in message.content:
        if isinstance(block, Thinking | ToolUse) and block.signature:
            out.append(block.signature)
        elif isinstance(block, RedactedThinking):
            out.append(block.data)
        elif isinstance(block, Opaque):
            out.append(block.raw)
    return out


def _holds_signed(exchange: Exchange) -> bool:
    try:
        return bool(_signed(decoded(exchange).message))
    except (
        Exception
    ):  # an answer that does not decode is the decode check's failure, and this one's
        return True


def check_alias(exchange: Exchange) -> None:
    system, messages = _imported(exchange)
    answer = _as_handed_on(exchange).message
    encoded = _own_encoded(exchange, [*messages, answer, next_turn(answer)], system)
    sent = json.dumps(_own_json(encoded), ensure_ascii=False)
    # A field the wire's input form has no place for may be left off, when a downgrade of
    # the answer's message names it (its key, as every report check here asks).
    named = [d.reason for d in encoded.downgrades if d.index == len(messages)]
    left = []
    for value in _signed(answer):
        try:
            parts = [
                (json.dumps(leaf.value, ensure_ascii=False)[1:-1], leaf.key)
                for leaf in leaves(json.loads(value))
                if isinstance(leaf.value, str)
            ]
        except ValueError:
            parts = [(json.dumps(value, ensure_ascii=False)[1:-1], "")]
        if not all(
            shown in sent or (key and any(key in reason for reason in named))
            for shown, key in parts
        ):
            left.append(value[:40])
    assert not left, (
        f"the next request to {exchange.model} (answered as {decoded(exchange).model}) "
        f"left out {len(left)} signed or opaque value(s), first {left[0]!r}"
    )


def check_flat(exchange: Exchange) -> None:
    system, messages = _imported(exchange)
    history = [*messages, decoded(exchange).message]
    back_system, back = from_flat(to_flat(history, system=system))
    assert back_system == system, "the flat form changed the system prompt"
    assert len(back) == len(history), f"the flat form gave {len(back)} messages for {len(history)}"
    for i, (before, after) in enumerate(zip(history, back, strict=True)):
        if before != after:
            raise AssertionError(f"the flat form changed message {i}: {_change(before, after)}")


def _change(before: Message, after: Message) -> str:
    """What a round trip changed in a message, in words: its role, its blocks, or their fields."""
    if before.role != after.role:
        return f"a {before.role} message came back as {after.role}"
    kinds = [type(b).__name__ for b in before.content]
    back = [type(b).__name__ for b in after.content]
    if kinds != back:
        gone = sorted(set(kinds) - set(back))
        return f"{', '.join(gone)} block(s) dropped" if gone else f"blocks {kinds} became {back}"
    for a, b in zip(before.content, after.content, strict=True):
        if a != b:
            fields = [f for f in a.__struct_fields__ if getattr(a, f) != getattr(b, f, None)]
            return f"{type(a).__name__} lost or changed {', '.join(fields)}"
    return "the message differs"


def check_cross(exchange: Exchange) -> None:
    own = "openai" if exchange.wire in ("openai_compatible", "llama_server") else exchange.wire
    history, system = _continued(exchange)
    faults = []
    for target in TARGETS:
        if target == own:
            continue
        wire = WIRES[target]
        encoded = wire.encode(request_for(target, wire.model, wire.endpoint, history, system))
        try:
            wire.sdk_check(encoded.body, wire.model, wire.endpoint)
        except Exception as error:  # any refusal of the SDK type is the fault
            faults.append(f"{target}: SDK type refused the body ({str(error)[:80]})")
            continue
        text = json.dumps(encoded.body, ensure_ascii=False)
        named = {d.index for d in encoded.downgrades}
        unsent = []
        for index, message in enumerate(history):
            if index in named:
                continue
            for leaf in leaves(_content_values(message), f"[{index}]"):
                value = leaf.value
                shown = json.dumps(value, ensure_ascii=False)
                shown = shown[1:-1] if isinstance(value, str) else shown
                if shown not in text and not (
                    system and isinstance(value, str) and value in system
                ):
                    unsent.append(leaf)
        if unsent:
            faults.append(f"{target}: not sent, not named: {describe(unsent)}")
    assert not faults, "; ".join(faults)


def _content_values(message: Message) -> Any:
    """What a message holds, less carryall's own bookkeeping (origins, kinds, forms)."""
    out = []
    for block in message.to_dict()["content"]:
        block = {k: v for k, v in block.items() if k not in ("origin", "kind", "source")}
        if isinstance(block.get("raw"), str):
            block["raw"] = json.loads(block["raw"])
        spelling = block.pop("spelling", None)
        if spelling and spelling.get("extra"):
            # How its wire wrote it: the fields it kept are values; its origin and form are not.
            block["spelling"] = json.loads(spelling["extra"])
        out.append(block)
    return out


CHECKS: dict[str, tuple[Callable[[Exchange], None], Callable[[Exchange], bool]]] = {
    "decode": (check_decode, lambda e: e.answered),
    "stream": (check_stream, lambda e: e.answered and "stream" in e.data),
    "import": (check_import, lambda e: e.request is not None),
    "echo": (check_echo, lambda e: e.request is not None),
    "sdk": (check_sdk, lambda e: e.request is not None),
    "continue": (
        check_continue,
        lambda e: (
            e.request is not None
            and e.answered
            and isinstance((e.following or {}).get("request"), dict)
        ),
    ),
    "alias": (
        check_alias,
        lambda e: e.request is not None and e.answered and _holds_signed(e),
    ),
    "flat": (check_flat, lambda e: e.request is not None and e.answered),
    "cross": (check_cross, lambda e: e.request is not None and e.answered),
}
"""Each check and which exchanges it applies to."""


def _cases() -> list[Any]:
    cases = []
    for name, (_, applies) in CHECKS.items():
        for exchange in EXCHANGES:
            if not applies(exchange):
                continue
            marks = []
            reason = GAPS.get((exchange.id, name))
            if reason:
                marks.append(pytest.mark.xfail(strict=True, reason=reason))
            cases.append(pytest.param(name, exchange, id=f"{name}:{exchange.id}", marks=marks))
    return cases


@pytest.mark.parametrize(("check", "exchange"), _cases())
def test_recorded_exchange(check: str, exchange: Exchange) -> None:
    CHECKS[check][0](exchange)


def test_the_collection_is_large_sourced_and_covers_every_class() -> None:
    """At least 120 exchanges, 15 a wire, each file sourced, every class of the promise present."""
    per_wire: dict[str, int] = {}
    classes: set[str] = set()
    for path in fixture_files():
        doc = json.loads(path.read_text(encoding="utf-8"))
        source = doc["source"]
        assert source["repo"] and source["path"] and len(source["commit"]) == 40, path
        assert doc["shrunk"] and doc["covers"], path
        sources = (path.parent / "SOURCES.md").read_text(encoding="utf-8")
        assert f"`{path.name}`" in sources and source["commit"] in sources, path
        if "recorded_by" in doc:
            # carryall's own recording of a live server: the script that made it sits beside it.
            assert "record.py" in doc["recorded_by"], path
            assert (path.parent / "record.py").is_file(), path
        wire = "chat" if doc["wire"] in ("openai", "openai_compatible") else doc["wire"]
        per_wire[wire] = per_wire.get(wire, 0) + len(doc["exchanges"])
        if doc["exchanges"]:
            classes.update(doc["classes"])
    assert sum(per_wire.values()) >= 120, per_wire
    wires = ("anthropic", "chat", "responses", "gemini", "bedrock", "llama_server")
    short = {wire: per_wire.get(wire, 0) for wire in wires if per_wire.get(wire, 0) < 15}
    assert not short, f"wires with fewer than 15 exchanges: {short}"
    assert {
        "alias-continued",
        "hosted-tools",
        "citations",
        "snake-case-vertex",
        "openrouter-reasoning-stream",
    } <= classes
    assert any("stream" in e.data for e in EXCHANGES)
    assert any("response" in e.data for e in EXCHANGES)


def test_the_ledger_names_only_cases_that_exist() -> None:
    """A gap for an exchange or check that is no longer collected is stale: prune it."""
    cases = {
        (exchange.id, name)
        for name, (_, applies) in CHECKS.items()
        for exchange in EXCHANGES
        if applies(exchange)
    }
    assert set(GAPS) <= cases, sorted(set(GAPS) - cases)[:5]


def test_the_value_walk_can_fail() -> None:
    """The generic walk is not vacuous: a value no block holds is reported lost."""
    held = Held()
    held.add({"text": "kept"})
    missing = lost({"content": [{"type": "text", "text": "kept"}, {"x": "dropped"}]}, held, "a")
    assert [leaf.value for leaf in missing] == ["dropped"]


def test_the_sent_walk_opens_arguments_and_can_fail() -> None:
    """A value sent inside a call's JSON arguments counts as sent; one left out is reported."""
    arguments = {"plan": 'Plan:\n1) read the "file"', "steps": 2}
    answer = [{"type": "function_call", "name": "update_plan", "arguments": json.dumps(arguments)}]
    wanted = [leaf for leaf in leaves(answer, "answer") if isinstance(leaf.value, str)]
    assert [leaf.key for leaf in wanted] == ["name", "plan"]
    assert unsent(wanted, answer) == []
    without = [{**answer[0], "arguments": json.dumps({"steps": 2})}]
    assert [leaf.value for leaf in unsent(wanted, without)] == [arguments["plan"]]
