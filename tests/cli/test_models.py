"""`carryall models`: each backend's own model list, read through its SDK, against a server.

The local backend is the real embedded llama-server; every other wire is a
scripted server (`tests.support.model_lists.ModelListServer`, or
`ScriptedServer` for llama-server's `/props`) answering the list in the
shape the provider's API reference and SDK types give.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from carryall._commands.models import _lines
from carryall.backends import list_models
from carryall.cli import app
from carryall.errors import ProviderError
from carryall.transport import ModelInfo, model_info
from tests.support.local import LOCAL_STATUS, local_env
from tests.support.model_lists import ModelListServer
from tests.support.scripted import ScriptedServer


def _models(*args: str) -> Any:
    return CliRunner().invoke(app, ["models", *args], env={"COLUMNS": "80"})


def _listed(*args: str) -> list[dict[str, Any]]:
    result = _models(*args, "--json")
    assert result.exit_code == 0, result.stderr
    listed: list[dict[str, Any]] = json.loads(result.stdout)
    return listed


OPENAI_LIST = {
    "object": "list",
    "data": [
        {"id": "gpt-4.1-mini", "object": "model", "created": 1744318173, "owned_by": "system"},
        {"id": "o4-mini", "object": "model", "created": 1744225351, "owned_by": "system"},
    ],
}


@pytest.mark.parametrize("backend", ["openai", "responses"])
def test_openai_wires_list_slash_models_with_the_key(
    home: Path, monkeypatch: pytest.MonkeyPatch, backend: str
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-models-0123456789")
    with ModelListServer({"/v1/models": (200, OPENAI_LIST)}) as server:
        listed = _listed("-b", backend, "--base-url", f"{server.url}/v1")
    assert [m["id"] for m in listed] == ["gpt-4.1-mini", "o4-mini"]
    assert listed[0]["owner"] == "system"
    assert listed[0]["created"].startswith("2025-04-10")
    # One request: the list itself, with the key, and no lookup of a model to open with.
    [(path, headers)] = server.seen
    assert path == "/v1/models"
    assert headers["authorization"] == "Bearer sk-test-models-0123456789"


ANTHROPIC_LIST = {
    "data": [
        {
            "type": "model",
            "id": "claude-sonnet-4-6",
            "display_name": "Claude Sonnet 4.6",
            "created_at": "2026-02-17T00:00:00Z",
            "max_input_tokens": 1000000,
            "max_tokens": 64000,
        },
        {
            "type": "model",
            "id": "claude-haiku-4-5-20251001",
            "display_name": "Claude Haiku 4.5",
            "created_at": "2025-10-15T00:00:00Z",
        },
    ],
    "has_more": False,
    "first_id": "claude-sonnet-4-6",
    "last_id": "claude-haiku-4-5-20251001",
}


def test_anthropic_lists_its_models_with_names_and_limits(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-models")
    with ModelListServer({"/v1/models": (200, ANTHROPIC_LIST)}) as server:
        listed = _listed("-b", "anthropic", "--base-url", server.url)
        shown = _models("-b", "anthropic", "--base-url", server.url)
    assert [m["id"] for m in listed] == ["claude-sonnet-4-6", "claude-haiku-4-5-20251001"]
    assert listed[0]["name"] == "Claude Sonnet 4.6"
    assert (listed[0]["context_window"], listed[0]["max_output_tokens"]) == (1000000, 64000)
    assert "context_window" not in listed[1]  # not said, so not guessed
    # The SDK's own authentication header, whichever one this SDK version sends.
    headers = server.seen[0][1]
    sent = {headers.get("x-api-key"), headers.get("authorization", "").removeprefix("Bearer ")}
    assert "sk-ant-test-models" in sent
    assert shown.exit_code == 0, shown.stderr
    first = shown.stdout.splitlines()[0].split()
    assert first == ["claude-sonnet-4-6", "1,000,000", "Claude", "Sonnet", "4.6"]


GEMINI_LIST = {
    "models": [
        {
            "name": "models/gemini-2.5-flash",
            "displayName": "Gemini 2.5 Flash",
            "inputTokenLimit": 1048576,
            "outputTokenLimit": 65536,
            "supportedGenerationMethods": ["generateContent", "countTokens"],
        },
        {
            "name": "models/text-embedding-004",
            "displayName": "Text Embedding 004",
            "inputTokenLimit": 2048,
            "supportedGenerationMethods": ["embedContent"],
        },
    ]
}


def test_gemini_lists_the_models_that_converse_by_the_name_model_takes(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("google.genai")
    monkeypatch.setenv("GEMINI_API_KEY", "gemini-test-models")
    # The API version in the path is the SDK's choice.
    routes = {"/v1beta/models": (200, GEMINI_LIST), "/v1/models": (200, GEMINI_LIST)}
    with ModelListServer(routes) as server:
        listed = _listed("-b", "gemini", "--base-url", server.url)
    assert listed == [
        {
            "id": "gemini-2.5-flash",
            "name": "Gemini 2.5 Flash",
            "owner": "google",
            "context_window": 1048576,
            "max_output_tokens": 65536,
        }
    ]
    assert server.seen[0][1]["x-goog-api-key"] == "gemini-test-models"


BEDROCK_LIST = {
    "modelSummaries": [
        {
            "modelArn": "arn:aws:bedrock:us-east-1::foundation-model/"
            "anthropic.claude-sonnet-4-5-20250929-v1:0",
            "modelId": "anthropic.claude-sonnet-4-5-20250929-v1:0",
            "modelName": "Claude Sonnet 4.5",
            "providerName": "Anthropic",
            "inputModalities": ["TEXT", "IMAGE"],
            "outputModalities": ["TEXT"],
            "responseStreamingSupported": True,
            "customizationsSupported": [],
            "inferenceTypesSupported": ["INFERENCE_PROFILE"],
            "modelLifecycle": {"status": "ACTIVE"},
        }
    ]
}


def test_bedrock_lists_foundation_models_from_the_control_plane(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("boto3")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLEMODELS")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret-for-a-scripted-server")
    monkeypatch.setenv("AWS_REGION", "eu-west-3")
    with ModelListServer({"/foundation-models": (200, BEDROCK_LIST)}) as server:
        listed = _listed("-b", "bedrock", "--base-url", server.url)
    assert listed == [
        {
            "id": "anthropic.claude-sonnet-4-5-20250929-v1:0",
            "name": "Claude Sonnet 4.5",
            "owner": "Anthropic",
        }
    ]
    path, headers = server.seen[0]
    assert path == "/foundation-models?byOutputModality=TEXT"
    # Signed for the control plane, in the region the backend uses.
    assert "/eu-west-3/bedrock/aws4_request" in headers["authorization"]


def test_llama_server_names_its_model_as_a_run_does_with_the_context_of_props(
    home: Path,
) -> None:
    path = "/models/qwen3-4b-Q4_K_M.gguf"
    props = {
        "model_path": path,
        "model_alias": path,
        "default_generation_settings": {"n_ctx": 8192},
        "modalities": {"vision": False},
    }
    models = {"object": "list", "data": [{"id": path, "object": "model", "owned_by": "llamacpp"}]}
    with ScriptedServer([], props=props, models=models) as server:
        listed = _listed("-b", "llama-server", "--base-url", server.url)
    assert listed == [{"id": "qwen3-4b-Q4_K_M.gguf", "owner": "llamacpp", "context_window": 8192}]


# -- failures -------------------------------------------------------------------------


def test_a_missing_key_is_one_line_naming_the_variable(home: Path) -> None:
    result = _models("-b", "anthropic")
    assert result.exit_code == 1
    assert result.stderr.startswith("error: [authentication_error]")
    assert "set ANTHROPIC_API_KEY" in result.stderr


def test_an_unreachable_llama_server_says_where_it_looked(home: Path) -> None:
    result = _models("-b", "llama-server", "--base-url", "http://127.0.0.1:9")
    assert result.exit_code == 1
    assert "cannot read http://127.0.0.1:9/props" in " ".join(result.stderr.split())


def test_a_refused_key_reads_as_the_servers_answer_with_the_key_masked(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = "sk-proj-refused0123456789abcdef"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    refusal = {
        "error": {"message": f"Incorrect API key provided: {key}", "type": "invalid_request_error"}
    }
    with (
        ModelListServer({"/v1/models": (401, refusal)}) as server,
        pytest.raises(ProviderError) as caught,
    ):
        list_models("openai", base_url=f"{server.url}/v1")
    assert caught.value.status == 401 and not caught.value.retryable
    assert "listing models" in str(caught.value)
    assert key not in str(caught.value)


def test_an_unreachable_openai_server_is_a_connection_error(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with pytest.raises(ProviderError) as caught:
        list_models("openai", base_url="http://127.0.0.1:9/v1", timeout=5.0)
    assert caught.value.kind == "connection_error"


# -- what a list entry may hold ---------------------------------------------------------


def test_a_list_entry_keeps_only_values_of_their_type() -> None:
    assert model_info(None) is None
    assert model_info("") is None
    info = model_info("m", name=3, owner="", created=1_700_000_000, context_window=True)
    assert info == ModelInfo(id="m", created="2023-11-14T22:13:20+00:00")
    assert model_info("m", created=10**20) == ModelInfo(id="m")


def test_lines_keep_the_name_whole_and_cut_only_the_description() -> None:
    long = ModelInfo(id="x" * 60, name="a display name that does not fit", context_window=8192)
    short = ModelInfo(id="tiny", owner="someone")
    lines = _lines([long, short], 80)
    assert all(len(line) <= 80 for line in lines)
    assert lines[0].startswith("x" * 60) and lines[0].endswith("8,192  a displ")
    assert lines[1].split() == ["tiny", "-", "someone"]


# -- the real local server ----------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.skipif(not LOCAL_STATUS.ready, reason="the local backend is not installed")
def test_local_lists_the_embedded_model_with_its_context(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "carryall", "models", "-b", "local", "--json"],
        env=local_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    [model] = json.loads(done.stdout)
    assert model["id"] == Path(str(LOCAL_STATUS.model)).name
    assert model["context_window"] > 0
