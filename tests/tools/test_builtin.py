"""Tools: schemas from type hints and docstrings, argument checking, the built-ins' confinement."""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Annotated, Any, Literal, Optional

import pytest
from hypothesis import given
from hypothesis import strategies as st

from carryall.blocks import Image
from carryall.errors import ToolError
from carryall.tools import Tool, ToolOutput, check_arguments, tool, tool_output
from carryall.tools.builtin import (
    BUILTIN_TOOL_NAMES,
    MAX_READ_BYTES,
    builtin_tools,
    resolve_in_workspace,
)

PNG_1X1 = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)

# -- schema from hints ------------------------------------------------------------


def _search(
    query: str,
    limit: int = 10,
    mode: Literal["fast", "exact"] = "fast",
    tags: list[str] | None = None,
    weight: Optional[float] = None,  # noqa: UP045 - the old spelling must work too
) -> str:
    """Search the notes for a phrase.

    Returns the best matches first.

    Args:
        query: The phrase to look for,
            matched case-insensitively.
        limit (int): How many matches at most.
        mode: How to match.

    Returns:
        The matches, one per line.
    """
    return query


def test_schema_types_come_from_the_hints() -> None:
    schema = Tool.from_function(_search).input_schema
    props = schema["properties"]
    assert props["query"]["type"] == "string"
    assert props["limit"]["type"] == "integer"
    assert props["mode"] == {
        "type": "string",
        "enum": ["fast", "exact"],
        "description": "How to match.",
        "default": "fast",
    }
    assert props["tags"]["anyOf"][0] == {"type": "array", "items": {"type": "string"}}
    assert props["weight"]["type"] == ["number", "null"]
    assert schema["additionalProperties"] is False


def test_parameters_with_defaults_are_not_required() -> None:
    assert Tool.from_function(_search).input_schema["required"] == ["query"]


def test_description_is_the_first_docstring_paragraph() -> None:
    assert Tool.from_function(_search).description == "Search the notes for a phrase."


def test_google_args_become_property_descriptions_with_continuations() -> None:
    props = Tool.from_function(_search).input_schema["properties"]
    assert props["query"]["description"] == "The phrase to look for, matched case-insensitively."
    assert props["limit"]["description"] == "How many matches at most."
    assert "description" not in props["tags"]


def test_sphinx_params_become_property_descriptions() -> None:
    def count(word: str, text: str = "") -> int:
        """Count a word.

        :param word: the word
            to count.
        :param str text: where to count it.
        :returns: how many.
        """
        return text.count(word)

    props = Tool.from_function(count).input_schema["properties"]
    assert props["word"]["description"] == "the word to count."
    assert props["text"]["description"] == "where to count it."


def test_nested_containers_and_annotated_hints() -> None:
    def f(
        grid: list[list[int]],
        scores: dict[str, float],
        pair: tuple[str, int],
        note: Annotated[str, "meta"],
        anything: Any,
    ) -> str:
        """F."""
        return ""

    props = Tool.from_function(f).input_schema["properties"]
    assert props["grid"] == {
        "type": "array",
        "items": {"type": "array", "items": {"type": "integer"}},
    }
    assert props["scores"] == {"type": "object", "additionalProperties": {"type": "number"}}
    assert props["pair"]["prefixItems"] == [{"type": "string"}, {"type": "integer"}]
    assert props["note"] == {"type": "string"}
    assert props["anything"] == {}


def test_parameter_without_a_hint_is_refused_by_name() -> None:
    def f(path):  # type: ignore[no-untyped-def]
        """F."""

    with pytest.raises(ToolError, match="parameter 'path' has no type hint"):
        Tool.from_function(f)


def test_var_args_are_refused() -> None:
    def f(*paths: str) -> str:
        """F."""
        return ""

    with pytest.raises(ToolError, match=r"\*args/\*\*kwargs"):
        Tool.from_function(f)


def test_a_type_without_a_json_schema_is_refused() -> None:
    def f(when: complex) -> str:
        """F."""
        return ""

    with pytest.raises(ToolError, match=r"parameter 'when'.*no JSON schema"):
        Tool.from_function(f)


def test_invalid_tool_name_is_refused() -> None:
    with pytest.raises(ToolError, match="tool name"):
        Tool.from_function(_search, name="search notes")


def test_decorator_forms() -> None:
    @tool
    def ping() -> str:
        """Answer pong."""
        return "pong"

    @tool(name="echo_it", description="Echo.")
    def echo(text: str) -> str:
        return text

    assert ping.name == "ping" and ping.spec.description == "Answer pong."
    assert echo.name == "echo_it" and echo.description == "Echo."
    assert echo.invoke({"text": "hi"}) == ToolOutput("hi")


