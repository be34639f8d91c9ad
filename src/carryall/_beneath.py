"""Opening a checked path without following a link: the one walk the loader and the tools share.

A path is resolved and checked against its roots first; between that check
and the open, anyone who can write inside a root can swap a directory or the
file for a symlink. So the resolved path is opened one component at a time
from `/` with `O_NOFOLLOW`: a symlink met anywhere fails with `ELOOP` (or
`ENOTDIR`) instead of being followed, and the file opened is the one the
check approved. Files are opened with `O_NONBLOCK`, so a FIFO swapped in
never blocks the caller, and every caller `fstat`s what it opened before it
reads or writes.

Files a person names (the config file, a history to import) are opened the
same non-blocking way by `read_regular`, which refuses anything that is not
a regular file after opening: a FIFO there would hang the command.

Lengths are checked before anything else: a path longer than `PATH_MAX` or
with a component longer than `NAME_MAX` cannot name a file, and refusing it
up front keeps the cost of a hostile path linear in its length.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from typing import Final

__all__ = [
    "CAN_WALK",
    "LIST_FLAGS",
    "NAME_MAX",
    "PATH_MAX",
    "READ_FLAGS",
    "WRITE_FLAGS",
    "file_kind",
    "length_problem",
    "open_beneath",
    "os_reason",
    "read_regular",
    "read_upto",
    "shown_name",
    "walk_to_parent",
]

PATH_MAX: Final = 4096
"""The longest path Linux opens, in bytes (with its terminating NUL, as the kernel counts)."""

NAME_MAX: Final = 255
"""The longest name of one path component, in bytes."""

_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_NOCTTY = getattr(os, "O_NOCTTY", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
# O_PATH walks directories that may be traversed but not listed (mode --x).
_O_PATH = getattr(os, "O_PATH", os.O_RDONLY)
_DIR_FLAGS = _O_PATH | _O_DIRECTORY | _O_NOFOLLOW | _O_CLOEXEC

READ_FLAGS: Final = os.O_RDONLY | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC | _O_NOCTTY
"""Open a file to read: no link followed, a FIFO never waited on, no terminal adopted."""

WRITE_FLAGS: Final = os.O_WRONLY | os.O_CREAT | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC | _O_NOCTTY
"""Open a file to write, creating it; no `O_TRUNC`, so nothing is cut before `fstat` approves."""

LIST_FLAGS: Final = os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW | _O_CLOEXEC
"""Open a directory to list it."""

CAN_WALK: Final = (
    bool(_O_NOFOLLOW) and os.open in os.supports_dir_fd and os.stat in os.supports_dir_fd
)
"""Whether this platform has `openat` and `O_NOFOLLOW` (not Windows)."""


def length_problem(path: str) -> str | None:
    """Why `path` cannot name a file for its length (`PATH_MAX`, `NAME_MAX`), or None."""
    # Measured in characters first: a string this long is refused without
    # encoding a megabyte of it.
    if len(path) >= PATH_MAX or len(os.fsencode(path)) >= PATH_MAX:
        return f"the path is longer than the {PATH_MAX - 1}-byte limit"
    for name in path.split(os.sep):
        if len(name) > NAME_MAX or len(os.fsencode(name)) > NAME_MAX:
            return f"a path component is longer than the {NAME_MAX}-byte limit"
    return None


def walk_to_parent(real: str, *, create: bool = False) -> tuple[int, str]:
    """The open directory holding `real`'s last component, and that name; the caller closes the fd.

    `real` must be absolute and plain (no `.`, `..` or empty component: a
    resolved path). Every directory on the way is opened with `O_NOFOLLOW`;
    with `create`, a missing one is made (and then opened the same way).
    `OSError` is the caller's to word (`os_reason`); `ValueError` means
    `real` was not plain.
    """
    names = real.split(os.sep)
    if names[0] != "" or len(names) < 2 or any(n in ("", ".", "..") for n in names[1:]):
        raise ValueError(f"{real!r} is not a plain absolute path")
    dir_fd = os.open(os.sep, _DIR_FLAGS)
    try:
        for name in names[1:-1]:
            try:
                next_fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, dir_fd=dir_fd)
                next_fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
            os.close(dir_fd)
            dir_fd = next_fd
    except BaseException:
        os.close(dir_fd)
        raise
    return dir_fd, names[-1]


def open_beneath(real: str, flags: int, *, create_parents: bool = False) -> int:
    """`real` opened with `flags` by the walk, no link followed anywhere on the way.

    `/` itself is opened directly (it has no parent to walk to). The mode
    for a created file is 0o666 less the umask, as `open()` gives.
    """
    if real == os.sep:
        return os.open(os.sep, flags & ~_O_NOFOLLOW)
    dir_fd, name = walk_to_parent(real, create=create_parents)
    try:
        return os.open(name, flags, 0o666, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)


def os_reason(exc: OSError) -> str:
    """What an `OSError` from the walk means, in words a person (or a model) can act on."""
    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
        # With O_NOFOLLOW a symlink where a resolved directory stood reads as
        # one of these: the path changed after it was checked.
        return "a symlink or file appeared in the resolved path"
    if exc.errno == errno.ENOENT:
        return "no such file"
    if exc.errno == errno.ENXIO:
        # O_WRONLY | O_NONBLOCK on a FIFO nobody reads.
        return "the path is a FIFO, not a regular file"
    return exc.strerror or str(exc)


def read_upto(fd: int, count: int) -> bytes:
    """Up to `count` bytes from `fd`, fewer only at the end of the file."""
    chunks: list[bytes] = []
    remaining = count
    while remaining > 0:
        chunk = os.read(fd, remaining)
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def read_regular(path: str | os.PathLike[str]) -> bytes:
    """The whole of `path`, which must be a regular file once opened (links followed).

    Opened with `O_NONBLOCK`, so a FIFO or a device is refused by `fstat`
    instead of blocking the caller; the refusal is an `OSError` whose text
    says what the path is.
    """
    fd = os.open(path, READ_FLAGS & ~_O_NOFOLLOW)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise OSError(f"it is {file_kind(mode)}, not a regular file")
        # Back to blocking: a regular file never waits, and a plain read loop
        # must not meet EAGAIN.
        os.set_blocking(fd, True)
        chunks: list[bytes] = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def file_kind(mode: int) -> str:
    """What a file of `mode` is, as a refusal names it ("a FIFO", "a directory", ...)."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISLNK(mode):
        return "a symlink"
    return "not a regular file"


def shown_name(name: str) -> str:
    """A file name as text that can always be encoded: bytes that are not UTF-8 as `\\xNN` escapes.

    `os` hands back such bytes as lone surrogates (`surrogateescape`), which
    no JSON encoder or SDK will send; the escape keeps the name readable.
    """
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        pass
    else:
        return name
    try:
        raw = name.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a surrogate no file system gave: escape it as code
        return name.encode("utf-8", "backslashreplace").decode("utf-8")
    return raw.decode("utf-8", "backslashreplace")
