"""Chat Completions through the official `openai` SDK: OpenAI, any compatible server, llama-server.

The SDK is imported when a backend is made, not with this module. The
`local` backend is this transport too, following the embedded server
(`carryall.local.LocalServer`) wherever it runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import msgspec

from carryall.backend_specs import hosted_capabilities
from carryall.errors import LocalBackendError, ProviderError
from carryall.providers import Capabilities, Dialect, Response, Target
from carryall.providers.codec import Codec, codec_for
from carryall.transport import NO_KEY, RETRY_DELAY, ModelInfo, model_info
from carryall.transport._errors import SdkErrors, openai_status
from carryall.transport._images import WIRE_IMAGE_LIMITS
from carryall.transport._sdk import SdkBackend

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from carryall.local import LocalServer

__all__ = ["OPENAI_CAPABILITIES", "OpenAIBackend", "openai_client", "openai_model"]

OPENAI_CAPABILITIES: Final = hosted_capabilities("openai")
"""What carryall assumes of an OpenAI-compatible model (the backend table's row)."""


def openai_client(
    api_key: str | None, timeout: float, max_retries: int
) -> Callable[[str | None, Any], Any]:
    """How an `openai.OpenAI` client is made for a base URL, around the httpx2 client given.

    A server that needs no key is sent `NO_KEY`: the SDK refuses to start without one.
    """
    import openai

    def make(base_url: str | None, http: Any) -> Any:
        return openai.OpenAI(
            api_key=api_key or NO_KEY,
            base_url=base_url,
            timeout=timeout,
            max_retries=max_retries,
            http_client=http,
        )

    return make


def openai_model(entry: Any) -> ModelInfo | None:
    """One entry of an OpenAI-compatible model list (`GET /models`, the SDK's `Model`)."""
    return model_info(
        getattr(entry, "id", None),
        owner=getattr(entry, "owned_by", None),
        created=getattr(entry, "created", None),
    )


class OpenAIBackend(SdkBackend):
    """Chat Completions through the `openai` SDK: OpenAI, any compatible server, llama-server.

    `dialect` picks the OpenAI or the llama-server flavour of the codec;
    without native tool calls (`capabilities.native_tools`) the prompt-mode
    codec is used instead. `server`, for the `local` backend, is a
    `carryall.local.LocalServer` made sure to be running before each attempt.
    """

    def __init__(
        self,
        *,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        name: str = "openai",
        dialect: Dialect = "openai",
        capabilities: Capabilities = OPENAI_CAPABILITIES,
        timeout: float = 600.0,
        max_retries: int = 3,
        retry_delay: float = RETRY_DELAY,
        stream: bool = True,
        server: LocalServer | None = None,
    ) -> None:
        import openai

        self._server = server
        self._dialect = dialect
        super().__init__(
            name=name,
            model=model,
            capabilities=capabilities,
            codec=lambda endpoint: codec_for(
                "openai", Target(caps=capabilities, dialect=dialect, endpoint=endpoint)
            ),
            errors=SdkErrors(openai, openai.OpenAIError, openai_status),
            client=openai_client(api_key, timeout, max_retries),
            base_url=base_url,
            path="/chat/completions",
            timeout=timeout,
            max_retries=max_retries,
            retry_delay=retry_delay,
            stream=stream,
            # Encrypted reasoning (Responses items, OpenRouter's details) is bound to the account.
            binds_key=True,
            image_limits=WIRE_IMAGE_LIMITS[dialect],
            model_info=openai_model,
        )

    @property
    def context_window(self) -> int | None:
        """The local server's context in tokens, from its `/props`; None for any other server."""
        if self._server is None:
            return None
        from carryall.llama_server import context_from_props

        return context_from_props(self._server.props)

    def list_models(self) -> list[ModelInfo]:
        """Every model the server lists at `GET /models`; on llama-server, with its `/props`.

        llama-server's list names its model but not the context it was
        started with, so each entry takes `n_ctx` from `/props` (the local
        server's own copy, else read now), and a model listed by its file
        path is named by its file name, as a run records it; a server too
        old to list models is its one model from `/props`.
        """
        from carryall import llama_server

        self._follow_server()
        listed = super().list_models()
        if self._dialect != "llama-server":
            return listed
        if self._server is not None:
            props = self._server.props
        else:
            props = llama_server.read_props(self.base_url.removesuffix("/v1"), timeout=30.0)
        window = llama_server.context_from_props(props)
        named = llama_server.model_from_props(props)
        if not listed:
            found = model_info(named)
            listed = [found] if found is not None else []
        path = props.get("model_path")
        return [
            msgspec.structs.replace(
                info,
                # Listed by its path when started without an alias: named as `run` names it.
                id=named if named and info.id == path else info.id,
                context_window=info.context_window or window,
            )
            for info in listed
        ]

    def served_model(self) -> str | None:
        """The one model the server lists at `/models`; None when it lists several, or none.

        A self-hosted OpenAI-compatible server (vLLM, LM Studio, llama-server)
        usually serves one model and refuses any other name, so its own answer
        beats a default that names a hosted model.
        """
        import httpx2

        try:
            page = self._client.with_options(max_retries=0, timeout=10.0).models.list()
            ids = [getattr(entry, "id", None) for entry in page.data]
        except (self._errors.base, httpx2.HTTPError, TypeError, AttributeError):
            return None
        return ids[0] if len(ids) == 1 and isinstance(ids[0], str) and ids[0] else None

    def _attempt(
        self,
        codec: Codec,
        body: bytes,
        on_text: Callable[[str], None] | None,
        headers: Mapping[str, str] | None = None,
    ) -> Response:
        self._follow_server()
        return super()._attempt(codec, body, on_text, headers)

    def _follow_server(self) -> None:
        """Make sure the local server runs, and send to wherever it now listens."""
        if self._server is None:
            return
        try:
            root = self._server.ensure_running()
        except LocalBackendError as exc:
            raise ProviderError(f"local backend: {exc}", kind="local_backend") from exc
        url = f"{root.rstrip('/')}/v1"
        if url != self.base_url:
            # Restarted on another port: a new client, the old pool points nowhere.
            self.close()
            self._connect(url)
