"""Request options (`ModelOptions`) on the wire: what every codec asks of the one answer here.

Each codec writes the options its wire has under the names that wire uses,
in one small hook of its own where its body is built; what is common to all
of them is answered here once:

- **Left off, named.** An option a wire has no field for is not sent and
  becomes a `Downgrade` of kind `option` whose reason names the option and
  the wire (`left_off`), so `-o seed=7` on a wire without seeds is reported
  rather than silently ignored.
- **Extra, passed through.** `ModelOptions.extra[wire]` is merged into that
  wire's body as given (`merge_extra`): objects are merged key by key, so a
  setting can go inside an object carryall also writes to, but a value
  carryall set is never overwritten (a `ProviderError` names the key). The
  extra of every other wire is named as left off.
- **Request-wide.** An option is about the request, not one of its
  messages: its downgrade's index is `REQUEST` (-1), which readers show as
  "request".

The names of the wires are those `ModelOptions.extra` is keyed by (`WIRES`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, MutableMapping
from typing import Any, Final

from carryall.errors import ProviderError
from carryall.providers._types import Downgrade, ModelOptions, Request

__all__ = [
    "NO_OPTIONS",
    "OPTION_NAMES",
    "PROMPT_NOT_STRICT",
    "PROMPT_NO_PARALLEL",
    "REQUEST",
    "WIRES",
    "left_off",
    "merge_extra",
    "openai_strict_and_budget",
    "tier_left_off",
]

REQUEST: Final = -1
"""The index a request-wide downgrade (an option, a setting) carries: no one message."""

WIRES: Final = ("anthropic", "openai", "llama-server", "responses", "gemini", "bedrock")
"""The wires `ModelOptions.extra` is keyed by: one per codec, and the Chat Completions
codec's two dialects apart (prompt mode is the dialect it writes)."""

OPTION_NAMES: Final = tuple(ModelOptions.__struct_fields__)
"""Every option's name, as `ModelOptions` spells it (and `-o` and the config file take it)."""

NO_OPTIONS: Final = ModelOptions()
"""Options left at their defaults: nothing is sent and nothing is reported."""

PROMPT_NOT_STRICT: Final = "prompt mode without a schema: nothing holds a call to its tool's"
"""Why `strict` is left off in prompt mode (a constrained one holds every call by its grammar)."""

PROMPT_NO_PARALLEL: Final = "prompt mode has no native tool calls"
"""Why `parallel_tool_calls` is left off in prompt mode."""


def left_off(name: str, wire: str, why: str = "") -> Downgrade:
    """The downgrade for option `name` that `wire` has no field for (`why` says more)."""
    reason = f"{name}: the {wire} wire takes no {name}{f' ({why})' if why else ''}; left off"
    return Downgrade(REQUEST, "option", reason)


def openai_strict_and_budget(
    request: Request, body: dict[str, Any], wire: str, *, llama: bool, prompt: str, nested: bool
) -> list[Downgrade]:
    """Write strict tools and the thinking budget as both OpenAI wires do; name what is left off.

    A strict tool's definition gets `strict: true` (inside its `function`
    object when `nested`, as Chat Completions has it). `prompt` is prompt
    mode (`"constrained"` when a JSON schema holds the answer): there are
    no native tools then, so `strict` is left off unless the schema holds
    every call to its tool's. llama-server (`llama`) reads a thinking budget
    as `thinking_budget_tokens`; OpenAI has none.
    """
    lost: list[Downgrade] = []
    if request.tools and any(spec.strict for spec in request.tools):
        if not prompt:
            for spec, tool in zip(request.tools, body["tools"], strict=True):
                if spec.strict and nested:
                    tool["function"] = {**tool["function"], "strict": True}
                elif spec.strict:
                    tool["strict"] = True
        elif prompt != "constrained":
            lost.append(left_off("strict", wire, PROMPT_NOT_STRICT))
    if request.thinking_budget is not None and request.thinking:
        if llama:
            body["thinking_budget_tokens"] = request.thinking_budget
        else:
            lost.append(left_off("thinking_budget", wire))
    return lost


def tier_left_off(tier: str, wire: str, tiers: Iterable[str]) -> Downgrade:
    """The downgrade for a `service_tier` value `wire` does not name."""
    named = ", ".join(tiers)
    reason = f"service_tier: the {wire} wire names no tier {tier!r} (only {named}); left off"
    return Downgrade(REQUEST, "option", reason)


def merge_extra(
    body: MutableMapping[str, Any],
    request: Request,
    wire: str,
    reserved: Iterable[str] = (),
) -> list[Downgrade]:
    """Merge `request.options.extra[wire]` into `body`; name every other wire's extra as left off.

    Objects merge key by key; any other value goes only where `body` holds
    nothing yet. A key of `reserved` (what the transport adds when it sends,
    such as `stream`) is refused as well, since it would be overwritten.
    """
    extra = request.options.extra
    if not extra:
        return []
    for name, settings in extra.items():
        if name not in WIRES:
            raise ProviderError(
                f"options.extra: {name!r} is not a wire; expected one of {', '.join(WIRES)}"
            )
        if not isinstance(settings, Mapping):
            raise ProviderError(
                f"options.extra.{name}: expected an object of body fields, "
                f"got {type(settings).__name__}"
            )
    lost = [
        Downgrade(
            REQUEST,
            "option",
            f"extra.{name}: settings for the {name} wire ({', '.join(sorted(settings))}); "
            f"left off this {wire} request",
        )
        for name, settings in extra.items()
        if name != wire and settings
    ]
    own = extra.get(wire)
    if own:
        taken = frozenset(reserved)
        for key in own:
            if key in taken:
                raise ProviderError(
                    f"options.extra.{wire}.{key}: carryall sets {key!r} itself when it sends "
                    "the request; it cannot be given as an extra"
                )
        _merge(body, own, f"options.extra.{wire}")
    return lost


def _merge(body: MutableMapping[str, Any], extra: Mapping[str, Any], where: str) -> None:
    for key, value in extra.items():
        if key not in body:
            body[key] = value
            continue
        held = body[key]
        if isinstance(held, Mapping) and isinstance(value, Mapping):
            # A copy: the body may share this object with the request (a tool schema).
            merged = dict(held)
            _merge(merged, value, f"{where}.{key}")
            body[key] = merged
            continue
        raise ProviderError(
            f"{where}.{key}: carryall already sets {key!r} on this request "
            f"(to {_shown(held)}); an extra may add fields, never replace one. "
            "Set it through the option or request field that writes it"
        )


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."
