"""Choosing and opening a backend: which wire, which model, which key, what it can do.

A backend pairs a wire codec (`carryall.providers.codec`) with a transport
(`carryall.transport`): the official `anthropic` or `openai` SDK, imported
only when that backend is opened. Seven backends share five transports over four SDKs:

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
from typing import Any, Final

import msgspec

from carryall._secrets import mask
from carryall.config import BACKEND_NAMES, BackendSettings, Config, load_config
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
    "BACKEND_NAMES",
    "DEFAULT_MODELS",
    "LLAMA_SERVER_URL",
    "OPENAI_CAPABILITIES",
    "RESPONSES_CAPABILITIES",
    "RETRY_DELAY",
    "AnthropicBackend",
    "Backend",
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
    "anthropic": "claude-sonnet-4-6",
    "openai": "gpt-4.1-mini",
    "responses": "gpt-4.1-mini",
    "gemini": "gemini-2.5-flash",
    "bedrock": "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
}
"""The model a hosted backend uses when neither the command line nor the config names one."""

LLAMA_SERVER_URL: Final = "http://127.0.0.1:8080"
"""Where `llama-server` listens when started with its defaults."""


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
    if name not in BACKEND_NAMES:
        raise ProviderError(f"unknown backend {name!r}: expected one of {', '.join(BACKEND_NAMES)}")
    settings = config.settings(name)
    model = model or settings.model
    base_url = _checked_base_url(base_url or settings.base_url)
    options: dict[str, Any] = {
        "timeout": timeout,
        "max_retries": max_retries,
        "retry_delay": retry_delay,
        "stream": stream,
    }
    if name == "anthropic":
        key = _api_key(api_key, "ANTHROPIC_API_KEY", name, base_url)
        caps = _capabilities(ANTHROPIC_CAPABILITIES, settings, no_vision)
        if not caps.native_tools:
            raise ProviderError(
                "the anthropic backend has no prompt mode: it always sends native tool calls; "
                "remove native_tools = false from its config"
            )
        return AnthropicBackend(
            model=model or DEFAULT_MODELS["anthropic"],
            api_key=key,
            base_url=base_url,
            capabilities=caps,
            **options,
        )
    if name == "openai":
        key = _api_key(api_key, "OPENAI_API_KEY", name, base_url)
        caps = _capabilities(OPENAI_CAPABILITIES, settings, no_vision)
        backend = OpenAIBackend(
            model=model or DEFAULT_MODELS["openai"],
            base_url=base_url,
            api_key=key,
            capabilities=caps,
            **options,
        )
        if model is None and base_url is not None:
            backend.model = backend.served_model() or backend.model
        return backend
    if name == "responses":
        key = _api_key(api_key, "OPENAI_API_KEY", name, base_url)
        caps = _capabilities(RESPONSES_CAPABILITIES, settings, no_vision)
        if not caps.native_tools:
            raise ProviderError(
                "the responses backend has no prompt mode: it always sends native tool calls; "
                "remove native_tools = false from its config, or use the openai backend"
            )
        return ResponsesBackend(
            model=model or DEFAULT_MODELS["responses"],
            base_url=base_url,
            api_key=key,
            capabilities=caps,
            **options,
        )
    if name == "gemini":
        from carryall.transport.gemini import GEMINI_CAPABILITIES, GeminiBackend

        google_key = api_key or os.environ.get("GEMINI_API_KEY") or os.environ.get("GOOGLE_API_KEY")
        if not google_key:
            raise ProviderError(
                "the gemini backend needs an API key: set GEMINI_API_KEY",
                kind="authentication_error",
            )
        return GeminiBackend(
            model=model or DEFAULT_MODELS["gemini"],
            api_key=google_key,
            base_url=base_url,
            capabilities=_capabilities(GEMINI_CAPABILITIES, settings, no_vision),
            **options,
        )
    if name == "bedrock":
        from carryall.transport.bedrock import BEDROCK_CAPABILITIES, BedrockBackend

        if api_key:
            raise ProviderError(
                "the bedrock backend takes no API key argument: AWS credentials come from "
                "the environment (AWS_ACCESS_KEY_ID, AWS_PROFILE, AWS_BEARER_TOKEN_BEDROCK)",
                kind="authentication_error",
            )
        return BedrockBackend(
            model=model or DEFAULT_MODELS["bedrock"],
            base_url=base_url,
            capabilities=_capabilities(BEDROCK_CAPABILITIES, settings, no_vision),
            **options,
        )
    if name == "llama-server":
        root = _server_root(
            _checked_base_url(base_url or os.environ.get("LLAMA_SERVER_URL")) or LLAMA_SERVER_URL
        )
        props = read_props(root, timeout=min(timeout, 30.0))
        return OpenAIBackend(
            name="llama-server",
            dialect="llama-server",
            model=model or model_from_props(props) or "llama-server",
            base_url=f"{root}/v1",
            api_key=api_key,
            capabilities=_capabilities(capabilities_from_props(props), settings, no_vision),
            **options,
        )
    return _open_local(model, api_key, settings, no_vision, options)


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
    backend = open_backend(
        name,
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


def _open_local(
    model: str | None,
    api_key: str | None,
    settings: BackendSettings,
    no_vision: bool,
    options: dict[str, Any],
) -> Backend:
    from carryall import local

    server = local.get_local_server()
    return OpenAIBackend(
        name="local",
        dialect="llama-server",
        model=model or server.model_id,
        base_url=f"{server.base_url.rstrip('/')}/v1",
        api_key=api_key,
        capabilities=_capabilities(server.capabilities, settings, no_vision),
        server=server,
        **options,
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


def _api_key(given: str | None, variable: str, name: str, base_url: str | None) -> str:
    key = given or os.environ.get(variable)
    if key:
        return key
    if base_url:
        # A self-hosted server speaking the same wire often wants no key at all.
        return NO_KEY
    raise ProviderError(
        f"the {name} backend needs an API key: set {variable} (or pass a base URL "
        "for a server that needs none)",
        kind="authentication_error",
    )


def _capabilities(caps: Capabilities, settings: BackendSettings, no_vision: bool) -> Capabilities:
    if settings.vision is not None:
        caps = msgspec.structs.replace(caps, vision=settings.vision)
    if settings.native_tools is not None:
        caps = msgspec.structs.replace(caps, native_tools=settings.native_tools)
    if no_vision:
        caps = msgspec.structs.replace(caps, vision=False)
    return caps


def _server_root(url: str) -> str:
    """A llama-server URL without the `/v1` a user may have copied from an OpenAI setup."""
    root = url.rstrip("/")
    return root[:-3] if root.endswith("/v1") else root
