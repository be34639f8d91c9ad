"""Choosing and opening a backend: which wire, which model, which key, what it can do.

A backend pairs a wire codec (`carryall.providers.codec`) with a transport
(`carryall.transport`): the official SDK, imported only when that backend
is opened. Seven backends share five transports over four SDKs; each is a
row of `BACKENDS` (`carryall.backend_specs`, re-exported here), which
`open_backend` reads:

- `anthropic`: the Messages API; key from `ANTHROPIC_API_KEY`.
- `openai`: Chat Completions at any base URL (any OpenAI-compatible server);
  key from `OPENAI_API_KEY`.
- `responses`: the OpenAI Responses API at any base URL (llama-server answers
  it too); key from `OPENAI_API_KEY`, through the same `openai` SDK.
- `gemini`: Google Gemini through the `google-genai` SDK (the `gemini`
  extra); key from `GEMINI_API_KEY` (or `GOOGLE_API_KEY`).
- `bedrock`: AWS Bedrock Converse through `boto3` (the `bedrock` extra);
  credentials from the AWS chain (environment, profile, SSO, instance
  role) or a Bedrock API key in `AWS_BEARER_TOKEN_BEDROCK`, never a flag.
- `llama-server`: a llama.cpp server at a base URL; what its model can do is
  read from its `/props` (`carryall.llama_server`), never guessed from a name.
- `local`: the embedded llama-server (`carryall.local`), started on demand;
  that package is imported only when this backend is opened.

`complete` returns a whole `Response` or raises `ProviderError`, never
something in between; how failures are retried is told in
`carryall.transport`. The transport's public names are re-exported here, so
`from carryall.backends import open_backend, Backend` is the one import a
program needs.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import msgspec

from carryall._secrets import mask
from carryall.backend_specs import (
    BACKEND_NAMES,
    BACKENDS,
    LLAMA_SERVER_URL,
    BackendSpec,
    Transport,
)
from carryall.config import BackendSettings, Config, load_config
from carryall.errors import ProviderError
from carryall.llama_server import capabilities_from_props, model_from_props, read_props
from carryall.providers import Capabilities
from carryall.transport import NO_KEY, RETRY_DELAY, Backend, ModelInfo
from carryall.transport.anthropic import ANTHROPIC_CAPABILITIES, AnthropicBackend
from carryall.transport.openai import OPENAI_CAPABILITIES, OpenAIBackend
from carryall.transport.responses import RESPONSES_CAPABILITIES, ResponsesBackend
from carryall.transport.sse import ServerSentEvent, iter_sse

__all__ = [
    "ANTHROPIC_CAPABILITIES",
    "BACKENDS",
    "BACKEND_NAMES",
    "DEFAULT_MODELS",
    "LLAMA_SERVER_URL",
    "OPENAI_CAPABILITIES",
    "RESPONSES_CAPABILITIES",
    "RETRY_DELAY",
    "AnthropicBackend",
    "Backend",
    "BackendSpec",
    "ModelInfo",
    "OpenAIBackend",
    "ResponsesBackend",
    "ServerSentEvent",
    "default_backend_name",
    "iter_sse",
    "list_models",
    "open_backend",
]

DEFAULT_MODELS: Final = {
    spec.name: spec.default_model for spec in BACKENDS.values() if spec.default_model is not None
}
"""The model a hosted backend uses when neither the command line nor the config names one
(each row of `BACKENDS` states its own)."""


def default_backend_name(config: Config | None = None) -> str:
    """The backend `run` uses when none is named.

    The config file's `backend` when it names one (an explicit choice beats
    a key that happens to be set), else `anthropic` when `ANTHROPIC_API_KEY`
    is set, else `openai` when `OPENAI_API_KEY` is, else `local`: with
    nothing configured carryall still runs, on the embedded model.
    """
    config = load_config() if config is None else config
    if config.backend:
        return config.backend
    if os.environ.get("ANTHROPIC_API_KEY"):
        return "anthropic"
    if os.environ.get("OPENAI_API_KEY"):
        return "openai"
    return "local"


def open_backend(
    name: str | None = None,
    *,
    model: str | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    no_vision: bool = False,
    timeout: float = 600.0,
    max_retries: int = 3,
    retry_delay: float = RETRY_DELAY,
    stream: bool = True,
    config: Config | None = None,
) -> Backend:
    """Open backend `name` (default `default_backend_name()`), ready for `complete`.

    Each argument left out comes from the config file's `[backends.NAME]`
    table, then the environment, then the backend's default (for `openai`
    at a base URL, the one model that server lists, if it lists one).
    `llama-server`
    reads its `/props` here and `local` starts the embedded server here, so
    a backend that cannot serve fails now with a clear error, not at the
    first request. `no_vision` makes every image a text line.

    Raises `ProviderError` for an unknown name, a missing API key or an
    unreachable llama-server, `LocalBackendError` when the local backend is
    not installed (run `carryall local install`), and `CarryallError` for a
    broken config file.
    """
    config = load_config() if config is None else config
    name = name or default_backend_name(config)
    spec = BACKENDS.get(name)
    if spec is None:
        raise ProviderError(f"unknown backend {name!r}: expected one of {', '.join(BACKEND_NAMES)}")
    settings = config.settings(name)
    base_url = _checked_base_url(
        base_url
        or settings.base_url
        or (os.environ.get(spec.base_url_variable) if spec.base_url_variable else None)
    )
    opening = _Opening(
        spec=spec,
        model=model or settings.model,
        base_url=base_url,
        api_key=_api_key(spec, api_key, base_url),
        settings=settings,
        no_vision=no_vision,
        options={
            "timeout": timeout,
            "max_retries": max_retries,
            "retry_delay": retry_delay,
            "stream": stream,
        },
    )
    if spec.served_by == "embedded":
        return _open_local(opening)
    if spec.served_by == "props":
        return _open_llama_server(opening)
    return _open_row(opening, _capabilities(spec, spec.capabilities, opening))


@dataclass(frozen=True, slots=True)
class _Opening:
    """What `open_backend` worked out from its arguments, the config and the table's row."""

    spec: BackendSpec
    model: str | None
    base_url: str | None
    api_key: str | None
    settings: BackendSettings
    no_vision: bool
    options: dict[str, Any]

    @property
    def default_model(self) -> str:
        """The model asked for, else the row's default."""
        return self.model or self.spec.default_model or self.spec.name