# -- argument checking --------------------------------------------------------------


def test_every_problem_is_reported_by_argument_name() -> None:
    problems = Tool.from_function(_search).check({"limit": "ten", "mode": "slow", "colour": "red"})
    assert problems == [
        "query: required argument is missing",
        "limit: expected integer, got string",
        'mode: "slow" is not one of "fast", "exact"',
        "colour: unknown argument (known arguments: query, limit, mode, tags, weight)",
    ]


def test_arguments_that_are_not_an_object_are_reported_with_what_came() -> None:
    problems = Tool.from_function(_search).check('{"query": "x"')
    assert problems == ['arguments must be a JSON object, got string: {"query": "x"']


def test_booleans_are_not_integers_and_integers_are_numbers() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}, "x": {"type": "number"}}}
    assert check_arguments(schema, {"n": True}) == ["n: expected integer, got boolean"]
    assert check_arguments(schema, {"n": 3.0, "x": 2}) == []
    assert check_arguments(schema, {"n": 3.5}) == ["n: expected integer, got number"]


def test_nested_items_are_checked_with_their_path() -> None:
    schema = {
        "type": "object",
        "properties": {
            "grid": {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}}
        },
    }
    assert check_arguments(schema, {"grid": [[1], [2, "x"]]}) == [
        "grid[1][1]: expected integer, got string"
    ]


def test_invoke_with_bad_arguments_raises_tool_error_listing_problems() -> None:
    with pytest.raises(ToolError, match="invalid arguments for _search: query: required"):
        Tool.from_function(_search).invoke({})


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@given(json_values)
def test_hostile_arguments_give_problems_never_a_crash(value: Any) -> None:
    problems = Tool.from_function(_search).check(value)
    assert isinstance(problems, list)
    if not isinstance(value, dict) or "query" not in value:
        assert problems


# -- outputs ------------------------------------------------------------------------


def test_tool_output_shapes() -> None:
    image = Image.from_bytes("image/png", PNG_1X1, "dot.png")
    assert tool_output("text") == ToolOutput("text")
    assert tool_output(("seen", [image])) == ToolOutput("seen", (image,))
    assert tool_output(None) == ToolOutput("")
    with pytest.raises(ToolError, match="returned int"):
        tool_output(42)
    with pytest.raises(ToolError, match="include bytes"):
        tool_output(("seen", [b"raw"]))


def test_async_tools_are_awaited() -> None:
    async def later(x: int) -> str:
        """Later."""
        return str(x * 2)

    assert Tool.from_function(later).invoke({"x": 21}) == ToolOutput("42")


# -- built-ins ----------------------------------------------------------------------


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "sub").mkdir(parents=True)
    (root / "notes.txt").write_text("first line\nsecond line\n")
    (root / "sub" / "dot.png").write_bytes(PNG_1X1)
    (root / "fake.png").write_bytes(b"not a png at all")
    (tmp_path / "secret.txt").write_text("outside")
    return root


def _tools(root: Path, **kw: Any) -> dict[str, Tool]:
    return {t.name: t for t in builtin_tools(root, **kw)}


def test_default_builtins_leave_out_write_file(workspace: Path) -> None:
    assert list(_tools(workspace)) == ["read_file", "list_dir", "view_image"]
    assert list(_tools(workspace, allow_write=True)) == list(BUILTIN_TOOL_NAMES)


def test_write_file_must_be_enabled(workspace: Path) -> None:
    with pytest.raises(ToolError, match="enabled explicitly"):
        builtin_tools(workspace, names=["write_file"])


def test_unknown_builtin_name_is_refused(workspace: Path) -> None:
    with pytest.raises(ToolError, match=r"unknown built-in tool.*shell"):
        builtin_tools(workspace, names=["shell"])


def test_read_file_reads_text(workspace: Path) -> None:
    out = _tools(workspace)["read_file"].invoke({"path": "notes.txt"})
    assert out == ToolOutput("first line\nsecond line\n")


def test_read_file_caps_large_files_and_says_so(workspace: Path) -> None:
    (workspace / "big.txt").write_text("x" * (MAX_READ_BYTES + 10))
    text = _tools(workspace)["read_file"].invoke({"path": "big.txt"}).text
    assert text.endswith(
        f"[truncated: the file is {MAX_READ_BYTES + 10} bytes; showing the first {MAX_READ_BYTES}]"
    )


