"""OpenAI Responses through the official `openai` SDK: OpenAI, or any server speaking it.

The same SDK and client as Chat Completions, posting the Responses codec's
bytes to `/responses`; llama-server answers there too. The SDK is imported
when a backend is made, not with this module.
"""

from __future__ import annotations

from typing import Final

from carryall.backend_specs import hosted_capabilities
from carryall.providers import Capabilities, Target
from carryall.providers.codec import codec_for
from carryall.transport import RETRY_DELAY
from carryall.transport._errors import SdkErrors, openai_status
from carryall.transport._images import WIRE_IMAGE_LIMITS
from carryall.transport._sdk import SdkBackend
from carryall.transport.openai import openai_client, openai_model

__all__ = ["RESPONSES_CAPABILITIES", "ResponsesBackend"]

RESPONSES_CAPABILITIES: Final = hosted_capabilities("responses")
"""What carryall assumes of a Responses model (the backend table's row)."""


class ResponsesBackend(SdkBackend):
    """The Responses API through the `openai` SDK, with its retries, timeouts and typed errors.

    `llama` says the server is llama-server, whose grammar holds a model
    without native tool calls to prompt mode's JSON schema.
    """

    def __init__(
        self,
        *,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        name: str = "responses",
        capabilities: Capabilities = RESPONSES_CAPABILITIES,
        timeout: float = 600.0,
        max_retries: int = 3,
        retry_delay: float = RETRY_DELAY,
        stream: bool = True,
        llama: bool = False,
    ) -> None:
        import openai

        super().__init__(
            name=name,
            model=model,
            capabilities=capabilities,
            codec=lambda endpoint: codec_for(
                "responses",
                Target(
                    caps=capabilities,
                    dialect="llama-server" if llama else "openai",
                    endpoint=endpoint,
                ),
            ),
            errors=SdkErrors(openai, openai.OpenAIError, openai_status),
            client=openai_client(api_key, timeout, max_retries),
            base_url=base_url,
            path="/responses",
            timeout=timeout,
            max_retries=max_retries,
            retry_delay=retry_delay,
            stream=stream,
            # Encrypted reasoning (Responses items, OpenRouter's details) is bound to the account.
            binds_key=True,
            image_limits=WIRE_IMAGE_LIMITS["llama-server" if llama else "responses"],
            model_info=openai_model,
        )
