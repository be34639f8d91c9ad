"""Every backend carryall knows, as rows of one table: `BACKENDS`.

A backend is a name a person types (`-b gemini`) for a wire codec carried by
a transport, with what it needs from the environment and what carryall
assumes of its models. Each of those facts is stated once, in its row:
`open_backend` reads the row to open it, the config reader to check a
name, the transport to fit images, `carryall models` to say how its list is
asked for. A question about a backend ("which key variable?", "which
default model?", "may it run in prompt mode?") has its answer here and
nowhere else.

This module is data: it imports no transport, SDK or HTTP client, so the
config reader can check names against it without loading them.
"""

from __future__ import annotations

from typing import Final, Literal

import msgspec

from carryall.attachments import DEFAULT_MAX_IMAGE_BYTES
from carryall.capabilities import Capabilities
from carryall.imagefit import IMAGE_FIT_INPUT_BYTES, MAX_EDGE, RECOMMENDED_EDGE, ImageLimits

__all__ = [
    "BACKENDS",
    "BACKEND_NAMES",
    "LLAMA_SERVER_URL",
    "BackendSpec",
    "Transport",
    "hosted_capabilities",
]

Transport = Literal["anthropic", "openai", "responses", "gemini", "bedrock"]
"""The transport module (`carryall.transport.NAME`) that carries a backend's requests."""


class BackendSpec(msgspec.Struct, frozen=True, kw_only=True):
    """One backend: what opening it needs and what carryall assumes of its models."""

    name: str
    """What `-b` and the config file's `backend` take."""
    summary: str
    """One line for help texts: the API it speaks and what it needs."""
    transport: Transport
    """Which transport carries its requests (and so which official SDK)."""
    wire: str
    """The codec's dialect: the wire part of every origin it stamps."""
    default_model: str | None = None
    """The model when neither the command line nor the config names one; None for a server
    that says what it serves (its `/props`, or the one model its `/models` lists)."""
    key_variables: tuple[str, ...] = ()
    """Where its API key is read from, the first one set winning; empty when none is read."""
    key_optional_at_base_url: bool = False
    """Whether a base URL of the user's own may go without a key (a self-hosted server)."""
    takes_key: bool = True
    """Whether an API key may be given at all (Bedrock's credentials come from the AWS chain)."""
    base_url_variable: str | None = None
    """The environment variable naming its server, read after the config file."""
    default_base_url: str | None = None
    """Where it sends when nothing names a server; None: the SDK's own default."""
    capabilities: Capabilities | None = None
    """What carryall assumes of its models; None when its server says (`served_by`)."""
    served_by: Literal["row", "props", "embedded"] = "row"
    """Where its capabilities and default model come from: this row; the `/props` of the
    server at its base URL; or the embedded server (`carryall.local`), started on demand."""
    prompt_mode: bool = True
    """Whether `native_tools = false` (tools described in the prompt) may be asked for."""
    image_limits: ImageLimits
    """What one image may be before the transport fits it (`carryall.transport._images`)."""
    models: str
    """Where `carryall models` reads what it serves."""
    otel_provider: str
    """Its `gen_ai.provider.name` on a trace (`carryall.tracing`), as OpenTelemetry's GenAI
    conventions name the provider."""
    extra: str | None = None
    """The `pip install 'carryall[EXTRA]'` its SDK comes with, when not a core dependency."""


LLAMA_SERVER_URL: Final = "http://127.0.0.1:8080"
"""Where `llama-server` listens when started with its defaults."""

_SEES_CALLS_THINKS: Final = Capabilities(vision=True, native_tools=True, thinking=True)
_OPENAI_IMAGES: Final = ImageLimits(None, 2048, IMAGE_FIT_INPUT_BYTES)
# llama-server's projector scales every image itself; the byte cap is the loader's.
_LLAMA_IMAGES: Final = ImageLimits(None, 2048, IMAGE_FIT_INPUT_BYTES)

