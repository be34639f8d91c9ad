"""The Gemini transport (issue 13): the real `google-genai` SDK against a scripted local server.

The server (from `test_transport_faults`) answers in order from a script;
what is pinned is the whole path: the codec's body through the SDK's own
types to `:generateContent` or `:streamGenerateContent`, the answer dumped
back and decoded, errors as `ProviderError` with the server's status and
message, and a missing extra as one line naming the `pip install`.
"""

from __future__ import annotations

import builtins
import json
from typing import Any

import pytest

from carryall.backends import open_backend
from carryall.blocks import Message, Text, ToolUse
from carryall.config import Config
from carryall.errors import ProviderError
from carryall.providers import Request
from tests.support.goldens import TOOLS
from tests.support.scripted import Reply, served

pytest.importorskip("google.genai")

ANSWER = {
    "candidates": [
        {
            "content": {
                "role": "model",
                "parts": [
                    {"text": "Hello"},
                    {"functionCall": {"name": "read_file", "args": {"path": "a"}}},
                ],
            },
            "finishReason": "STOP",
        }
    ],
    "usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": 4},
    "modelVersion": "gemini-2.5-flash",
}


def hello() -> Request:
    return Request(model="", messages=(Message.user("Say hello"),), tools=TOOLS, max_tokens=64)


def backend(url: str, **options: Any) -> Any:
    return open_backend(
        "gemini",
        base_url=url,
        api_key="k",
        max_retries=0,
        retry_delay=0.01,
        config=Config(),
        **options,
    )


def test_a_whole_answer_comes_back_through_the_sdk() -> None:
    with served([Reply(body=ANSWER)]) as server:
        gemini = backend(server.url, stream=False)
        response = gemini.complete(hello())
        gemini.close()
    assert response.message.content == (
        Text("Hello"),
        ToolUse("call_1", "read_file", {"path": "a"}),
    )
    assert (response.stop_reason, response.usage.input_tokens) == ("tool_use", 9)
    (sent,) = server.requests
    assert sent["path"].endswith("/models/gemini-2.5-flash:generateContent")
    assert sent["body"]["contents"] == [{"role": "user", "parts": [{"text": "Say hello"}]}]
    assert sent["body"]["tools"][0]["functionDeclarations"][0]["name"] == "read_file"


def test_a_stream_comes_back_whole_and_its_text_streams() -> None:
    first = {"candidates": [{"content": {"role": "model", "parts": [{"text": "Hel"}]}}]}
    sse = "".join(f"data: {json.dumps(c)}\r\n\r\n" for c in (first, ANSWER))
    shown: list[str] = []
    with served([Reply(sse=sse)]) as server:
        gemini = backend(server.url)
        response = gemini.complete(hello(), on_text=shown.append)
        gemini.close()
    assert response.message.text() == "HelHello"
    assert "".join(shown) == "HelHello"
    assert ":streamGenerateContent" in server.requests[0]["path"]


def test_a_bad_request_names_status_and_message() -> None:
    error = {
        "error": {
            "code": 400,
            "message": "API key not valid. Please pass a valid API key.",
            "status": "INVALID_ARGUMENT",
        }
    }
    with served([Reply(status=400, body=error)]) as server, pytest.raises(ProviderError) as caught:
        backend(server.url, stream=False).complete(hello())
    assert caught.value.status == 400
    assert caught.value.kind == "INVALID_ARGUMENT"
    assert "API key not valid" in str(caught.value)
    assert len(server.requests) == 1


def test_a_missing_key_is_one_clear_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    with pytest.raises(ProviderError, match="GEMINI_API_KEY"):
        open_backend("gemini", config=Config())


def test_a_missing_extra_says_which_pip_install_fixes_it(monkeypatch: pytest.MonkeyPatch) -> None:
    real = builtins.__import__

    def no_google(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "google" or name.startswith("google."):
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_google)
    with pytest.raises(ProviderError, match=r"pip install 'carryall\[gemini\]'"):
        open_backend("gemini", api_key="k", config=Config())
