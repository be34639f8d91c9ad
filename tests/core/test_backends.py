"""Choosing and opening backends: config, defaults, `/props`, codec choice, SSE parsing.

The transport's fault behaviour is in `test_transport_faults.py`; its
scripted server is reused here to see what each backend puts on the wire.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import carryall.local
from carryall.backends import (
    DEFAULT_MODELS,
    AnthropicBackend,
    OpenAIBackend,
    ServerSentEvent,
    default_backend_name,
    iter_sse,
    open_backend,
)
from carryall.blocks import Image, Message, Text, ToolUse
from carryall.config import BackendSettings, Config, config_path, load_config
from carryall.errors import CarryallError, LocalBackendError, ProviderError
from carryall.llama_server import capabilities_from_props, model_from_props, read_props
from carryall.providers import Capabilities, Request, ToolSpec
from carryall.providers import anthropic as anthropic_codec
from carryall.providers import openai as openai_codec
from tests.support.goldens import GOLDENS, SHOT, TOOLS
from tests.support.scripted import OPENAI, Reply, ScriptedServer

WEATHER = ToolSpec(
    "get_weather",
    "The weather at a place.",
    {"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]},
)
PROPS = {
    "model_alias": "SmolLM2-135M-Instruct.Q4_1.gguf",
    "model_path": "/models/SmolLM2-135M-Instruct.Q4_1.gguf",
    "modalities": {"vision": False, "audio": False},
    "chat_template_caps": {"supports_tools": True, "supports_tool_calls": True},
}


@pytest.fixture(autouse=True)
def no_keys_or_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Each test starts with no API key and an empty carryall home, whatever the machine has."""
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CARRYALL_HOME", str(tmp_path))


def write_config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def ask(*blocks: Text | Image, tools: tuple[ToolSpec, ...] = (), thinking: bool = False) -> Request:
    return Request(
        model="",
        messages=(Message("user", blocks or (Text("Hi"),)),),
        tools=tools,
        thinking=thinking,
    )


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


# -- server-sent events --------------------------------------------------------------


def test_sse_joins_data_lines_and_drops_one_leading_space() -> None:
    lines = ["event: message_start", "data:  two spaces", "data:none", "", ""]
    assert list(iter_sse(lines)) == [ServerSentEvent("message_start", " two spaces\nnone")]


def test_sse_comments_and_unknown_fields_are_ignored() -> None:
    lines = [": keep-alive", "id: 7", "retry: 10", "data: {}", "", ": bye", ""]
    assert list(iter_sse(lines)) == [ServerSentEvent(None, "{}")]


def test_sse_event_cut_off_by_the_end_of_the_stream_is_dropped() -> None:
    lines = ["data: whole", "", "event: content_block_delta", 'data: {"type":"cont']
    assert list(iter_sse(lines)) == [ServerSentEvent(None, "whole")]


def test_sse_event_with_empty_data_or_no_data_is_not_dispatched() -> None:
    assert list(iter_sse(["event: ping", "", "data:", "", "data: x", ""])) == [
        ServerSentEvent(None, "x")
    ]


def test_sse_event_name_does_not_leak_into_the_next_event() -> None:
    lines = ["event: error", "data: 1", "", "data: 2", ""]
    assert [e.event for e in iter_sse(lines)] == ["error", None]


_LINE_TEXT = st.text(st.characters(blacklist_characters="\r\n", blacklist_categories=["Cs"]))


@given(
    st.lists(
        st.tuples(
            st.none() | _LINE_TEXT.filter(bool),
            st.text(st.characters(blacklist_characters="\r", blacklist_categories=["Cs"])).filter(
                bool
            ),
        ),
        max_size=8,
    )
)
def test_sse_rendered_events_parse_back_as_they_were(events: list[tuple[str | None, str]]) -> None:
    lines: list[str] = []
    for name, data in events:
        if name is not None:
            lines.append(f"event: {name}")
        lines.extend(f"data: {part}" for part in data.split("\n"))
        lines.append("")
    assert list(iter_sse(lines)) == [ServerSentEvent(n, d) for n, d in events]


