"""The built-in tools: read, list and view files inside one workspace root, and write when allowed.

Every path a model names is resolved (symlinks followed) and must land
inside the workspace; anything else is refused with a message that says so,
because a model that is told why can pick another path and one that is
silently given nothing cannot. The resolved path is then opened by the walk
the attachment loader uses (`carryall._beneath`): one component at a time,
no symlink followed, files non-blocking and checked by `fstat` after the
open, so a link or a FIFO swapped in after the check is refused rather than
followed or waited on. Listing never follows a link either: a link is named
as one, with nothing about what it points to. `view_image` is the tool that makes a picture:
it hands an image file to the model, and the loop puts it after the round's
results, where every backend can carry it (or, for a model with no eyes, its
placeholder line).

In a small workspace (at most `MAX_PATH_CHOICES` entries) the reading tools
also offer the paths that exist as choices (`Tool.choices`): constrained
prompt mode turns them into an `enum`, so even the 135M default model can
only name a file that is there.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable
from pathlib import Path

from carryall._beneath import (
    LIST_FLAGS,
    READ_FLAGS,
    WRITE_FLAGS,
    file_kind,
    length_problem,
    open_beneath,
    os_reason,
    read_upto,
    shown_name,
)
from carryall._text import shorten
from carryall.attachments import DEFAULT_MAX_IMAGE_BYTES, AttachmentPolicy, load_image
from carryall.blocks import Image, image_media_type
from carryall.errors import AttachmentError, ToolError
from carryall.tools import Tool, ToolOutput

__all__ = [
    "BUILTIN_TOOL_NAMES",
    "DEFAULT_TOOL_NAMES",
    "MAX_IMAGE_BYTES",
    "MAX_LIST_ENTRIES",
    "MAX_PATH_CHOICES",
    "MAX_READ_BYTES",
    "builtin_tools",
    "resolve_in_workspace",
]

BUILTIN_TOOL_NAMES: tuple[str, ...] = ("read_file", "list_dir", "view_image", "write_file")
"""Every built-in tool, in the order they are offered."""

DEFAULT_TOOL_NAMES: tuple[str, ...] = ("read_file", "list_dir", "view_image")
"""The built-ins on by default: all but `write_file`, which must be asked for."""

MAX_READ_BYTES = 100_000
"""`read_file` returns at most this much of a file, and says when it cut."""

MAX_LIST_ENTRIES = 500
"""`list_dir` names at most this many entries, and says how many it left out."""

MAX_PATH_CHOICES = 40
"""A workspace with more entries than this offers no path choices: an enum that
long costs more prompt than it saves, and a bigger tree is not the newcomer's
first run the choices are for."""

MAX_IMAGE_BYTES = DEFAULT_MAX_IMAGE_BYTES
"""`view_image` refuses a larger file before reading it (the attachment default, §4)."""


def resolve_in_workspace(workspace: Path, path: str) -> Path:
    """`path` resolved against `workspace`, refused unless it stays inside.

    Symlinks are followed before the check, so a link pointing out of the
    workspace is refused like the path it points to.
    """
    root = workspace.resolve()
    if "\x00" in path:
        raise ToolError(f"path {path!r} contains a NUL character")
    too_long = length_problem(path)
    if too_long is not None:
        raise ToolError(f"path {shorten(path, 120)!r} is refused: {too_long}")
    candidate = Path(os.path.expanduser(path)) if path.startswith("~") else Path(path)
    try:
        target = (candidate if candidate.is_absolute() else root / candidate).resolve()
    except (OSError, RuntimeError) as exc:
        # A link removed between two steps of the resolution, or a loop.
        raise ToolError(f"path {path!r} cannot be resolved: {exc}") from None
    if target != root and not target.is_relative_to(root):
        raise ToolError(
            f"path {path!r} is outside the workspace {str(root)!r}; "
            "only files inside the workspace can be used"
        )
    return target


def builtin_tools(
    workspace: Path | str,
    *,
    allow_write: bool = False,
    names: Iterable[str] | None = None,
) -> list[Tool]:
    """The built-in tools bound to `workspace`.

    `names` picks which (default: `DEFAULT_TOOL_NAMES`, plus `write_file`
    when `allow_write`); asking for `write_file` without `allow_write`, or
    for a name that is not a built-in, is a `ToolError` naming it.
    """
    root = Path(workspace).resolve()
    if not root.is_dir():
        raise ToolError(f"workspace {str(root)!r} is not a directory")
    if names is None:
        wanted = list(DEFAULT_TOOL_NAMES) + (["write_file"] if allow_write else [])
    else:
        wanted = list(dict.fromkeys(names))
    unknown = [n for n in wanted if n not in BUILTIN_TOOL_NAMES]
    if unknown:
        raise ToolError(
            f"unknown built-in tool(s) {', '.join(unknown)}; "
            f"the built-ins are {', '.join(BUILTIN_TOOL_NAMES)}"
        )
    if "write_file" in wanted and not allow_write:
        raise ToolError("write_file changes files, so it must be enabled explicitly (allow_write)")
    makers = {
        "read_file": _read_file_tool,
        "list_dir": _list_dir_tool,
        "view_image": _view_image_tool,
        "write_file": _write_file_tool,
    }
    return [makers[name](root) for name in BUILTIN_TOOL_NAMES if name in wanted]


def _workspace_entries(root: Path) -> tuple[list[str], list[str]] | None:
    """`(files, directories)` under `root` as the model names them, or None past the cap.

    Directories include `.`; symlinks are not followed into, and one that
    points out of the workspace is left out, as the tools would refuse it.
    The walk stops as soon as the cap is passed, so a big tree costs little.
    """
    files: list[str] = []
    dirs: list[str] = ["."]
    pending = [root]
    while pending:
        folder = pending.pop()
        try:
            children = sorted(folder.iterdir(), key=lambda p: p.name)
        except OSError:
            continue
        for child in children:
            if len(files) + len(dirs) > MAX_PATH_CHOICES:
                return None
            try:
                resolved = child.resolve()
            except OSError:
                continue
            if not resolved.is_relative_to(root):
                continue
            name = child.relative_to(root).as_posix()
            if child.is_dir():
                dirs.append(name)
                if not child.is_symlink():
                    pending.append(child)
            elif child.is_file():
                files.append(name)
    if len(files) + len(dirs) > MAX_PATH_CHOICES:
        return None
    return sorted(files), sorted(dirs)


def _top_level_dirs(root: Path) -> list[str] | None:
    """The folders right under `root` (no link out of it), or None past the cap."""
    found: list[str] = []
    try:
        children = sorted(root.iterdir(), key=lambda p: p.name)
    except OSError:
        return None
    for child in children:
        try:
            inside = child.resolve().is_relative_to(root)
        except OSError:
            continue
        if inside and child.is_dir():
            found.append(child.name)
            if len(found) + 1 > MAX_PATH_CHOICES:
                return None
    return found


def _path_choices(root: Path, pick: str) -> dict[str, tuple[str, ...]]:
    """The `path` choices of one reading tool: `files`, `dirs` or `images`."""
    entries = _workspace_entries(root)
    if entries is None:
        # Too big a tree to name every path, but a listing can still start
        # from the top: `.` and the top-level folders, when few enough.
        top = _top_level_dirs(root) if pick == "dirs" else None
        return {"path": (".", *top)} if top is not None else {}
    files, dirs = entries
    if pick == "dirs":
        values = dirs
    elif pick == "images":
        values = [f for f in files if image_media_type(Path(f))]
    else:
        values = files
    return {"path": tuple(values)} if values else {}


def _workspace_name(root: Path, target: Path) -> str:
    """A path as the model should name it: relative to the workspace."""
    rel = target.relative_to(root)
    return rel.as_posix() if rel.parts else "."


def _open_file(
    path: str, target: Path, flags: int, directory: str, *, create_parents: bool = False
) -> tuple[int, int]:
    """`target` opened by the walk (no link followed) and checked a regular file: `(fd, size)`.

    Anything else is refused after the open, by `fstat`, so what is checked
    is what was opened; `directory` is what to tell a model that named one.
    """
    try:
        fd = open_beneath(os.fspath(target), flags, create_parents=create_parents)
    except IsADirectoryError:
        raise ToolError(f"{path!r} is a directory{directory}") from None
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            raise ToolError(f"no such file: {path!r}") from None
        raise ToolError(f"cannot open {path!r}: {os_reason(exc)}") from None
    except ValueError:  # a platform whose paths the walk cannot take (no openat)
        raise ToolError(f"cannot open {path!r}: the path is not a plain absolute path") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        if stat.S_ISDIR(info.st_mode):
            raise ToolError(f"{path!r} is a directory{directory}")
        raise ToolError(f"{path!r} is {file_kind(info.st_mode)}, not a regular file")
    return fd, info.st_size


def _entry_line(entry: os.DirEntry[str]) -> str:
    """One `list_dir` line; a link is named as one and never followed, in or out."""
    name = shown_name(entry.name)
    try:
        if entry.is_symlink():
            return f"{name} (symlink)"
        if entry.is_dir(follow_symlinks=False):
            return f"{name}/"
        size = entry.stat(follow_symlinks=False).st_size
    except OSError:
        return name
    return f"{name} ({size} bytes)"


def _read_file_tool(root: Path) -> Tool:
    def read_file(path: str) -> str:
        """Read a text file inside the workspace and return its contents.

        Args:
            path: The file to read, relative to the workspace root.
        """
        target = resolve_in_workspace(root, path)
        fd, size = _open_file(path, target, READ_FLAGS, "; use list_dir to see what is in it")
        try:
            data = read_upto(fd, MAX_READ_BYTES)
        finally:
            os.close(fd)
        if b"\x00" in data[:8192]:
            hint = "; use view_image to look at it" if image_media_type(target) else ""
            raise ToolError(f"{path!r} is a binary file, not text{hint}")
        text = data.decode("utf-8", errors="replace")
        if size > MAX_READ_BYTES:
            text += f"\n[truncated: the file is {size} bytes; showing the first {MAX_READ_BYTES}]"
        return text

    return _offering(Tool.from_function(read_file), root, "files")


def _list_dir_tool(root: Path) -> Tool:
    def list_dir(path: str = ".") -> str:
        """List the files and directories in a directory inside the workspace.

        Directories end with '/'; files show their size in bytes; links are
        marked '(symlink)' and not followed.

        Args:
            path: The directory to list, relative to the workspace root.
        """
        target = resolve_in_workspace(root, path)
        try:
            fd = open_beneath(os.fspath(target), LIST_FLAGS)
        except NotADirectoryError:
            raise ToolError(
                f"{path!r} is a file, not a directory; use read_file to read it"
            ) from None
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                raise ToolError(f"no such directory: {path!r}") from None
            raise ToolError(f"cannot list {path!r}: {os_reason(exc)}") from None
        except ValueError:
            raise ToolError(
                f"cannot list {path!r}: the path is not a plain absolute path"
            ) from None
        try:
            with os.scandir(fd) as listing:
                entries = sorted(listing, key=lambda e: e.name)
                lines = [_entry_line(entry) for entry in entries[:MAX_LIST_ENTRIES]]
        finally:
            os.close(fd)
        if len(entries) > MAX_LIST_ENTRIES:
            lines.append(f"[{len(entries) - MAX_LIST_ENTRIES} more entries not shown]")
        if not lines:
            return f"{_workspace_name(root, target)} is empty"
        return "\n".join(lines)

    return _offering(Tool.from_function(list_dir), root, "dirs")


def _offering(made: Tool, root: Path, pick: str) -> Tool:
    """`made`, offering the workspace's current paths of kind `pick` as its choices."""
    made.choices = lambda: _path_choices(root, pick)
    return made


