"""The supervisor (`carryall.local.server`) against a stand-in llama-server.

The stand-in is a small Python HTTP server that takes llama-server's
arguments, answers `/health`, and answers `/props` with whatever the test
wrote next to it; so the start-up, the `/props` reading through
`carryall.llama_server` and its one error type are pinned without a build.
"""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path
from typing import Any

import pytest

from carryall.errors import LocalBackendError, ProviderError
from carryall.local import LocalServer
from carryall.providers import Capabilities

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="the stand-in is a script")

STAND_IN = """\
import http.server
import json
import pathlib
import sys

args = sys.argv[1:]
port = int(args[args.index("--port") + 1])
answer = json.loads(pathlib.Path(__file__).with_suffix(".json").read_text())


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/health":
            status, body = 200, b'{"status": "ok"}'
        elif self.path == "/props":
            status, body = answer["status"], answer["body"].encode()
        else:
            status, body = 404, b"{}"
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


http.server.HTTPServer(("127.0.0.1", port), Handler).serve_forever()
"""


def _stand_in(tmp_path: Path, status: int, body: str) -> LocalServer:
    binary = tmp_path / "llama-server"
    binary.write_text(f"#!{sys.executable}\n{STAND_IN}", encoding="utf-8")
    binary.chmod(binary.stat().st_mode | stat.S_IEXEC)
    binary.with_suffix(".json").write_text(
        json.dumps({"status": status, "body": body}), encoding="utf-8"
    )
    model = tmp_path / "model.gguf"
    model.write_bytes(b"stand-in")
    return LocalServer(binary=binary, model=model, root=tmp_path, startup_timeout=30)


def test_capabilities_and_model_name_come_from_props(tmp_path: Path) -> None:
    props: dict[str, Any] = {
        "modalities": {"vision": True},
        "chat_template_caps": {"supports_tools": True},
        "model_path": "/models/served/SmolLM2.gguf",
        "model_alias": "/models/served/SmolLM2.gguf",
    }
    with _stand_in(tmp_path, 200, json.dumps(props)) as server:
        assert server.props == props
        assert server.capabilities == Capabilities(vision=True, native_tools=True, thinking=False)
        assert server.model_id == "SmolLM2.gguf"
        assert server.base_url.startswith("http://127.0.0.1:")


def test_props_error_is_a_local_backend_error_caused_by_the_reading(tmp_path: Path) -> None:
    server = _stand_in(tmp_path, 500, '{"error": "boom"}')
    try:
        with pytest.raises(LocalBackendError, match=r"/props answered HTTP 500") as caught:
            server.start()
        assert isinstance(caught.value.__cause__, ProviderError)
        assert caught.value.__cause__.status == 500
        # A server that cannot describe itself is not left running.
        assert not server.is_running
    finally:
        server.close()


def test_props_that_is_not_an_object_is_refused(tmp_path: Path) -> None:
    server = _stand_in(tmp_path, 200, "[1, 2]")
    try:
        with pytest.raises(LocalBackendError, match="did not answer a JSON object"):
            server.start()
    finally:
        server.close()


def test_the_thread_count_variable_reaches_the_servers_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The suite sets it for every server it starts (tests/conftest.py); the
    # command line the log records is the one the server was given.
    monkeypatch.setenv("CARRYALL_LOCAL_THREADS", "3")
    with _stand_in(tmp_path, 200, "{}") as server:
        assert server.log_path is not None
        command = server.log_path.read_text().splitlines()[0]
    assert command.startswith("$ ") and " -t 3" in command
    monkeypatch.delenv("CARRYALL_LOCAL_THREADS")
    assert _stand_in(tmp_path, 200, "{}").threads is None


@pytest.mark.parametrize("value", ["0", "two", "-1"])
def test_a_thread_count_that_is_not_a_whole_number_from_one_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("CARRYALL_LOCAL_THREADS", value)
    with pytest.raises(LocalBackendError, match=rf"\$CARRYALL_LOCAL_THREADS is '{value}'"):
        _stand_in(tmp_path, 200, "{}")