# -- llama-server's /props ---------------------------------------------------------------


def test_capabilities_come_from_modalities_and_the_chat_template() -> None:
    props = {"modalities": {"vision": True}, "chat_template_caps": {"supports_tools": True}}
    assert capabilities_from_props(props) == Capabilities(
        vision=True, native_tools=True, thinking=False
    )


@pytest.mark.parametrize(
    "props",
    [
        {},
        {"modalities": None, "chat_template_caps": None},
        {"modalities": {"vision": "true"}, "chat_template_caps": {"supports_tools": 1}},
        {"modalities": [True], "chat_template_caps": "supports_tools"},
        {"modalities": {"vision": False}, "chat_template_caps": {"supports_tools": False}},
    ],
)
def test_capabilities_missing_or_odd_in_props_read_as_no(props: dict[str, Any]) -> None:
    assert capabilities_from_props(props) == Capabilities(
        vision=False, native_tools=False, thinking=False
    )


def test_model_name_is_the_alias_else_the_file_name() -> None:
    assert model_from_props(PROPS) == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert model_from_props({"model_path": "C:\\models\\qwen.gguf"}) == "qwen.gguf"
    assert model_from_props({"model_alias": "", "model_path": 3}) is None


def test_unreachable_llama_server_is_a_provider_error_naming_the_url() -> None:
    root = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(ProviderError, match=f"cannot read {root}/props") as caught:
        read_props(root, timeout=2)
    assert caught.value.kind == "connection_error"


def test_props_that_are_not_an_object_are_a_provider_error() -> None:
    with (
        ScriptedServer([], props=["not", "an", "object"]) as server,
        pytest.raises(ProviderError, match="did not answer a JSON object"),
    ):
        read_props(server.url)


def test_a_server_without_props_is_a_provider_error() -> None:
    with (
        ScriptedServer([]) as server,
        pytest.raises(ProviderError, match="answered HTTP 404") as caught,
    ):
        read_props(server.url)
    assert caught.value.status == 404


# -- the config file ---------------------------------------------------------------------


def test_no_config_file_is_the_empty_config(tmp_path: Path) -> None:
    assert config_path() == tmp_path / "config.toml"
    assert load_config() == Config()


def test_config_file_is_read_from_carryall_home(tmp_path: Path) -> None:
    write_config(
        tmp_path,
        'backend = "llama-server"\nmodel = "qwen"\n'
        '[backends.llama-server]\nbase_url = "http://box:8080"\n'
        "[backends.openai]\nnative_tools = false\nvision = false\n",
    )
    config = load_config()
    assert config.backend == "llama-server"
    assert config.settings("llama-server") == BackendSettings(
        model="qwen", base_url="http://box:8080"
    )
    assert config.settings("openai") == BackendSettings(native_tools=False, vision=False)


def test_top_level_model_belongs_to_the_default_backend_only() -> None:
    config = Config(backend="anthropic", model="claude-x")
    assert config.settings("anthropic").model == "claude-x"
    assert config.settings("openai").model is None
    assert Config(model="any").settings("openai").model == "any"


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ('modle = "x"\n', "modle"),
        ('[backends.openai]\nbase_ulr = "x"\n', "base_ulr"),
        ("[backends.openai]\nvision = 1\n", "vision"),
        ('backend = "cohere"\n', "'cohere' is not one of"),
        ('[backends.ollama]\nmodel = "x"\n', "[backends.ollama] names no backend"),
        ("backend = \n", "not valid TOML"),
    ],
)
def test_a_broken_config_file_is_an_error_naming_the_file_and_key(
    tmp_path: Path, text: str, names: str
) -> None:
    path = write_config(tmp_path, text)
    with pytest.raises(CarryallError) as caught:
        load_config()
    assert str(path) in str(caught.value)
    assert names in str(caught.value)


