"""AWS Bedrock Converse through the official `boto3` SDK (the `bedrock` extra).

The codec's body is handed to `client.converse` (or `converse_stream`): the
SDK keeps what it is for (the AWS credential chain and SigV4 signing, or a
Bedrock API key in `AWS_BEARER_TOKEN_BEDROCK`; its standard-mode retries on
throttling, 5xx and dropped connections; timeouts; typed `ClientError`s).
boto3 takes blobs as `bytes` where the JSON body holds base64 text, so
`sdk_params` turns each blob field back into bytes by the service model's
own shapes (botocore's serializer writes them as the same base64 again), and
each answer, or stream event, comes back through `wire_json` (bytes as
base64 again) for the codec to decode: one decoder reads Bedrock whichever
way it arrived. The SDK is imported when a backend is made; when it is
missing that is one line saying which `pip install` fixes it.
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Callable, Mapping
from typing import Any, Final

from carryall._secrets import mask
from carryall._secrets import masked as secrets_masked
from carryall.backend_specs import hosted_capabilities
from carryall.errors import ProviderError, wire_error
from carryall.providers import Capabilities, Request, Response, Target, structured
from carryall.providers.codec import codec_for
from carryall.transport import RETRY_DELAY, ModelInfo, model_info
from carryall.transport._errors import Broken, placed, send_whole, sending, shown
from carryall.transport._images import WIRE_IMAGE_LIMITS
from carryall.transport._sdk import WireBackend, answered, endpoint_of, reported

__all__ = [
    "BEDROCK_CAPABILITIES",
    "DEFAULT_REGION",
    "MISSING_EXTRA",
    "BedrockBackend",
    "bedrock_model",
    "sdk_params",
    "wire_json",
]

BEDROCK_CAPABILITIES: Final = hosted_capabilities("bedrock")
"""What carryall assumes of a Bedrock model (the backend table's row)."""

MISSING_EXTRA: Final = (
    "the bedrock backend needs the boto3 SDK, which is not installed: "
    "pip install 'carryall[bedrock]'"
)

DEFAULT_REGION: Final = "us-east-1"
"""The region when neither the base URL, `AWS_REGION` nor `AWS_DEFAULT_REGION` names one."""

_REGION_HOST: Final = re.compile(r"bedrock-runtime(?:-fips)?\.([a-z0-9-]+)\.amazonaws\.com")


class BedrockBackend(WireBackend):
    """Bedrock Converse through `boto3`'s `bedrock-runtime` client.

    `complete` returns a whole `Response` or raises `ProviderError`, never a
    partial answer: a stream that breaks off is sent again whole, at most
    `max_retries` times, so the caller's history is never half-appended.
    `base_url` is another endpoint (a VPC endpoint, a proxy, a test server);
    the region comes from it when it is a Bedrock host, else from `region`,
    `AWS_REGION`, `AWS_DEFAULT_REGION`, else `DEFAULT_REGION`.
    """

    def __init__(
        self,
        *,
        model: str,
        base_url: str | None = None,
        region: str | None = None,
        capabilities: Capabilities = BEDROCK_CAPABILITIES,
        timeout: float = 600.0,
        max_retries: int = 3,
        retry_delay: float = RETRY_DELAY,
        stream: bool = True,
    ) -> None:
        try:
            import boto3
            from botocore.config import Config
        except ImportError:
            raise ProviderError(MISSING_EXTRA, kind="missing_extra") from None
        super().__init__(
            name="bedrock",
            model=model,
            capabilities=capabilities,
            wire_encode=lambda request, _: self._codec.encode_reported(request),
            image_limits=WIRE_IMAGE_LIMITS["bedrock"],
            timeout=timeout,
            max_retries=max_retries,
            retry_delay=retry_delay,
            stream=stream,
        )
        self.region = (
            _region_of(base_url)
            or region
            or os.environ.get("AWS_REGION")
            or os.environ.get("AWS_DEFAULT_REGION")
            or DEFAULT_REGION
        )
        self._control_url = None if _region_of(base_url) else base_url
        """Where `list_models` asks: the same server unless it is a Bedrock runtime host."""
        config = Config(
            region_name=self.region,
            connect_timeout=min(timeout, 60.0),
            read_timeout=timeout,
            retries={"total_max_attempts": max_retries + 1, "mode": "standard"},
        )
        self._config = config
        try:
            self._client = boto3.session.Session().client(
                "bedrock-runtime", endpoint_url=base_url, config=config
            )
        except Exception as exc:  # botocore raises ValueError and its own errors alike here
            raise ProviderError(
                f"bedrock: the client could not start: {secrets_masked(str(exc))}"
            ) from None
        self._base_url = str(self._client.meta.endpoint_url)
        self.endpoint = endpoint_of(self.base_url)
        # Converse names no model in its answer: the codec is told the one asked.
        self._codec = codec_for(
            "bedrock", Target(caps=capabilities, endpoint=self.endpoint, model=model)
        )
        model_shapes = self._client.meta.service_model
        self._shapes = {
            stream: model_shapes.operation_model(
                "ConverseStream" if stream else "Converse"
            ).input_shape
            for stream in (False, True)
        }

    def complete(self, request: Request, on_text: Callable[[str], None] | None = None) -> Response:
        """Send `request` and return the whole answer, or raise `ProviderError`.

        The answer's `downgrades` are those of the one encode that was sent.
        """
        request = self.addressed(request)
        encoded = self.encode(request)
        params = sdk_params(encoded.body, request.model, self._shapes[self.stream])
        response = sending(
            lambda: send_whole(
                lambda: self._attempt(params, request.model, on_text),
                max_retries=self.max_retries,
                retry_delay=self.retry_delay,
            ),
            (),
        )
        # A structured answer came as the forced call of its schema's tool: its text again.
        response = structured.answered(response, request.output_schema)
        return reported(answered(response, request), encoded.downgrades)

    def _attempt(
        self, params: dict[str, Any], model: str, on_text: Callable[[str], None] | None
    ) -> Response:
        from botocore import exceptions

        where = f"bedrock at {mask(self.base_url)} (model {model})"
        wire = self._codec.for_model(model)
        try:
            if not self.stream:
                answer = self._client.converse(**params)
                return wire.decode(wire_json(answer))
            decoder = wire.stream_decoder()
            answer = self._client.converse_stream(**params)
            for event in answer["stream"]:
                text = decoder.feed(wire_json(event))
                if text and on_text is not None:
                    on_text(text)
            return decoder.response()
        except exceptions.ClientError as exc:
            error = _client_error(where, exc)
            if error.retryable and isinstance(exc, exceptions.EventStreamError):
                raise Broken(error) from exc  # mid-stream: the SDK's retries are past
            raise error from exc
        except (exceptions.NoCredentialsError, exceptions.PartialCredentialsError) as exc:
            raise _no_credentials(where, exc) from None
        except exceptions.ParamValidationError as exc:
            raise ProviderError(f"{where}: the SDK refused the request: {shown(str(exc))}") from exc
        except (exceptions.ReadTimeoutError, exceptions.ConnectTimeoutError) as exc:
            raise Broken(
                ProviderError(
                    f"{where}: no answer within {self.timeout:g} s ({exc})",
                    kind="timeout",
                    retryable=True,
                )
            ) from exc
        except (exceptions.HTTPClientError, exceptions.ResponseStreamingError) as exc:
            raise Broken(
                ProviderError(
                    f"{where}: the connection failed: {shown(str(exc))}",
                    kind="connection_error",
                    retryable=True,
                )
            ) from exc
        except exceptions.BotoCoreError as exc:
            raise ProviderError(f"{where}: {type(exc).__name__}: {exc}") from exc
        except ProviderError as exc:
            error = placed(where, exc)
            if exc.retryable:
                raise Broken(error) from exc
            raise error from exc

    def list_models(self) -> list[ModelInfo]:
        """The foundation models of this region that answer in text (`ListFoundationModels`).

        Asked of the `bedrock` control plane with this backend's region,
        credentials and retry settings. Some models are served on demand
        only through a cross-region inference profile (a `us.` or `eu.`
        prefix on the id), which this list does not hold.
        """
        import boto3
        from botocore import exceptions

        where = f"bedrock in {self.region}: listing models"
        try:
            control = boto3.session.Session().client(
                "bedrock", endpoint_url=self._control_url, config=self._config
            )
            answer = control.list_foundation_models(byOutputModality="TEXT")
        except exceptions.ClientError as exc:
            raise _client_error(where, exc) from exc
        except (exceptions.NoCredentialsError, exceptions.PartialCredentialsError) as exc:
            raise _no_credentials(where, exc) from None
        except exceptions.HTTPClientError as exc:
            raise ProviderError(
                f"{where}: cannot connect: {shown(secrets_masked(str(exc)))}",
                kind="connection_error",
                retryable=True,
            ) from exc
        except exceptions.BotoCoreError as exc:
            raise ProviderError(f"{where}: {type(exc).__name__}: {exc}") from exc
        summaries = answer.get("modelSummaries")
        entries = summaries if isinstance(summaries, list) else []
        return [info for info in map(bedrock_model, entries) if info is not None]


def bedrock_model(entry: Any) -> ModelInfo | None:
    """One `FoundationModelSummary` of Bedrock's `ListFoundationModels` answer."""
    if not isinstance(entry, Mapping):
        return None
    return model_info(
        entry.get("modelId"), name=entry.get("modelName"), owner=entry.get("providerName")
    )


def _no_credentials(where: str, exc: Exception) -> ProviderError:
    return ProviderError(
        f"{where}: no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
        "AWS_PROFILE, or a Bedrock API key in AWS_BEARER_TOKEN_BEDROCK "
        f"({type(exc).__name__})",
        kind="authentication_error",
    )


def _client_error(where: str, exc: Any) -> ProviderError:
    """A botocore `ClientError` (an HTTP error, or an exception event mid-stream) as ours."""
    response = exc.response if isinstance(exc.response, Mapping) else {}
    error = response.get("Error") or {}
    code = error.get("Code") if isinstance(error.get("Code"), str) else None
    message = error.get("Message")
    if not isinstance(message, str) or not message:
        message = str(exc)
    status = (response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
    status = status if isinstance(status, int) and status >= 400 else None
    retries = (response.get("ResponseMetadata") or {}).get("RetryAttempts") or 0
    text = shown(message)
    if retries:
        text = f"{text} (after {retries} {'retry' if retries == 1 else 'retries'})"
    return wire_error(f"{where}: {code + ': ' if code else ''}{text}", status=status, kind=code)


def _region_of(base_url: str | None) -> str | None:
    if not base_url:
        return None
    match = _REGION_HOST.search(endpoint_of(base_url))
    return match.group(1) if match else None


def sdk_params(body: Mapping[str, Any], model: str, shape: Any) -> dict[str, Any]:
    """The codec's JSON body as boto3's `converse` takes it: `modelId`, blobs as bytes.

    `shape` is the operation's input shape from botocore's service model, so
    the blob fields are the ones the service model names (image, document
    and video bytes, redacted reasoning, in a result or anywhere a native
    block put one), not a list kept here. What botocore's REST-JSON
    serializer writes for these params is the codec's body again.
    """
    params = {"modelId": model, **body}
    messages = shape.members["messages"]
    params["messages"] = _blobs_as_bytes(body["messages"], messages)
    return params


def _blobs_as_bytes(value: Any, shape: Any) -> Any:
    kind = shape.type_name
    if kind == "blob":
        return base64.b64decode(value) if isinstance(value, str) else value
    if kind == "structure" and isinstance(value, Mapping):
        if shape.metadata.get("document"):
            return value
        members = shape.members
        return {
            key: _blobs_as_bytes(item, members[key]) if key in members else item
            for key, item in value.items()
        }
    if kind == "list" and isinstance(value, list | tuple):
        member = shape.member
        return [_blobs_as_bytes(item, member) for item in value]
    return value


def wire_json(answer: Any) -> Any:
    """An SDK answer or stream event as the wire's JSON: bytes as base64, SDK metadata left out."""
    if isinstance(answer, Mapping):
        return {key: wire_json(value) for key, value in answer.items() if key != "ResponseMetadata"}
    if isinstance(answer, list | tuple):
        return [wire_json(item) for item in answer]
    if isinstance(answer, bytes | bytearray):
        return base64.b64encode(answer).decode("ascii")
    return answer
