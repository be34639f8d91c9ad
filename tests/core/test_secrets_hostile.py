"""Issue 18, secrets: a key a server echoes, or a password in a base URL, never reaches a person.

The server is real (127.0.0.1) and answers 401 with the key it was sent in
its message, as OpenAI-compatible proxies do; the CLI runs end to end.
"""

from __future__ import annotations

import base64
import http.server
import io
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console
from typer.testing import CliRunner

from carryall._commands._output import print_error
from carryall._secrets import MASK, mask
from carryall.backends import open_backend
from carryall.blocks import Message
from carryall.cli import app
from carryall.config import Config
from carryall.errors import ProviderError
from carryall.providers import Request

SHAPED_KEY = "sk-proj-Zx81kQ0vL3mN5pR7tW9yB2dF4hJ6"
CUSTOM_KEY = "corp-gateway-7f3a9c1e5b2d"
PASSWORD = "hunter2-very-secret"


class _EchoKey(http.server.BaseHTTPRequestHandler):
    """Answers every request 401, quoting the Authorization header it got."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        sent = self.headers.get("Authorization", "")
        key = sent.removeprefix("Bearer ")
        body = json.dumps(
            {
                "error": {
                    "message": f"Incorrect API key provided: {key}. Header was {sent!r}.",
                    "type": "invalid_request_error",
                    "code": "invalid_api_key",
                }
            }
        ).encode()
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def echo_server() -> Iterator[int]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _EchoKey)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(httpd.server_address[1])
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


def _refusal(base_url: str, key: str) -> ProviderError:
    backend = open_backend(
        "openai", model="m", base_url=base_url, api_key=key, config=Config(), max_retries=0
    )
    try:
        with pytest.raises(ProviderError) as refused:
            backend.complete(Request(model="m", messages=[Message.user("hi")]))
    finally:
        backend.close()
    return refused.value


@pytest.mark.parametrize("key", [SHAPED_KEY, CUSTOM_KEY])
def test_a_401_that_echoes_the_key_does_not_show_it(echo_server: int, key: str) -> None:
    error = _refusal(f"http://127.0.0.1:{echo_server}/v1", key)
    assert error.status == 401
    assert "Incorrect API key provided" in error.message
    assert key not in error.message
    assert key[8:-4] not in error.message
    assert MASK in error.message


def test_a_password_in_the_base_url_is_never_in_the_error(echo_server: int) -> None:
    error = _refusal(f"http://alice:{PASSWORD}@127.0.0.1:{echo_server}/v1", "k" * 12)
    assert PASSWORD not in error.message
    # The client sends URL userinfo as Basic auth, which the server echoes too.
    assert base64.b64encode(f"alice:{PASSWORD}".encode()).decode() not in error.message
    assert f"http://{MASK}@127.0.0.1:{echo_server}/v1" in error.message


def test_the_cli_error_line_shows_neither_key_nor_password(
    echo_server: int, monkeypatch: pytest.MonkeyPatch, home: Any
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", CUSTOM_KEY)
    result = CliRunner().invoke(
        app,
        [
            "run",
            "--backend",
            "openai",
            "--model",
            "m",
            "--base-url",
            f"http://alice:{PASSWORD}@127.0.0.1:{echo_server}/v1",
            "hello",
        ],
        catch_exceptions=False,
    )
    assert result.exit_code != 0
    assert "error:" in result.stderr
    assert CUSTOM_KEY not in result.stderr + result.stdout
    assert PASSWORD not in result.stderr + result.stdout


def test_print_error_masks_key_shapes_and_userinfo_whatever_raised_it() -> None:
    out = io.StringIO()
    print_error(
        "anthropic at https://bob:pw123456@proxy.example/v1: bad key "
        "sk-ant-api03-AbCdEfGhIjKlMnOp (Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.x.y)\n"
        "log tail: x-api-key: Zq9Zq9Zq9Zq9",
        Console(file=out, width=400, highlight=False),
    )
    text = out.getvalue()
    for secret in ("pw123456", "AbCdEfGhIjKlMnOp", "eyJhbGciOiJIUzI1NiJ9", "Zq9Zq9Zq9Zq9"):
        assert secret not in text
    assert f"https://{MASK}@proxy.example/v1" in text
    assert f"sk-ant-{MASK}" in text


@given(
    st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-", min_size=8)
)
def test_a_configured_key_is_masked_wherever_it_appears(key: str) -> None:
    text = f"the server said: {key}! and again ({key})"
    assert key not in mask(text, [key])