def _open_row(opening: _Opening, caps: Capabilities) -> Backend:
    """The backend of a row whose capabilities and model the row itself states.

    Every transport's backend takes the same settings; a row with no key
    (`takes_key`) is given none, and the Anthropic SDK, which needs one
    string, gets `NO_KEY` for a server at a base URL that wants none.
    """
    spec = opening.spec
    keys: dict[str, str | None] = {}
    if spec.takes_key:
        keys["api_key"] = (
            opening.api_key or NO_KEY if spec.transport == "anthropic" else opening.api_key
        )
    backend = _backend_class(spec.transport)(
        model=opening.default_model,
        base_url=opening.base_url,
        capabilities=caps,
        **keys,
        **opening.options,
    )
    if isinstance(backend, OpenAIBackend) and opening.model is None and opening.base_url:
        # A compatible server at a base URL: the one model it lists, if it lists one.
        backend.model = backend.served_model() or backend.model
    return backend


def _backend_class(transport: Transport) -> Callable[..., Backend]:
    """The backend class of `transport`; Gemini's and Bedrock's SDKs load only when asked for."""
    if transport == "gemini":
        from carryall.transport.gemini import GeminiBackend

        return GeminiBackend
    if transport == "bedrock":
        from carryall.transport.bedrock import BedrockBackend

        return BedrockBackend
    classes: dict[Transport, Callable[..., Backend]] = {
        "anthropic": AnthropicBackend,
        "openai": OpenAIBackend,
        "responses": ResponsesBackend,
    }
    return classes[transport]


def _open_llama_server(opening: _Opening) -> Backend:
    root = _server_root(opening.base_url or opening.spec.default_base_url or LLAMA_SERVER_URL)
    props = read_props(root, timeout=min(opening.options["timeout"], 30.0))
    return OpenAIBackend(
        name=opening.spec.name,
        dialect="llama-server",
        model=opening.model or model_from_props(props) or opening.spec.name,
        base_url=f"{root}/v1",
        api_key=opening.api_key,
        capabilities=_capabilities(opening.spec, capabilities_from_props(props), opening),
        **opening.options,
    )


