"""The user's config file: which backend and model to use when the command line names none.

The file is `$CARRYALL_HOME/config.toml` when `CARRYALL_HOME` is set, else
`config.toml` in the platform's user config folder. Every key is optional:

```toml
backend = "llama-server"          # the default backend
store = "/srv/carryall/sessions"  # where sessions live (a folder or a file: URL)
model = "qwen3-4b"                # the default backend's model
cache = "auto"                    # prompt caching: "auto" (the default) or "off"

[backends.llama-server]
base_url = "http://127.0.0.1:8080"

[backends.openai]
base_url = "https://openrouter.ai/api/v1"
model = "some/model"
native_tools = false              # describe tools in the prompt instead
vision = false                    # render images as text lines

[backends.openai.options]         # request options, under the command line's -o
temperature = 0.2
stop = ["END"]

[redact]
patterns = ["corp-[0-9a-f]{32}"]  # cut out of every session as it is written
builtin = true                    # also the built-in API key and token shapes

[attachments]
allow_hosts = ["upload.wikimedia.org"]  # fetch a continued history's remote media from these

[mcpServers.files]                # MCP servers whose tools every run and chat gets
command = "npx"
args = ["-y", "@modelcontextprotocol/server-filesystem", "/srv/docs"]

[mcpServers.search]
url = "https://mcp.example.com/mcp"
headers = { Authorization = "Bearer ..." }
```

`mcpServers` has the shape of the JSON object Claude Desktop, Cursor and
VS Code use (`carryall.mcp.read_mcp_file` reads one of those files).

API keys are not read from here: they stay in the environment
(`ANTHROPIC_API_KEY`, `OPENAI_API_KEY` for both OpenAI wires, `GEMINI_API_KEY`),
where every other tool that uses them already looks, so a config file can be
shared without leaking one.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Final

import msgspec

from carryall import paths
from carryall._beneath import read_regular
from carryall.backend_specs import BACKEND_NAMES
from carryall.capabilities import CachePolicy
from carryall.errors import CarryallError

__all__ = [
    "BACKEND_NAMES",
    "CONFIG_FILENAME",
    "AttachmentSettings",
    "BackendSettings",
    "Config",
    "McpServer",
    "RedactSettings",
    "config_path",
    "load_config",
    "reading_past_a_broken_config",
]

CONFIG_FILENAME: Final = "config.toml"


class BackendSettings(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One `[backends.NAME]` table: what to use for that backend when not told otherwise.

    `vision` and `native_tools` override what carryall would assume of the
    model (a server that cannot say, such as a plain OpenAI-compatible one).
    """

    model: str | None = None
    base_url: str | None = None
    vision: bool | None = None
    native_tools: bool | None = None
    context_window: int | None = None
    """The model's context in tokens, where neither the server nor carryall's table knows it."""
    options: dict[str, Any] = msgspec.field(default_factory=dict)
    """Request options for this backend (`carryall.request_options`), under the command line's
    `-o`: `temperature = 0.2`, `stop = ["END"]`, an `[...options.extra.WIRE]` table."""


