"""The tool itself: a name, a description, an input schema and the function that runs.

Built from a function, its schema and its argument check come from one
msgspec struct (`_schema`), so what the model is told and what is accepted
cannot disagree; built from a hand-written schema, the schema alone checks.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping
from typing import Any, TypeAlias, overload

import msgspec

from carryall.errors import ToolError
from carryall.providers import ToolSpec
from carryall.tools._check import argument_problems
from carryall.tools._output import ToolOutput, tool_output
from carryall.tools._schema import arguments_of, read_docstring

__all__ = ["Tool", "ToolFunction", "tool"]

ToolFunction: TypeAlias = Callable[..., Any]

_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
"""What every dialect accepts as a tool name (Anthropic's and OpenAI's shared subset)."""


class Tool:
    """A callable the model may use: name, description, input schema and the function.

    Build one with `Tool.from_function` (or the `@tool` decorator); construct
    it directly only to wrap a function whose schema you write by hand.
    """

    __slots__ = ("_arguments", "choices", "description", "function", "input_schema", "name")

    def __init__(
        self,
        name: str,
        description: str,
        input_schema: Mapping[str, Any],
        function: ToolFunction,
        choices: Callable[[], dict[str, tuple[str, ...]]] | None = None,
    ) -> None:
        if not _TOOL_NAME.match(name):
            raise ToolError(
                f"tool name {name!r} must be 1-64 letters, digits, '_' or '-' "
                "(the names every backend accepts)"
            )
        if input_schema.get("type") != "object":
            raise ToolError(f"tool {name!r}: input schema must be a JSON object schema")
        self.name = name
        self.description = description
        self.input_schema: dict[str, Any] = dict(input_schema)
        self.function = function
        # Asked afresh for every spec: the workspace a path names changes between requests.
        self.choices = choices
        self._arguments: type[msgspec.Struct] | None = None

    def __repr__(self) -> str:
        return f"Tool(name={self.name!r})"

    @classmethod
    def from_function(
        cls, function: ToolFunction, name: str | None = None, description: str | None = None
    ) -> Tool:
        """A tool from a plain function: schema from its type hints and docstring.

        `name` defaults to the function's name, `description` to the first
        paragraph of its docstring. A parameter without a type hint, or with
        a type no JSON schema can say, is a `ToolError` naming it.
        """
        tool_name = name or str(getattr(function, "__name__", ""))
        summary, param_docs = read_docstring(inspect.getdoc(function) or "")
        arguments = arguments_of(function, param_docs, tool_name=tool_name)
        made = cls(tool_name, description or summary or tool_name, arguments.schema, function)
        made._arguments = arguments.struct
        return made

    @property
    def spec(self) -> ToolSpec:
        """How a model is told of this tool, with its argument choices as they are now."""
        choices = self.choices() if self.choices is not None else {}
        return ToolSpec(self.name, self.description, self.input_schema, choices)

    def check(self, arguments: Any) -> list[str]:
        """The problems with `arguments` against this tool's schema; empty when they fit."""
        return argument_problems(arguments, self.input_schema, self._arguments)

    def invoke(self, arguments: Any) -> ToolOutput:
        """Check `arguments`, call the function, and normalise what it returned.

        Invalid arguments are a `ToolError` listing every problem, so the
        model can fix them all in one retry; whatever the function raises
        propagates for the caller to turn into an error result.
        """
        problems = self.check(arguments)
        if problems:
            raise ToolError(f"invalid arguments for {self.name}: " + "; ".join(problems))
        # The decoded JSON itself: the struct checks the arguments, it does not convert them.
        result = self.function(**arguments)
        if inspect.isawaitable(result):
            # A coroutine tool runs on its own loop in the calling worker
            # thread, so async and plain tools share one concurrency model.
            import asyncio  # only a coroutine tool pays for the event loop

            result = asyncio.run(_awaited(result))
        return tool_output(result)


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


@overload
def tool(function: ToolFunction, /) -> Tool: ...
@overload
def tool(
    *, name: str | None = None, description: str | None = None
) -> Callable[[ToolFunction], Tool]: ...
def tool(
    function: ToolFunction | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
) -> Tool | Callable[[ToolFunction], Tool]:
    """Decorator form of `Tool.from_function`: `@tool` or `@tool(name="...")`."""
    if function is not None:
        return Tool.from_function(function)

    def wrap(fn: ToolFunction) -> Tool:
        return Tool.from_function(fn, name=name, description=description)

    return wrap
