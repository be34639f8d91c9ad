"""Every configured key is masked in every error path, on every backend: the terminal and the
session's `failed` note.

The servers are scripted (127.0.0.1) and answer with an error that quotes the
key they were sent, as Gemini ("API key not valid: AIza...") and AWS gateways
do; the CLI runs end to end, so the error line and the kept prompt's note are
both what a person would see.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from carryall import _secrets
from carryall._secrets import MASK, mask
from carryall.cli import app
from carryall.sessions import Store
from tests.support.bedrock_peer import CREDENTIALS, Reply, converse_server
from tests.support.scripted import Reply as HttpReply
from tests.support.scripted import served

GOOGLE_KEY = "AIza" + "SyD4kP9zR2tYw8eN1mJc6aH3sD5gU0iOq7X"
BEDROCK_KEY = "ABSK" + "QmVkcm9ja0FQSUtleS1sZWFrLWF0LTEyMzQ1Njc4OTAxMjpzZWNyZXQ="
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY"
CUSTOM_KEY = "corp-gateway-7f3a9c1e5b2d"


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1: botocore sends a Bedrock API key over HTTPS only."""
    if shutil.which("openssl") is None:
        pytest.skip("no openssl command to make a test certificate")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


def _run(*args: str) -> Any:
    return CliRunner().invoke(app, ["run", *args, "hello"], catch_exceptions=False)


def _failed_note() -> str:
    [info] = Store().list()
    assert info.failed is not None
    return info.failed


@pytest.mark.parametrize("key", [GOOGLE_KEY, CUSTOM_KEY])
def test_a_gemini_error_that_echoes_the_key_shows_it_nowhere(
    home: Path, monkeypatch: pytest.MonkeyPatch, key: str
) -> None:
    pytest.importorskip("google.genai")
    monkeypatch.setenv("GEMINI_API_KEY", key)
    error = {
        "error": {
            "code": 400,
            "message": f"API key not valid: {key}. Please pass a valid API key.",
            "status": "INVALID_ARGUMENT",
        }
    }
    with served([HttpReply(status=400, body=error)]) as server:
        result = _run("-b", "gemini", "-m", "gemini-2.5-flash", "--base-url", server.url)
    assert result.exit_code != 0
    assert "API key not valid" in result.stderr
    assert key not in result.stdout + result.stderr
    note = _failed_note()
    assert "API key not valid" in note
    assert key not in note


@pytest.mark.parametrize(
    ("variable", "key"),
    [("AWS_BEARER_TOKEN_BEDROCK", BEDROCK_KEY), ("AWS_SECRET_ACCESS_KEY", AWS_SECRET)],
)
def test_a_bedrock_error_that_echoes_a_credential_shows_it_nowhere(
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
    certificate: tuple[Path, Path],
    variable: str,
    key: str,
) -> None:
    pytest.importorskip("boto3")
    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv(variable, key)
    monkeypatch.setenv("AWS_CA_BUNDLE", str(certificate[0]))
    denied = Reply(
        403,
        {"__type": "AccessDeniedException", "message": f"The credential {key} is not valid."},
    )
    with converse_server([denied], certificate) as server:
        result = _run("-b", "bedrock", "--base-url", server.url)
    assert result.exit_code != 0
    assert "is not valid" in result.stderr
    assert key not in result.stdout + result.stderr
    note = _failed_note()
    assert "AccessDeniedException" in note
    assert key not in note


def test_run_json_reports_a_failure_without_the_key(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("google.genai")
    monkeypatch.setenv("GEMINI_API_KEY", CUSTOM_KEY)
    error = {"error": {"code": 403, "message": f"denied {CUSTOM_KEY}", "status": "DENIED"}}
    with served([HttpReply(status=403, body=error)]) as server:
        result = _run("-b", "gemini", "-m", "g", "--base-url", server.url, "--json")
    assert result.exit_code != 0
    assert CUSTOM_KEY not in result.stdout + result.stderr
    if result.stdout.strip():
        json.loads(result.stdout)  # still a JSON document


@pytest.mark.parametrize(
    "key",
    [
        GOOGLE_KEY,
        BEDROCK_KEY,
        "AKIAZ7Q3MX5LP2RT8WKN",
        "ASIAZ7Q3MX5LP2RT8WKN",
        "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
        "xoxb-1234567890-abcdefghij",
        "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz012345",
    ],
)
def test_each_key_shape_is_masked_keeping_its_public_prefix(key: str) -> None:
    shown = mask(f"denied ({key}), url https://x.example/v1?key={key}&alt=sse")
    assert key not in shown
    assert f"{key[:3]}" in shown and MASK in shown


def test_words_that_merely_start_like_a_key_are_left_alone() -> None:
    text = "Asiatic ASIAN_COUNTRIES AKIA short hf_x ghp_short AIzaShort"
    assert mask(text) == text


def test_every_backend_variable_and_any_api_key_variable_is_a_configured_key(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    values = {
        "ANTHROPIC_API_KEY": "anthropic-custom-1",
        "OPENAI_API_KEY": "openai-custom-2",
        "GEMINI_API_KEY": "gemini-custom-3",
        "GOOGLE_API_KEY": "google-custom-4",
        "AWS_BEARER_TOKEN_BEDROCK": "bedrock-custom-5",
        "AWS_SECRET_ACCESS_KEY": "aws-secret-custom-6",
        "AWS_SESSION_TOKEN": "aws-session-custom-7",
        "OPENROUTER_API_KEY": "openrouter-custom-8",
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    (home / "config.toml").write_text(
        '[mcpServers.search]\nurl = "https://mcp.example/mcp"\n'
        'headers = { Authorization = "Bearer mcp-header-token-9" }\n'
        '[mcpServers.files]\ncommand = "srv"\nenv = { FILES_API_KEY = "mcp-env-key-10" }\n'
    )
    secrets = [*values.values(), "mcp-header-token-9", "mcp-env-key-10"]
    assert set(secrets) <= set(_secrets.configured_keys())
    text = _secrets.masked("the server said " + " / ".join(secrets))
    for secret in secrets:
        assert secret not in text


def test_a_configured_key_is_masked_as_a_url_or_json_quotes_it_too() -> None:
    key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY"
    echoed = "wJalrXUtnFEMI%2FK7MDENG%2FbPxRfiCYzEXAMPLEKEY and wJalrXUtnFEMI\\/K7MDENG\\/bPx"
    text = mask(f"{echoed}RfiCYzEXAMPLEKEY and {key}", [key])
    assert text == f"{MASK} and {MASK} and {MASK}"