# -- which backend by default ----------------------------------------------------------------


def test_default_backend_is_local_with_no_key_and_no_config() -> None:
    assert default_backend_name() == "local"


def test_default_backend_follows_the_keys_anthropic_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert default_backend_name() == "openai"
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    assert default_backend_name() == "anthropic"


def test_config_backend_beats_a_key_that_is_set(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    write_config(tmp_path, 'backend = "local"\n')
    assert default_backend_name() == "local"


# -- opening hosted backends -------------------------------------------------------------------


def test_unknown_backend_name_is_a_clear_error() -> None:
    with pytest.raises(ProviderError, match="unknown backend 'cohere': expected one of anthropic"):
        open_backend("cohere")


@pytest.mark.parametrize(
    ("name", "variable"), [("anthropic", "ANTHROPIC_API_KEY"), ("openai", "OPENAI_API_KEY")]
)
def test_hosted_backend_without_a_key_says_which_variable_to_set(name: str, variable: str) -> None:
    with pytest.raises(ProviderError, match=f"set {variable}") as caught:
        open_backend(name)
    assert caught.value.kind == "authentication_error"


def test_anthropic_backend_takes_its_key_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    backend = open_backend()
    assert isinstance(backend, AnthropicBackend)
    assert (backend.name, backend.model) == ("anthropic", DEFAULT_MODELS["anthropic"])
    assert backend.capabilities == Capabilities(vision=True, native_tools=True, thinking=True)
    assert backend.base_url == "https://api.anthropic.com"
    backend.close()


def test_anthropic_backend_has_no_prompt_mode(tmp_path: Path) -> None:
    write_config(tmp_path, "[backends.anthropic]\nnative_tools = false\n")
    with pytest.raises(ProviderError, match="no prompt mode"):
        open_backend("anthropic", api_key="test")


def test_openai_backend_takes_model_and_base_url_from_the_config(tmp_path: Path) -> None:
    write_config(
        tmp_path,
        'backend = "openai"\nmodel = "qwen3"\n[backends.openai]\nbase_url = "http://box:1234/v1"\n',
    )
    backend = open_backend()
    assert isinstance(backend, OpenAIBackend)
    assert (backend.name, backend.model, backend.base_url) == (
        "openai",
        "qwen3",
        "http://box:1234/v1",
    )


def test_arguments_beat_the_config(tmp_path: Path) -> None:
    write_config(tmp_path, '[backends.openai]\nmodel = "a"\nbase_url = "http://a/v1"\n')
    backend = open_backend("openai", model="b", base_url="http://b/v1")
    assert (backend.model, backend.base_url) == ("b", "http://b/v1")  # type: ignore[attr-defined]


def test_openai_compatible_server_with_one_model_needs_no_model_name() -> None:
    models = {"object": "list", "data": [{"id": "qwen3-4b", "object": "model", "owned_by": "me"}]}
    with ScriptedServer([Reply(sse=OPENAI.ok)], models=models) as server:
        backend = open_backend("openai", base_url=f"{server.url}/v1", config=Config())
        backend.complete(ask())
    assert backend.model == "qwen3-4b"
    assert server.requests[0]["body"]["model"] == "qwen3-4b"


@pytest.mark.parametrize("listed", [[], ["a", "b"]])
def test_openai_compatible_server_with_several_models_gets_the_default(listed: list[str]) -> None:
    models = {"object": "list", "data": [{"id": i, "object": "model"} for i in listed]}
    with ScriptedServer([], models=models) as server:
        backend = open_backend("openai", base_url=f"{server.url}/v1", config=Config())
    assert backend.model == DEFAULT_MODELS["openai"]


def test_no_vision_sends_images_as_their_placeholder_line() -> None:
    with ScriptedServer([Reply(sse=OPENAI.ok)]) as server:
        backend = open_backend(
            "openai", base_url=f"{server.url}/v1", no_vision=True, config=Config()
        )
        backend.complete(ask(Text("What is this?"), SHOT))
    assert backend.capabilities.vision is False
    content = server.requests[0]["body"]["messages"][-1]["content"]
    assert "[image: shot.png (image/png)]" in json.dumps(content)
    assert "image_url" not in json.dumps(content)


def test_openai_backend_configured_without_native_tools_describes_them_in_the_prompt(
    tmp_path: Path,
) -> None:
    write_config(tmp_path, "[backends.openai]\nnative_tools = false\n")
    with ScriptedServer([Reply(sse=OPENAI.ok)]) as server:
        backend = open_backend("openai", base_url=f"{server.url}/v1")
        response = backend.complete(ask(tools=(WEATHER,)))
    body = server.requests[0]["body"]
    assert "tools" not in body and "response_format" not in body
    assert "get_weather" in body["messages"][0]["content"]  # the system prompt
    assert response.message.text() == OPENAI.text


# -- llama-server and local ---------------------------------------------------------------------


def llama_stream(*contents: str) -> str:
    """An SSE stream of llama-server chunks carrying `contents`, then stop and [DONE]."""
    chunks: list[dict[str, Any]] = [
        {"choices": [{"index": 0, "delta": {"content": c}, "finish_reason": None}]}
        for c in contents
    ]
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    return "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"


def test_llama_server_reads_model_and_capabilities_from_props() -> None:
    script = [Reply(sse="llama_server_reasoning.sse")]
    with ScriptedServer(script, props=PROPS) as server:
        backend = open_backend("llama-server", base_url=f"{server.url}/v1/", config=Config())
        response = backend.complete(ask(tools=(WEATHER,), thinking=True))
    assert (backend.name, backend.model) == ("llama-server", "SmolLM2-135M-Instruct.Q4_1.gguf")
    assert backend.capabilities == Capabilities(vision=False, native_tools=True, thinking=False)
    sent = server.requests[0]
    assert sent["path"] == "/v1/chat/completions"
    assert sent["body"]["tools"][0]["function"]["name"] == "get_weather"
    # Not a field the SDK knows: it goes out verbatim all the same.
    assert sent["body"]["chat_template_kwargs"] == {"enable_thinking": True}
    assert response.message.thinking() == "Two plus two is four."
    assert response.message.text() == "4"


def test_llama_server_without_tool_support_uses_constrained_prompt_mode() -> None:
    answer = json.dumps(
        {"tool_calls": [{"name": "get_weather", "arguments": {"location": "Oslo"}}]}
    )
    script = [Reply(sse=llama_stream(answer[:20], answer[20:]))]
    props = {**PROPS, "chat_template_caps": {"supports_tools": False}}
    with ScriptedServer(script, props=props) as server:
        backend = open_backend("llama-server", base_url=server.url, config=Config())
        response = backend.complete(ask(tools=(WEATHER,)))
    body = server.requests[0]["body"]
    assert "tools" not in body
    assert body["response_format"]["type"] == "json_schema"
    (call,) = response.message.tool_uses()
    assert (call.name, call.input) == ("get_weather", {"location": "Oslo"})


class FakeLocalServer:
    """Stands in for `carryall.local.LocalServer`, pointing at a scripted server."""

    def __init__(self, url: str, failures: int = 0) -> None:
        self.url = url
        self.checks = 0
        self.failures = failures
        self.capabilities = Capabilities(vision=False, native_tools=True, thinking=False)
        path = "/models/SmolLM2-135M-Instruct.Q4_1.gguf"
        self.props = {"model_alias": path, "model_path": path}
        self.model_id = model_from_props(self.props)

    @property
    def base_url(self) -> str:
        return self.url

    def ensure_running(self) -> str:
        self.checks += 1
        if self.checks > 1 and self.failures:
            raise LocalBackendError("the local llama-server crashed again (exit code -9)")
        return self.url


def test_local_backend_makes_sure_its_server_runs_before_each_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with ScriptedServer([Reply(sse=llama_stream("one")), Reply(sse=llama_stream("two"))]) as server:
        fake = FakeLocalServer(server.url)
        monkeypatch.setattr(carryall.local, "get_local_server", lambda: fake)
        backend = open_backend()  # no key, no config: local
        first = backend.complete(ask())
        second = backend.complete(ask())
    assert (backend.name, backend.model) == ("local", "SmolLM2-135M-Instruct.Q4_1.gguf")
    assert (first.message.text(), second.message.text()) == ("one", "two")
    assert fake.checks == 2
    assert server.requests[0]["body"]["max_tokens"] == 4096  # the llama-server dialect


def test_local_server_that_keeps_crashing_is_a_provider_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = FakeLocalServer("http://127.0.0.1:9", failures=1)
    monkeypatch.setattr(carryall.local, "get_local_server", lambda: fake)
    backend = open_backend("local")
    fake.checks = 1
    with pytest.raises(ProviderError, match="crashed again") as caught:
        backend.complete(ask())
    assert caught.value.kind == "local_backend"


def test_local_backend_not_installed_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    def not_installed() -> Any:
        raise LocalBackendError("llama-server not found at /x; run `carryall local install`")

    monkeypatch.setattr(carryall.local, "get_local_server", not_installed)
    with pytest.raises(LocalBackendError, match="carryall local install"):
        open_backend("local")


def test_a_request_naming_its_model_keeps_it() -> None:
    with ScriptedServer([Reply(sse=OPENAI.ok)]) as server:
        backend = open_backend("openai", base_url=f"{server.url}/v1", config=Config())
        backend.complete(Request(model="other", messages=(Message.user("Hi"),)))
    assert server.requests[0]["body"]["model"] == "other"
    assert backend.model == DEFAULT_MODELS["openai"]


def test_tool_call_answer_round_trips_through_the_openai_backend() -> None:
    with ScriptedServer([Reply(sse="openai_tool_calls.sse")]) as server:
        backend = open_backend("openai", base_url=f"{server.url}/v1", config=Config())
        response = backend.complete(ask(tools=(WEATHER,)))
    (call,) = response.message.content
    assert isinstance(call, ToolUse)
    # Its argument text as the model wrote it rides in its spelling (test_spelling.py).
    assert (call.id, call.name, call.input) == (
        "call_DdmO9pD3xa9XTPNJ32zg2hcA",
        "get_weather",
        {"location": "Paris, France"},
    )


# -- the SDKs send the codecs' JSON unchanged ---------------------------------------------------


@pytest.mark.parametrize("golden", sorted(GOLDENS))
@pytest.mark.parametrize("name", ["anthropic", "openai", "llama-server"])
def test_the_wire_gets_exactly_the_codec_body(name: str, golden: str) -> None:
    request = Request(
        model="m",
        system="Be brief.",
        messages=tuple(GOLDENS[golden]),
        tools=TOOLS,
        tool_choice="auto",
        thinking=name != "openai",
        cache="auto" if name == "anthropic" else "off",
    )
    reply = Reply(sse="anthropic_text.sse" if name == "anthropic" else OPENAI.ok)
    props = {"modalities": {"vision": True}, "chat_template_caps": {"supports_tools": True}}
    with ScriptedServer([reply], props=props) as server:
        base = f"{server.url}/v1" if name == "openai" else server.url
        backend = open_backend(name, base_url=base, api_key="test", config=Config())
        backend.complete(request)
    caps = backend.capabilities
    if name == "anthropic":
        expected = {**anthropic_codec.encode_request(request, caps), "stream": True}
    else:
        dialect: openai_codec.Dialect = "openai" if name == "openai" else "llama-server"
        expected = openai_codec.stream_body(openai_codec.encode_request(request, caps, dialect))
    assert server.requests[0]["body"] == json.loads(json.dumps(expected))
