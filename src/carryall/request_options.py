"""Request options as a person gives them: `-o KEY=VALUE` and the config file's options table.

Both read into one table, the JSON object a session keeps (`SessionMeta.options`)
and a config file's `[backends.NAME.options]` holds:

```toml
[backends.openai.options]
temperature = 0.2
stop = ["END"]

[backends.openai.options.extra.openai]
user = "abc"
```

Its keys are the fields of `ModelOptions` (`temperature`, `top_p`, `top_k`,
`seed`, `stop`, `presence_penalty`, `frequency_penalty`,
`parallel_tool_calls`, `service_tier`, `store`, `extra`) and the reasoning
fields of a `Request` (`effort`, `thinking`, `thinking_budget`). On the
command line, `-o extra.WIRE.KEY=VALUE` fills `extra`, and a value is read
as JSON where it parses (`0.2`, `true`, `["END"]`) and as text otherwise
(`flex`); a lone text for `stop` is a list of one. An unknown key is an
error naming it and every known one, so a typo never goes unsent silently.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Final

import msgspec

from carryall.errors import CarryallError
from carryall.providers import Effort, ModelOptions
from carryall.providers.options import OPTION_NAMES, WIRES

__all__ = [
    "KNOWN_KEYS",
    "RequestOptions",
    "as_pairs",
    "layered",
    "parse_pairs",
    "read_table",
]

REASONING: Final = ("effort", "thinking", "thinking_budget")
"""The `Request` fields about reasoning that the options table also takes."""

KNOWN_KEYS: Final = (
    *(name for name in OPTION_NAMES if name != "extra"),
    *REASONING,
    "extra.WIRE.KEY",
)
"""Every key `-o` takes, as its error lists them."""


class RequestOptions(msgspec.Struct, frozen=True, omit_defaults=True, forbid_unknown_fields=True):
    """A checked options table: the `ModelOptions` and the reasoning a request is sent with."""

    options: ModelOptions = ModelOptions()
    effort: Effort | None = None
    thinking: bool | None = None
    thinking_budget: int | None = None


class _Table(ModelOptions, frozen=True, forbid_unknown_fields=True):
    # The table's own shape: ModelOptions' fields and the reasoning, side by side.
    effort: Effort | None = None
    thinking: bool | None = None
    thinking_budget: int | None = None


def parse_pairs(pairs: Iterable[str]) -> dict[str, Any]:
    """The table `-o KEY=VALUE` pairs give, later pairs over earlier; a `CarryallError` if bad."""
    table: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise CarryallError(f"-o {pair!r}: expected KEY=VALUE (for example temperature=0.2)")
        value = _value(text)
        if key.startswith("extra."):
            parts = key.split(".")
            if len(parts) < 3 or not all(parts):
                raise CarryallError(
                    f"-o {key}: expected extra.WIRE.KEY (for example extra.openai.user)"
                )
            _check_wire(parts[1], f"-o {key}")
            node = table.setdefault("extra", {})
            for part in parts[1:-1]:
                node = node.setdefault(part, {})
                if not isinstance(node, dict):
                    raise CarryallError(f"-o {key}: {part!r} is already a value, not an object")
            node[parts[-1]] = value
            continue
        if key not in _Table.__struct_fields__ or key == "extra":
            raise CarryallError(f"-o {key}: no such option; known options: {', '.join(KNOWN_KEYS)}")
        if key == "stop" and isinstance(value, str):
            value = [value]
        table[key] = value
    read_table(table, "-o")  # refuse a bad value now, naming the option
    return table


def read_table(table: Mapping[str, Any], where: str) -> RequestOptions:
    """The checked `RequestOptions` of a table (`where` names it in an error)."""
    try:
        checked = msgspec.convert(table, _Table)
    except msgspec.ValidationError as exc:
        message = str(exc)
        if "unknown field" in message.lower():
            message += f"; known options: {', '.join(KNOWN_KEYS)}"
        raise CarryallError(f"{where}: {message}") from None
    for wire in checked.extra:
        _check_wire(wire, f"{where}: extra.{wire}")
    fields = msgspec.structs.asdict(checked)
    reasoning = {name: fields.pop(name) for name in REASONING}
    return RequestOptions(options=ModelOptions(**fields), **reasoning)


def layered(*tables: Mapping[str, Any] | None) -> dict[str, Any]:
    """The tables merged, each over the ones before it (`extra` merged wire by wire, key by key)."""
    out: dict[str, Any] = {}
    for table in tables:
        for key, value in (table or {}).items():
            if key == "extra" and isinstance(value, Mapping):
                extra = dict(out.get("extra") or {})
                for wire, settings in value.items():
                    extra[wire] = {**extra.get(wire, {}), **settings}
                out["extra"] = extra
            else:
                out[key] = value
    return out


def as_pairs(table: Mapping[str, Any]) -> list[str]:
    """The table as the `-o` pairs that give it back (`temperature=0.2`, `extra.openai.user=x`)."""
    pairs: list[str] = []
    for key, value in table.items():
        if key == "extra" and isinstance(value, Mapping):
            for wire, settings in value.items():
                if not isinstance(settings, Mapping):
                    # Not a table `-o` makes (a damaged file's): shown as it is held.
                    pairs.append(f"extra.{wire}={_as_text(settings)}")
                    continue
                for name, setting in settings.items():
                    pairs.append(f"extra.{wire}.{name}={_as_text(setting)}")
        else:
            pairs.append(f"{key}={_as_text(value)}")
    return pairs


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _check_wire(wire: str, where: str) -> None:
    if wire not in WIRES:
        raise CarryallError(f"{where}: {wire!r} is not a wire; expected one of {', '.join(WIRES)}")