@pytest.mark.parametrize("path", ["../secret.txt", "/etc/passwd", "sub/../../secret.txt", "~/x"])
def test_paths_outside_the_workspace_are_refused(workspace: Path, path: str) -> None:
    with pytest.raises(ToolError, match="outside the workspace"):
        _tools(workspace)["read_file"].invoke({"path": path})


def test_symlink_out_of_the_workspace_is_refused(workspace: Path) -> None:
    os.symlink(workspace.parent / "secret.txt", workspace / "link.txt")
    with pytest.raises(ToolError, match="outside the workspace"):
        _tools(workspace)["read_file"].invoke({"path": "link.txt"})


def test_resolve_accepts_the_root_itself(workspace: Path) -> None:
    assert resolve_in_workspace(workspace, ".") == workspace.resolve()


def test_list_dir_marks_directories_and_sizes(workspace: Path) -> None:
    text = _tools(workspace)["list_dir"].invoke({}).text
    assert text.splitlines() == ["fake.png (16 bytes)", "notes.txt (23 bytes)", "sub/"]


def test_view_image_returns_the_image_after_a_short_text(workspace: Path) -> None:
    out = _tools(workspace)["view_image"].invoke({"path": "sub/dot.png"})
    assert out.text == "Showing dot.png"
    assert out.images == (Image.from_bytes("image/png", PNG_1X1, "dot.png"),)


def test_view_image_refuses_a_file_whose_bytes_disagree_with_its_name(workspace: Path) -> None:
    with pytest.raises(ToolError, match=r"cannot view 'fake\.png'"):
        _tools(workspace)["view_image"].invoke({"path": "fake.png"})


def test_view_image_refuses_outside_paths(workspace: Path) -> None:
    (workspace.parent / "out.png").write_bytes(PNG_1X1)
    with pytest.raises(ToolError, match="outside the workspace"):
        _tools(workspace)["view_image"].invoke({"path": "../out.png"})


def test_write_file_creates_parents_inside_only(workspace: Path) -> None:
    write = _tools(workspace, allow_write=True)["write_file"]
    assert write.invoke({"path": "new/a.txt", "content": "hé"}).text == "wrote 3 bytes to new/a.txt"
    assert (workspace / "new" / "a.txt").read_text() == "hé"
    with pytest.raises(ToolError, match="outside the workspace"):
        write.invoke({"path": "../escape.txt", "content": "x"})
    assert not (workspace.parent / "escape.txt").exists()


# -- path choices -------------------------------------------------------------------


def test_reading_tools_offer_the_workspace_paths_as_choices(tmp_path: Path) -> None:
    from carryall.tools.builtin import builtin_tools

    (tmp_path / "notes.txt").write_text("hi")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "shot.png").write_bytes(b"\x89PNG")
    specs = {t.name: t.spec for t in builtin_tools(tmp_path)}
    assert specs["read_file"].choices == {"path": ("docs/shot.png", "notes.txt")}
    assert specs["list_dir"].choices == {"path": (".", "docs")}
    assert specs["view_image"].choices == {"path": ("docs/shot.png",)}
    # Asked afresh each time: a file made since is offered next request.
    (tmp_path / "new.txt").write_text("x")
    tools = {t.name: t for t in builtin_tools(tmp_path)}
    assert "new.txt" in tools["read_file"].spec.choices["path"]


def test_a_big_workspace_offers_files_no_choices_but_list_dir_its_top_folders(
    tmp_path: Path,
) -> None:
    # The README's first command runs in the project's own clone: hundreds of
    # paths, so no file choices; with none for list_dir either, SmolLM2 made
    # up `*.png` three times. `.` and the top-level folders are few.
    from carryall.tools.builtin import MAX_PATH_CHOICES, builtin_tools

    for i in range(MAX_PATH_CHOICES + 1):
        (tmp_path / f"f{i}.txt").write_text("x")
    (tmp_path / "src" / "deep").mkdir(parents=True)
    (tmp_path / "tests").mkdir()
    tools = {t.name: t for t in builtin_tools(tmp_path)}
    assert tools["read_file"].spec.choices == {} and tools["view_image"].spec.choices == {}
    assert tools["list_dir"].spec.choices == {"path": (".", "src", "tests")}


def test_a_workspace_with_too_many_top_folders_offers_no_choices(tmp_path: Path) -> None:
    from carryall.tools.builtin import MAX_PATH_CHOICES, builtin_tools

    for i in range(MAX_PATH_CHOICES):
        (tmp_path / f"d{i}").mkdir()
    assert all(t.spec.choices == {} for t in builtin_tools(tmp_path))
