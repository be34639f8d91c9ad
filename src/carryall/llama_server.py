"""Talking to a llama-server: its `/props`, what its model can do, and the model's name.

One reading for the `llama-server` backend and the local supervisor alike,
so both ask the same question the same way and fail with the same error.
The HTTP client is imported when a server is asked, not with this module.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from carryall.errors import ProviderError
from carryall.providers import Capabilities

if TYPE_CHECKING:
    import httpx2

__all__ = ["capabilities_from_props", "context_from_props", "model_from_props", "read_props"]


def read_props(
    root: str, *, timeout: float = 10.0, client: httpx2.Client | None = None
) -> dict[str, Any]:
    """The `/props` object of the llama-server at `root` (its URL without `/v1`).

    `client`, when given, is used as it is (its own base URL and timeout);
    otherwise one request is made with `timeout`. A server that cannot be
    reached, answers an error or answers something that is not a JSON object
    is a `ProviderError` naming the URL.
    """
    import httpx2

    url = f"{root}/props"
    try:
        answer = client.get("/props") if client is not None else httpx2.get(url, timeout=timeout)
        answer.raise_for_status()
        props = answer.json()
    except httpx2.HTTPStatusError as exc:
        raise ProviderError(
            f"llama-server at {root}: {url} answered HTTP {exc.response.status_code}; "
            "is this a llama-server?",
            status=exc.response.status_code,
        ) from exc
    except httpx2.HTTPError as exc:
        raise ProviderError(
            f"llama-server at {root}: cannot read {url}: {exc or type(exc).__name__}",
            kind="connection_error",
            retryable=True,
        ) from exc
    except ValueError as exc:
        raise ProviderError(f"llama-server at {root}: {url} did not answer JSON") from exc
    if not isinstance(props, dict):
        raise ProviderError(f"llama-server at {root}: {url} did not answer a JSON object")
    return props


def capabilities_from_props(props: Mapping[str, Any]) -> Capabilities:
    """What the model a llama-server serves can do, from its `/props`.

    Vision only when `modalities.vision` is true (without a projector an
    image is a 500), native tools only when the chat template says
    `supports_tools`; anything missing or of the wrong type reads as "no",
    the answer that degrades to text instead of failing. llama-server
    returns no reasoning a codec can sign, so `thinking` is False.
    """
    modalities = props.get("modalities")
    template = props.get("chat_template_caps")
    return Capabilities(
        vision=isinstance(modalities, Mapping) and modalities.get("vision") is True,
        native_tools=isinstance(template, Mapping) and template.get("supports_tools") is True,
        thinking=False,
    )


def context_from_props(props: Mapping[str, Any]) -> int | None:
    """The context window of one request slot in tokens (`n_ctx`), None when not reported."""
    settings = props.get("default_generation_settings")
    n_ctx = settings.get("n_ctx") if isinstance(settings, Mapping) else None
    return n_ctx if isinstance(n_ctx, int) and not isinstance(n_ctx, bool) and n_ctx > 0 else None


def model_from_props(props: Mapping[str, Any]) -> str | None:
    """The served model's name: its alias, else its file name without the folders.

    A server started without `--alias` reports its model path as the alias;
    that reads as the file name too, not as a path to someone's home folder.
    """
    alias = props.get("model_alias")
    path = props.get("model_path")
    if isinstance(alias, str) and alias and alias != path:
        return alias
    if isinstance(path, str) and path:
        return path.replace("\\", "/").rsplit("/", 1)[-1]
    return None
