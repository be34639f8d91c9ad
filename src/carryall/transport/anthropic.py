"""The Anthropic Messages API through the official `anthropic` SDK.

The SDK is imported when a backend is made, not with this module, so a
program that never talks to Anthropic never loads it.
"""

from __future__ import annotations

from typing import Any, Final

from carryall.backend_specs import hosted_capabilities
from carryall.providers import Capabilities, Target
from carryall.providers.codec import codec_for
from carryall.providers.hosted import anthropic_headers
from carryall.transport import RETRY_DELAY, ModelInfo, model_info
from carryall.transport._errors import SdkErrors, anthropic_status
from carryall.transport._images import WIRE_IMAGE_LIMITS
from carryall.transport._sdk import SdkBackend

__all__ = ["ANTHROPIC_CAPABILITIES", "AnthropicBackend", "anthropic_model"]

ANTHROPIC_CAPABILITIES: Final = hosted_capabilities("anthropic")
"""What carryall assumes of an Anthropic model (the backend table's row)."""


def anthropic_model(entry: Any) -> ModelInfo | None:
    """One entry of Anthropic's model list (`GET /v1/models`, the SDK's `ModelInfo`)."""
    return model_info(
        getattr(entry, "id", None),
        name=getattr(entry, "display_name", None),
        owner="anthropic",
        created=getattr(entry, "created_at", None),
        context_window=getattr(entry, "max_input_tokens", None),
        max_output_tokens=getattr(entry, "max_tokens", None),
    )


class AnthropicBackend(SdkBackend):
    """The Anthropic Messages API through the `anthropic` SDK (or a server speaking it).

    A request holding a beta feature (an advisor, MCP or compaction block
    its history sends back, a declared MCP server) goes as the SDK's beta
    call sends it: the same path, with its betas in `anthropic-beta`
    (`hosted.anthropic_betas`).
    """

    def __init__(
        self,
        *,
        model: str,
        api_key: str,
        base_url: str | None = None,
        capabilities: Capabilities = ANTHROPIC_CAPABILITIES,
        timeout: float = 600.0,
        max_retries: int = 3,
        retry_delay: float = RETRY_DELAY,
        stream: bool = True,
    ) -> None:
        import anthropic

        super().__init__(
            name="anthropic",
            model=model,
            capabilities=capabilities,
            codec=lambda endpoint: codec_for(
                "anthropic", Target(caps=capabilities, endpoint=endpoint)
            ),
            errors=SdkErrors(anthropic, anthropic.AnthropicError, anthropic_status),
            client=lambda url, http: anthropic.Anthropic(
                api_key=api_key,
                base_url=url,
                timeout=timeout,
                max_retries=max_retries,
                http_client=http,
            ),
            base_url=base_url,
            path="/v1/messages",
            timeout=timeout,
            max_retries=max_retries,
            retry_delay=retry_delay,
            stream=stream,
            image_limits=WIRE_IMAGE_LIMITS["anthropic"],
            model_info=anthropic_model,
            request_headers=anthropic_headers,
        )
