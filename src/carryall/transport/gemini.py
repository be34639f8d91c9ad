"""Google Gemini through the official `google-genai` SDK (the `gemini` extra).

The codec's body is handed to `client.models.generate_content` (or its
stream), whose own types take it as it stands: the SDK keeps what it is for
(the API key or Vertex credentials, its retries with backoff, here on the
statuses of `carryall.errors.RETRYABLE_STATUSES`, timeouts, typed
`APIError`s), and each answer it returns is dumped back to the wire's JSON
for the codec to decode, so one decoder reads Gemini whichever way it
arrived. The SDK is imported when a backend is made; when it is missing that
is one line saying which `pip install` fixes it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from carryall._secrets import mask
from carryall._secrets import masked as secrets_masked
from carryall.backend_specs import hosted_capabilities
from carryall.errors import RETRYABLE_STATUSES, ProviderError, wire_error
from carryall.providers import Capabilities, Request, Response, Target
from carryall.providers.codec import codec_for
from carryall.transport import RETRY_DELAY, ModelInfo, model_info
from carryall.transport._errors import Broken, masked, placed, send_whole, sending
from carryall.transport._images import WIRE_IMAGE_LIMITS
from carryall.transport._sdk import WireBackend, answered, endpoint_of, reported

__all__ = ["GEMINI_CAPABILITIES", "MISSING_EXTRA", "GeminiBackend", "gemini_model"]

GEMINI_CAPABILITIES: Final = hosted_capabilities("gemini")
"""What carryall assumes of a Gemini model (the backend table's row)."""

MISSING_EXTRA: Final = (
    "the gemini backend needs the google-genai SDK, which is not installed: "
    "pip install 'carryall[gemini]'"
)


class GeminiBackend(WireBackend):
    """Gemini (the Gemini API, or Vertex AI with `vertex`) through the `google-genai` SDK.

    `complete` returns a whole `Response` or raises `ProviderError`, never a
    partial answer: a stream that breaks off is sent again whole, at most
    `max_retries` times, so the caller's history is never half-appended.
    """

    def __init__(
        self,
        *,
        model: str,
        api_key: str | None = None,
        base_url: str | None = None,
        capabilities: Capabilities = GEMINI_CAPABILITIES,
        timeout: float = 600.0,
        max_retries: int = 3,
        retry_delay: float = RETRY_DELAY,
        stream: bool = True,
        vertex: bool = False,
    ) -> None:
        try:
            from google import genai
            from google.genai import types
        except ImportError:
            raise ProviderError(MISSING_EXTRA, kind="missing_extra") from None
        super().__init__(
            name="gemini",
            model=model,
            capabilities=capabilities,
            wire_encode=lambda request, _: self._codec.encode_reported(request),
            image_limits=WIRE_IMAGE_LIMITS["gemini"],
            timeout=timeout,
            max_retries=max_retries,
            retry_delay=retry_delay,
            stream=stream,
        )
        self._key = api_key
        options = types.HttpOptions(
            base_url=base_url,
            timeout=int(timeout * 1000),
            # The SDK retries the statuses every wire does, not only its own list.
            retry_options=types.HttpRetryOptions(
                attempts=max_retries + 1, http_status_codes=sorted(RETRYABLE_STATUSES)
            ),
        )
        try:
            self._client = genai.Client(
                api_key=None if vertex else api_key, vertexai=vertex, http_options=options
            )
        except Exception as exc:  # the SDK raises ValueError and auth errors alike here
            raise ProviderError(
                f"gemini: the client could not start: {secrets_masked(str(exc), (api_key,))}"
            ) from None
        self._base_url = base_url or (
            "https://aiplatform.googleapis.com"
            if vertex
            else "https://generativelanguage.googleapis.com"
        )
        self.endpoint = endpoint_of(self.base_url)
        self._codec = codec_for("gemini", Target(caps=capabilities, endpoint=self.endpoint))

    def complete(self, request: Request, on_text: Callable[[str], None] | None = None) -> Response:
        """Send `request` and return the whole answer, or raise `ProviderError`.

        The answer's `downgrades` are those of the one encode that was sent.
        """
        from google.genai import types

        request = self.addressed(request)

        encoded = self.encode(request)
        body = encoded.body
        config = types.GenerateContentConfig.model_validate(
            {
                **body.get("generationConfig", {}),
                **{k: body[k] for k in ("systemInstruction", "tools", "toolConfig") if k in body},
            }
        )
        response = sending(
            lambda: send_whole(
                lambda: self._attempt(request.model, body["contents"], config, on_text),
                max_retries=self.max_retries,
                retry_delay=self.retry_delay,
            ),
            (self._key,),
        )
        return reported(answered(response, request), encoded.downgrades)

    def _attempt(
        self,
        model: str,
        contents: list[Any],
        config: Any,
        on_text: Callable[[str], None] | None,
    ) -> Response:
        from google.genai import errors

        where = f"gemini at {mask(self.base_url)} (model {model})"
        try:
            if not self.stream:
                answer = self._client.models.generate_content(
                    model=model, contents=contents, config=config
                )
                return self._codec.decode(_wire(answer))
            decoder = self._codec.stream_decoder()
            for chunk in self._client.models.generate_content_stream(
                model=model, contents=contents, config=config
            ):
                text = decoder.feed(_wire(chunk))
                if text and on_text is not None:
                    on_text(text)
            return decoder.response()
        except errors.APIError as exc:
            raise _api_error(where, exc) from exc
        except ProviderError as exc:
            error = placed(where, exc)
            if exc.retryable:
                raise Broken(error) from exc
            raise error from exc
        except (OSError, TimeoutError) as exc:
            raise Broken(
                ProviderError(f"{where}: the connection failed: {exc}", retryable=True)
            ) from exc
        except Exception as exc:
            # httpx's errors and the SDK's own validation, without importing httpx here.
            if type(exc).__module__.startswith(("httpx", "httpcore")):
                raise Broken(
                    ProviderError(f"{where}: the connection failed: {exc}", retryable=True)
                ) from exc
            raise ProviderError(f"{where}: {type(exc).__name__}: {exc}") from exc

    def list_models(self) -> list[ModelInfo]:
        """Every model the API lists that answers `generateContent`, every page, through the SDK.

        Embedding and other models a conversation cannot use are left out.
        """
        from google.genai import errors

        where = f"gemini at {mask(self.base_url)}: listing models"
        try:
            entries = list(self._client.models.list())
        except errors.APIError as exc:
            raise masked(_api_error(where, exc), (self._key,)) from exc
        except Exception as exc:
            # httpx's errors, without importing httpx here.
            if type(exc).__module__.startswith(("httpx", "httpcore")):
                raise ProviderError(
                    f"{where}: cannot connect: {secrets_masked(str(exc), (self._key,))}",
                    kind="connection_error",
                    retryable=True,
                ) from exc
            raise
        return [
            info
            for entry in entries
            if _converses(entry) and (info := gemini_model(entry)) is not None
        ]


def gemini_model(entry: Any) -> ModelInfo | None:
    """One entry of Gemini's model list (the SDK's `types.Model`), named as `--model` takes it."""
    name = getattr(entry, "name", None)
    return model_info(
        name.removeprefix("models/") if isinstance(name, str) else None,
        name=getattr(entry, "display_name", None),
        owner="google",
        context_window=getattr(entry, "input_token_limit", None),
        max_output_tokens=getattr(entry, "output_token_limit", None),
    )


def _converses(entry: Any) -> bool:
    actions = getattr(entry, "supported_actions", None)
    return not isinstance(actions, list) or "generateContent" in actions


def _api_error(where: str, exc: Any) -> ProviderError:
    """A `google.genai.errors.APIError` as ours: its code, its status name, its message."""
    return wire_error(
        f"{where}: {exc.message or exc}",
        status=exc.code if isinstance(exc.code, int) else None,
        kind=exc.status if isinstance(exc.status, str) else None,
    )


def _wire(answer: Any) -> dict[str, Any]:
    """An SDK answer back as the wire's JSON (camelCase, nulls left out)."""
    data: dict[str, Any] = answer.model_dump(mode="json", by_alias=True, exclude_none=True)
    return data
