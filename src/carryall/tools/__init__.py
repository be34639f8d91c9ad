"""Tools: plain Python functions a model may call, described by their own type hints.

A tool is a function. Its JSON schema comes from its signature (the type
hints say the types, a default makes a parameter optional) and its docstring
(the first paragraph describes the tool, an `Args:` section or `:param x:`
lines describe the parameters), so the description a model reads and the
code that runs can never drift apart. A tool returns text, or text and images:
the images ride after the round's results in the user message (§1), never
inside a result.

This module is the public surface; the work lives in private modules:
`_tool` (the `Tool` and `@tool`), `_output` (what a tool gives back),
`_schema` (hints and docstring to a msgspec struct and its JSON schema) and
`_check` (every problem with a model's arguments).
"""

from __future__ import annotations

from carryall.tools._check import check_arguments
from carryall.tools._output import ToolOutput, tool_output
from carryall.tools._schema import schema_for_function
from carryall.tools._tool import Tool, ToolFunction, tool

__all__ = [
    "Tool",
    "ToolFunction",
    "ToolOutput",
    "check_arguments",
    "schema_for_function",
    "tool",
    "tool_output",
]