_OPENAI: Final = BackendSpec(
    name="openai",
    summary="OpenAI Chat Completions, or any compatible server at a base URL",
    transport="openai",
    wire="openai",
    default_model="gpt-4.1-mini",
    key_variables=("OPENAI_API_KEY",),
    key_optional_at_base_url=True,
    # Thinking stays off this wire; a server that cannot see or call tools is
    # told so in the config file (`vision = false`, `native_tools = false`).
    capabilities=Capabilities(vision=True, native_tools=True, thinking=False),
    # 20 MB per image; no edge limit, images are scaled to fit 2048 px.
    image_limits=_OPENAI_IMAGES,
    models="the server's GET /v1/models",
    otel_provider="openai",
)

BACKENDS: Final[dict[str, BackendSpec]] = {
    spec.name: spec
    for spec in (
        BackendSpec(
            name="anthropic",
            summary="the Anthropic Messages API",
            transport="anthropic",
            wire="anthropic",
            default_model="claude-sonnet-4-6",
            key_variables=("ANTHROPIC_API_KEY",),
            key_optional_at_base_url=True,
            capabilities=_SEES_CALLS_THINKS,
            prompt_mode=False,
            # 8000 px refused, 1568 px recommended (larger is scaled down by the API), 5 MB.
            image_limits=ImageLimits(MAX_EDGE, RECOMMENDED_EDGE, DEFAULT_MAX_IMAGE_BYTES),
            models="Anthropic's model list (GET /v1/models)",
            otel_provider="anthropic",
        ),
        _OPENAI,
        # The same account, key, models and image limits as Chat Completions, another API.
        msgspec.structs.replace(
            _OPENAI,
            name="responses",
            summary="the OpenAI Responses API (llama-server answers it too)",
            transport="responses",
            wire="responses",
            capabilities=_SEES_CALLS_THINKS,
            prompt_mode=False,
        ),
        BackendSpec(
            name="gemini",
            summary="Google Gemini through google-genai",
            transport="gemini",
            wire="gemini",
            default_model="gemini-2.5-flash",
            key_variables=("GEMINI_API_KEY", "GOOGLE_API_KEY"),
            capabilities=_SEES_CALLS_THINKS,
            # Inline data is 20 MB per request; images are scaled to fit 3072 px.
            image_limits=ImageLimits(None, 3072, IMAGE_FIT_INPUT_BYTES),
            models="Gemini's model list, those that answer generateContent",
            otel_provider="gcp.gemini",
            extra="gemini",
        ),
        BackendSpec(
            name="bedrock",
            summary="AWS Bedrock Converse through boto3; credentials from the AWS chain",
            transport="bedrock",
            wire="bedrock",
            default_model="us.anthropic.claude-sonnet-4-5-20250929-v1:0",
            takes_key=False,
            capabilities=_SEES_CALLS_THINKS,
            # 8000 px and 3.75 MB per image; the Claude models behind it keep 1568 px.
            image_limits=ImageLimits(MAX_EDGE, RECOMMENDED_EDGE, 3_750_000),
            models="Bedrock's foundation models in the region (ListFoundationModels)",
            otel_provider="aws.bedrock",
            extra="bedrock",
        ),
        BackendSpec(
            name="llama-server",
            summary="a llama.cpp server; what its model can do is read from its /props",
            transport="openai",
            wire="llama-server",
            base_url_variable="LLAMA_SERVER_URL",
            default_base_url=LLAMA_SERVER_URL,
            served_by="props",
            image_limits=_LLAMA_IMAGES,
            models="the server's GET /v1/models, with the context from /props",
            otel_provider="llama.cpp",
        ),
        BackendSpec(
            name="local",
            summary="the embedded llama-server, started on demand",
            transport="openai",
            wire="llama-server",
            served_by="embedded",
            image_limits=_LLAMA_IMAGES,
            models="the embedded server's GET /v1/models, with the context from /props",
            otel_provider="llama.cpp",
        ),
    )
}
"""Every backend `open_backend` knows, by name, in the order the docs list them."""

BACKEND_NAMES: Final = tuple(BACKENDS)
"""Every backend's name, in the table's order."""


def hosted_capabilities(name: str) -> Capabilities:
    """What carryall assumes of backend `name`'s models: a hosted backend's row says it."""
    caps = BACKENDS[name].capabilities
    if caps is None:
        raise KeyError(f"backend {name!r} reads what its model can do from its server")
    return caps