class RedactSettings(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The `[redact]` table: what the session store cuts out of every event it writes."""

    patterns: list[str] = msgspec.field(default_factory=list)
    """The user's own regular expressions (Python syntax), beside the built-in ones."""
    builtin: bool = True
    """Whether the built-in API key and token shapes are redacted too."""


class AttachmentSettings(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The `[attachments]` table: which remote hosts carryall may fetch media from."""

    allow_hosts: list[str] = msgspec.field(default_factory=list)
    """Hosts whose images and documents held by URL in a continued history are fetched for a
    wire that needs the bytes (llama-server; PDFs on OpenAI). Default none: such a file goes
    as its placeholder line, reported as a downgrade. A URL named with `-i` is fetched from
    its own host either way (naming it is the permission)."""


class McpServer(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One entry of an `mcpServers` object: a command to start, or a URL to talk to.

    The fields are the ones Claude Desktop, Cursor and VS Code write, so a
    file from any of them works unchanged; `timeout` (seconds per tool call)
    is carryall's own. Exactly one of `command` and `url` is given.
    """

    command: str | None = None
    args: list[str] = msgspec.field(default_factory=list)
    env: dict[str, str] = msgspec.field(default_factory=dict)
    """Set for the server process over the SDK's minimal environment and carryall's `CARRYALL_*`."""
    cwd: str | None = None
    url: str | None = None
    """A streamable HTTP endpoint."""
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    type: str | None = None
    """`stdio` or `http` (`streamable-http` and `streamableHttp` are the same); else inferred."""
    timeout: float | None = None
    disabled: bool = False
    sampling: bool = False
    """Whether this server may ask the agent's model for completions (MCP sampling)."""
    sampling_tokens: int = msgspec.field(default=2000, name="samplingTokens")
    """The output tokens this server's completions may use in one run, all together."""

    def problem(self) -> str | None:
        """What is wrong with this entry, or None when it can be started."""
        if (self.command is None) == (self.url is None):
            return "give exactly one of 'command' (a program to start) and 'url' (an HTTP server)"
        kind = self.transport
        if kind not in ("stdio", "http"):
            return f"type {self.type!r} is not one carryall speaks (stdio or http)"
        if kind == "stdio" and self.command is None:
            return "type 'stdio' needs a 'command'"
        if kind == "http" and self.url is None:
            return f"type {self.type!r} needs a 'url'"
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            return f"url {self.url!r} is not an http:// or https:// URL"
        if self.timeout is not None and not self.timeout > 0:
            return f"timeout must be a positive number of seconds, got {self.timeout}"
        if self.sampling_tokens < 1:
            return f"samplingTokens must be a positive number, got {self.sampling_tokens}"
        return None

    @property
    def transport(self) -> str:
        """`stdio` or `http`: what `type` says, else what `command`/`url` imply."""
        if self.type is None:
            return "stdio" if self.command is not None else "http"
        return _MCP_TYPES.get(self.type, self.type)


_MCP_TYPES: Final = {
    "stdio": "stdio",
    "http": "http",
    "streamable-http": "http",
    "streamableHttp": "http",
}


class Config(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The whole config file; an absent file is the empty `Config()`.

    `model` belongs to `backend`: a run that names another backend does not
    inherit it, since a model name means nothing to a different provider.
    """

    backend: str | None = None
    model: str | None = None
    store: str | None = None
    """The session store (`carryall.sessions.open_store`) unless `--store` or the variable says."""
    cache: CachePolicy | None = None
    """Prompt caching for `run` and `chat` unless `--cache` says: `auto` (unset) or `off`."""
    backends: dict[str, BackendSettings] = msgspec.field(default_factory=dict)
    redact: RedactSettings = msgspec.field(default_factory=RedactSettings)
    attachments: AttachmentSettings = msgspec.field(default_factory=AttachmentSettings)
    mcp_servers: dict[str, McpServer] = msgspec.field(default_factory=dict, name="mcpServers")
    """MCP servers whose tools `run` and `chat` offer (beside any `--mcp FILE`)."""

    def settings(self, name: str) -> BackendSettings:
        """The settings for backend `name`, with the top-level `model` when it is the default."""
        own = self.backends.get(name, BackendSettings())
        if own.model is None and self.model is not None and self.backend in (None, name):
            return msgspec.structs.replace(own, model=self.model)
        return own


def config_path() -> Path:
    """Where the config file is read from (it need not exist)."""
    return paths.config_dir() / CONFIG_FILENAME


_past_broken: ContextVar[Callable[[str], None] | None] = ContextVar(
    "carryall_past_broken_config", default=None
)


@contextmanager
def reading_past_a_broken_config(warn: Callable[[str], None]) -> Iterator[None]:
    """Within: a broken config file is one warning naming it, then read as empty.

    For the commands that only show things (`paths`, the session readers):
    a person fixing a typo in the file must still be able to ask where it
    is and read what was recorded. Commands that send or write keep
    refusing a broken file, since ignoring it could send a request, or
    write a secret its `[redact]` table would have cut, somewhere unintended.
    """
    said: set[str] = set()

    def once(message: str) -> None:
        if message not in said:
            said.add(message)
            warn(message)

    token = _past_broken.set(once)
    try:
        yield
    finally:
        _past_broken.reset(token)


def load_config(path: Path | None = None) -> Config:
    """Read the config file at `path` (default `config_path()`); empty when there is none.

    A file that exists but cannot be read, is not a regular file (a FIFO
    would hang the caller), is not TOML, is nested too deeply, has a key of the
    wrong type, an unknown key or an unknown backend name is a
    `CarryallError` naming the file and the key: a typo in a config file
    that silently did nothing would send requests somewhere unintended.
    Inside `reading_past_a_broken_config` it is a warning instead.
    """
    try:
        return _read_config(config_path() if path is None else path)
    except CarryallError as exc:
        warn = _past_broken.get()
        if warn is None:
            raise
        warn(f"{exc}; fix that file (read as empty until then)")
        return Config()


def _read_config(path: Path) -> Config:
    try:
        raw = read_regular(path)
    except FileNotFoundError:
        return Config()
    except OSError as exc:
        # A FIFO or a device is refused by type, not waited on.
        raise CarryallError(f"config file {path}: cannot read it: {exc}") from None
    import tomllib  # only when there is a file to parse

    try:
        table = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise CarryallError(f"config file {path}: not valid TOML: {exc}") from exc
    except RecursionError:
        # The TOML parser recurses per nested array or inline table.
        raise CarryallError(f"config file {path}: nested too deeply to be a config") from None
    try:
        config = msgspec.convert(table, Config)
    except msgspec.ValidationError as exc:
        raise CarryallError(f"config file {path}: {exc}") from exc
    known = ", ".join(BACKEND_NAMES)
    if config.backend is not None and config.backend not in BACKEND_NAMES:
        raise CarryallError(f"config file {path}: backend {config.backend!r} is not one of {known}")
    for name, settings in config.backends.items():
        if name not in BACKEND_NAMES:
            raise CarryallError(
                f"config file {path}: [backends.{name}] names no backend; expected one of {known}"
            )
        if settings.options:
            from carryall.request_options import read_table

            read_table(settings.options, f"config file {path}: [backends.{name}.options]")
    for name, server in config.mcp_servers.items():
        problem = server.problem()
        if problem is not None:
            raise CarryallError(f"config file {path}: mcpServers.{name}: {problem}")
    for i, pattern in enumerate(config.redact.patterns):
        try:
            re.compile(pattern)
        except re.error as exc:
            raise CarryallError(
                f"config file {path}: redact.patterns[{i}] {pattern!r} "
                f"is not a regular expression: {exc}"
            ) from None
    return config
