"""What a module keeps at its top level but builds the first time it is used, in one way for all.

A command that reads an empty store should pay for neither the decoding
machinery nor the log setup it never runs, yet the modules it imports keep
such things at their top level, where every function finds them. Four
shapes of the same idea:

- `lazy_names`: a package that re-exports a heavy module's names (the agent
  loop, the installer) would otherwise load that module with itself; it gets
  a module `__getattr__` (PEP 562) that imports the name's home the first
  time it is asked for and keeps it as an ordinary attribute from then on
  (so `monkeypatch` and `mock.patch` see a plain attribute).
- `lazy_decoder`: a typed msgspec decoder reads every type it decodes into
  when it is built; built on the first `decode`, a process that decodes
  nothing never does that work.
- `lazy_logger`: a logger that imports `logging` when it first logs, for
  modules that log only on a failure path.
- `lazy_module`: a module (`hashlib`, whose import loads OpenSSL) imported
  when one of its names is first read.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

if TYPE_CHECKING:
    import logging

__all__ = ["LazyDecoder", "lazy_decoder", "lazy_logger", "lazy_module", "lazy_names"]

T = TypeVar("T")


def lazy_names(
    package: str, homes: Mapping[str, str], namespace: dict[str, Any]
) -> Callable[[str], Any]:
    """A module `__getattr__` for `package`: each name of `homes` loaded from its module."""

    def load(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        namespace[name] = value
        return value

    return load


class LazyDecoder(Generic[T]):
    """A `msgspec.json.Decoder` of `kind`, built on the first `decode`.

    After that first call `decode` is the real decoder's own method (an
    attribute of this object), so a reader decoding line after line pays
    nothing for the laziness.
    """

    __slots__ = ("decode", "kind")

    def __init__(self, kind: Any) -> None:
        self.kind = kind
        """The type decoded into, as `msgspec.json.Decoder` takes it."""
        self.decode: Callable[[bytes | bytearray | memoryview | str], T] = self._first_decode
        """Decode one JSON document into `kind` (`msgspec.json.Decoder.decode`)."""

    def _first_decode(self, data: bytes | bytearray | memoryview | str) -> T:
        import msgspec

        decoder: msgspec.json.Decoder[T] = msgspec.json.Decoder(self.kind)
        self.decode = decoder.decode
        return decoder.decode(data)


def lazy_decoder(kind: type[T]) -> LazyDecoder[T]:
    """A decoder of `kind` that is built when it first decodes (see `LazyDecoder`)."""
    return LazyDecoder(kind)


class _LazyLogger:
    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        # Looked up on every call, not kept: `logging` configured after this
        # module loaded (a test's caplog, an application's handlers) is what
        # a record meets. The method is the logger's own, so a record names
        # the caller's line, not this one.
        import logging

        return getattr(logging.getLogger(self._name), attr)


def lazy_logger(name: str) -> logging.Logger:
    """`logging.getLogger(name)`, with `logging` imported when the first record is made.

    `logging` (with `string` and its locks) costs a reader that never warns
    more than anything else it loads; a module that warns only when
    something fails keeps this at its top level instead.
    """
    return cast("logging.Logger", _LazyLogger(name))


def lazy_module(name: str) -> ModuleType:
    """The module `name`, imported when the first of its names is read.

    For a module whose import costs a reader that never calls it: `hashlib`
    loads OpenSSL's library. The importing module writes
    `if TYPE_CHECKING: import hashlib` / `else: hashlib = lazy_module("hashlib")`,
    so its code and its types read as the plain import's. On that first read
    the stand-in takes the module's names and drops its `__getattr__`, so it
    is then an ordinary module to the interpreter (whose attribute cache skips
    any module with a `__getattr__`): a hot loop reading `hashlib.sha256`
    pays nothing for the laziness. It holds the names as they were at import,
    which suits a module that never rebinds its own.
    """
    stand_in = ModuleType(name)

    def first_read(attr: str) -> Any:
        module = importlib.import_module(name)
        names, namespace = vars(module), vars(stand_in)
        # The names go in before the hook goes out, so a thread reading at the
        # same moment finds one or the other.
        namespace.update(names)
        if "__getattr__" not in names:
            namespace.pop("__getattr__", None)
        return getattr(module, attr)

    vars(stand_in)["__getattr__"] = first_read
    return stand_in