def _load_image(root: Path, path: str) -> Image:
    # Checked here first so a refusal reads the same as the other tools';
    # the attachment loader then does the real checks (regular file, size
    # cap before reading, extension agreeing with the magic bytes).
    resolve_in_workspace(root, path)
    policy = AttachmentPolicy(roots=[root], max_image_bytes=MAX_IMAGE_BYTES)
    try:
        return load_image(os.fspath(root / Path(path).expanduser()), policy)
    except AttachmentError as exc:
        raise ToolError(f"cannot view {path!r}: {exc.reason}") from None


def _view_image_tool(root: Path) -> Tool:
    def view_image(path: str) -> ToolOutput:
        """Look at an image file (PNG, JPEG, GIF or WebP) inside the workspace.

        The image is shown to you right after this tool's result.

        Args:
            path: The image file to view, relative to the workspace root.
        """
        image = _load_image(root, path)
        return ToolOutput(f"Showing {image.source}", (image,))

    return _offering(Tool.from_function(view_image), root, "images")


def _write_file_tool(root: Path) -> Tool:
    def write_file(path: str, content: str) -> str:
        """Write text to a file inside the workspace, creating or replacing it.

        Missing parent directories are created.

        Args:
            path: The file to write, relative to the workspace root.
            content: The complete new contents of the file.
        """
        target = resolve_in_workspace(root, path)
        if target == root:
            raise ToolError(f"{path!r} is a directory; give a file path")
        try:
            data = content.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ToolError(
                f"content holds a lone surrogate at offset {exc.start}; it cannot be UTF-8"
            ) from None
        fd, _ = _open_file(path, target, WRITE_FLAGS, "; give a file path", create_parents=True)
        try:
            # Cut only now that the open file is known to be a regular file.
            os.ftruncate(fd, 0)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        return f"wrote {len(data)} bytes to {_workspace_name(root, target)}"

    return Tool.from_function(write_file)