def list_models(
    name: str | None = None,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    timeout: float = 30.0,
    config: Config | None = None,
) -> list[ModelInfo]:
    """The models backend `name` serves, in the order its provider lists them.

    Asked of the provider's own list through its SDK: `/v1/models` for
    `openai` and `responses` (any compatible server), Anthropic's and
    Gemini's model lists, Bedrock's foundation models (the `bedrock`
    control plane), and for `llama-server` and `local` their `/v1/models`
    with the context from `/props` (`local` starts the embedded server).
    The backend is opened as `open_backend` opens it, so a missing key, an
    unreachable server or a missing extra is the same `ProviderError` (or
    `LocalBackendError`) a run would meet, before any list is asked for.
    """
    config = load_config() if config is None else config
    name = name or default_backend_name(config)
    spec = BACKENDS.get(name)
    backend = open_backend(
        name,
        # The row's own model: listing needs none, and an unnamed one would be looked up first.
        model=spec.default_model if spec is not None else None,
        base_url=base_url,
        api_key=api_key,
        timeout=timeout,
        max_retries=1,
        stream=False,
        config=config,
    )
    try:
        return backend.list_models()
    finally:
        backend.close()


def _open_local(opening: _Opening) -> Backend:
    from carryall import local

    server = local.get_local_server()
    return OpenAIBackend(
        name=opening.spec.name,
        dialect="llama-server",
        model=opening.model or server.model_id,
        base_url=f"{server.base_url.rstrip('/')}/v1",
        api_key=opening.api_key,
        capabilities=_capabilities(opening.spec, server.capabilities, opening),
        server=server,
        **opening.options,
    )


def _checked_base_url(url: str | None) -> str | None:
    """`url` if it is an `http(s)` URL with a host, else a `ProviderError` saying why.

    Read by the HTTP client's own parser, so a URL it would refuse later
    (with a traceback from deep inside the SDK) is refused here in one line.
    Any `user:password@` in it is masked in the message.
    """
    if url is None:
        return None
    import httpx2

    shown = mask(url)
    try:
        parsed = httpx2.URL(url)
    except (httpx2.InvalidURL, ValueError, TypeError) as exc:
        raise ProviderError(f"base URL {shown!r} is not a valid URL: {mask(str(exc))}") from None
    if parsed.scheme not in ("http", "https"):
        raise ProviderError(
            f"base URL {shown!r} must start with http:// or https://"
            + (f" (not {parsed.scheme}://)" if parsed.scheme else "")
        )
    if not parsed.host:
        raise ProviderError(f"base URL {shown!r} names no host")
    if parsed.port is not None and not 0 < parsed.port < 65536:
        raise ProviderError(f"base URL {shown!r}: port {parsed.port} is not 1 to 65535")
    return url


def _api_key(spec: BackendSpec, given: str | None, base_url: str | None) -> str | None:
    """The key for `spec` from the argument, else its row's variables; a `ProviderError` when
    the row needs one and none is set (or it takes none and one was given)."""
    if not spec.takes_key:
        if given:
            raise ProviderError(
                f"the {spec.name} backend takes no API key argument: AWS credentials come from "
                "the environment (AWS_ACCESS_KEY_ID, AWS_PROFILE, AWS_BEARER_TOKEN_BEDROCK)",
                kind="authentication_error",
            )
        return None
    key = given or next(
        (found for variable in spec.key_variables if (found := os.environ.get(variable))), None
    )
    if key or not spec.key_variables:
        return key
    if base_url and spec.key_optional_at_base_url:
        # A self-hosted server speaking the same wire often wants no key at all.
        return NO_KEY
    raise ProviderError(
        f"the {spec.name} backend needs an API key: set {spec.key_variables[0]}"
        + (
            " (or pass a base URL for a server that needs none)"
            if spec.key_optional_at_base_url
            else ""
        ),
        kind="authentication_error",
    )


def _capabilities(spec: BackendSpec, caps: Capabilities | None, opening: _Opening) -> Capabilities:
    """`caps` (the row's, or the server's) with the config's overrides and `no_vision`.

    A row that has no prompt mode refuses `native_tools = false` here, naming the line to remove.
    """
    settings = opening.settings
    caps = caps if caps is not None else Capabilities()
    if settings.vision is not None:
        caps = msgspec.structs.replace(caps, vision=settings.vision)
    if settings.native_tools is not None:
        caps = msgspec.structs.replace(caps, native_tools=settings.native_tools)
    if opening.no_vision:
        caps = msgspec.structs.replace(caps, vision=False)
    if not caps.native_tools and not spec.prompt_mode:
        raise ProviderError(
            f"the {spec.name} backend has no prompt mode: it always sends native tool calls; "
            "remove native_tools = false from its config"
            + (", or use the openai backend" if spec.transport == "responses" else "")
        )
    return caps


def _server_root(url: str) -> str:
    """A llama-server URL without the `/v1` a user may have copied from an OpenAI setup."""
    root = url.rstrip("/")
    return root[:-3] if root.endswith("/v1") else root
