"""The local server's supervisor: one `llama-server` process on a loopback port.

`LocalServer` starts the server `install` put in place (the xllamacpp
wheel's runner, or the compiled binary of `install --build`: the same
command-line arguments, the same routes) on the model it fetched, waits for
`/health`, and reads what the model can do from `/props` through
`carryall.llama_server`, the one reading the `llama-server` backend uses
too. A server that dies is started again once; `get_local_server` hands
every caller in the process the same one.

Every failure here is a `LocalBackendError`, `/props` included: the reading
raises `ProviderError`, and the supervisor wraps it (keeping it as the
cause), because a server that started but cannot describe itself is a local
backend that cannot start, and callers (`carryall local serve`, the `local`
backend) answer that one error with "run `carryall local install`" or its
log.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Final

from carryall.errors import LocalBackendError, ProviderError
from carryall.llama_server import capabilities_from_props, model_from_props, read_props
from carryall.local._layout import local_paths
from carryall.local._logs import indent, log_tail
from carryall.local._pins import SERVER_CONTEXT
from carryall.local.installer import ServerKind, status, wheel_command
from carryall.providers import Capabilities

__all__ = ["LocalServer", "get_local_server", "shutdown_local_server"]

# Loopback only: the server has no authentication, so nothing else may reach it.
_HOST: Final = "127.0.0.1"

THREADS_ENV: Final = "CARRYALL_LOCAL_THREADS"
"""The variable that sets the server's thread count (`-t`); unset, llama-server's default.

llama.cpp's default is one thread per core, and its threads spin while they
wait for each other: when more such threads than cores share a machine (two
servers beside other work on two cores), each token waits for a thread the
scheduler has parked, and generation slows down many times over. The test
suite sets it to 1 for the servers it starts.
"""


def _threads_from_env() -> int | None:
    """`$CARRYALL_LOCAL_THREADS` as a thread count, None when unset."""
    value = os.environ.get(THREADS_ENV, "").strip()
    if not value:
        return None
    if not value.isdigit() or int(value) < 1:
        raise LocalBackendError(
            f"${THREADS_ENV} is {value!r}; it is the local server's thread count, "
            "a whole number from 1 (or unset for llama-server's default)"
        )
    return int(value)


def _free_port(host: str) -> int:
    """A port the OS considers free right now (bind to 0, read it back, release it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        port: int = probe.getsockname()[1]
        return port


class LocalServer:
    """One `llama-server` process on a loopback port, serving the bundled model.

    `start()` (or `with LocalServer() as server:`) launches it and waits for
    `/health`; `capabilities` and `props` come from its `/props`;
    `base_url` is what both the OpenAI (`/v1/chat/completions`) and the
    Anthropic (`/v1/messages`) clients point at. A server that dies is
    started again once by the next `ensure_running()`; a second death is
    reported, because a model that keeps crashing will not get better by
    restarting it in a loop.
    """

    max_restarts = 1

    def __init__(
        self,
        *,
        root: Path | None = None,
        binary: Path | None = None,
        model: Path | None = None,
        kind: ServerKind | None = None,
        port: int | None = None,
        context: int = SERVER_CONTEXT,
        startup_timeout: float = 120.0,
        extra_args: Sequence[str] = (),
        threads: int | None = None,
    ) -> None:
        paths = local_paths(root)
        if binary is not None:
            kind = "build"
        # Nothing installed: the default install's server, whose absence _spawn explains.
        self.kind: ServerKind = kind or status(root).server_kind or "wheel"
        self.binary = binary if binary is not None else paths.binary
        self.model = model if model is not None else paths.model
        self.context = context
        self.startup_timeout = startup_timeout
        self.extra_args = tuple(extra_args)
        self.threads = threads if threads is not None else _threads_from_env()
        self._logs_dir = paths.logs_dir
        self._root = paths.root
        self._requested_port = port
        self._lock = threading.RLock()
        self._process: subprocess.Popen[bytes] | None = None
        self._port: int | None = None
        self._props: dict[str, Any] | None = None
        self._log_path: Path | None = None
        self._crashes = 0
        self._restarts = 0
        self._failure: str | None = None
        self._at_exit = False

    # The public surface ------------------------------------------------

    @property
    def base_url(self) -> str:
        """`http://127.0.0.1:<port>` of the running server (no `/v1`)."""
        with self._lock:
            if self._port is None or self._process is None:
                raise LocalBackendError("the local llama-server is not running; start it first")
            return f"http://{_HOST}:{self._port}"

    @property
    def port(self) -> int | None:
        """The port the server listens on, None before the first start."""
        return self._port

    @property
    def pid(self) -> int | None:
        """The server's process id while one has been started and not closed."""
        process = self._process
        return process.pid if process is not None else None

    @property
    def log_path(self) -> Path | None:
        """The file the server's output goes to."""
        return self._log_path

    @property
    def restarts(self) -> int:
        """How many times a crashed server was started again."""
        return self._restarts

    @property
    def is_running(self) -> bool:
        """The process exists and has not exited."""
        process = self._process
        return process is not None and process.poll() is None

    @property
    def props(self) -> dict[str, Any]:
        """The raw `/props` answer read at start-up."""
        if self._props is None:
            raise LocalBackendError("the local llama-server has not been started")
        return self._props

    @property
    def capabilities(self) -> Capabilities:
        """What the served model can do, as `/props` reports it.

        Vision from `modalities.vision`, native tool calls from the chat
        template's `supports_tools`; llama-server returns no reasoning the
        codecs can sign, so `thinking` is False.
        """
        return capabilities_from_props(self.props)

    @property
    def model_id(self) -> str:
        """The served model's name (`model_from_props`), else the model file's name."""
        return model_from_props(self.props) or self.model.name

    def start(self) -> str:
        """Start the server (a no-op when running) and return its base URL.

        An explicit start also clears an earlier "crashed twice" verdict.
        """
        with self._lock:
            if self.is_running:
                return self.base_url
            self._crashes = 0
            self._failure = None
            self._spawn(None)
            return self.base_url

    def ensure_running(self) -> str:
        """Return the base URL, starting the server if needed and restarting it once.

        Raises `LocalBackendError` when it crashed again after its one
        restart, or when it cannot start at all.
        """
        with self._lock:
            if self._failure is not None:
                raise LocalBackendError(self._failure)
            process = self._process
            if process is None:
                self._spawn(None)
                return self.base_url
            code = process.poll()
            if code is None:
                return self.base_url
            self._crashes += 1
            tail = self._log_tail()
            self._process = None
            if self._crashes > self.max_restarts:
                self._failure = (
                    f"the local llama-server crashed again ({_describe_exit(code)}) after "
                    f"{self._restarts} restart(s); not restarting it. Log: {self._log_path}"
                    + (f"\n{indent(tail)}" if tail else "")
                )
                raise LocalBackendError(self._failure)
            self._restarts += 1
            try:
                # Same port when it is still free, so clients holding base_url keep working.
                self._spawn(self._port)
            except LocalBackendError as error:
                # A restart that fails is the second failure: no further attempts.
                self._failure = str(error)
                raise
            return self.base_url

    def close(self) -> None:
        """Stop the server: SIGTERM, then SIGKILL if it lingers. Safe to call twice."""
        with self._lock:
            process, self._process = self._process, None
            if self._at_exit:
                atexit.unregister(self.close)
                self._at_exit = False
            if process is None:
                return
            _stop(process)
            if self._crashes == 0 and self._log_path is not None:
                # A clean run's log is noise; a crashed run's is kept for the report.
                self._log_path.unlink(missing_ok=True)

    def __enter__(self) -> LocalServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # Start-up ------------------------------------------------------------

    def _spawn(self, port: int | None) -> None:
        if self.kind == "build" and not self.binary.is_file():
            raise LocalBackendError(
                f"llama-server not found at {self.binary}; run `carryall local install --build`"
            )
        if self.kind == "wheel" and not status(self._root, kind="wheel").server_installed:
            raise LocalBackendError(
                "the xllamacpp wheel is not installed in this Python "
                f"({sys.executable}); run `carryall local install`"
            )
        if not self.model.is_file():
            raise LocalBackendError(
                f"model file not found at {self.model}; run `carryall local install`"
            )
        self._logs_dir.mkdir(parents=True, exist_ok=True)
        if self._log_path is None:
            # One file per server, kept across its restarts so a crash report shows both runs.
            self._log_path = self._logs_dir / f"llama-server-{os.getpid()}-{next(_log_numbers)}.log"
        if self._requested_port is not None:
            if not self._launch(self._requested_port):
                raise LocalBackendError(
                    f"llama-server could not listen on {_HOST}:{self._requested_port} "
                    f"(is the port in use?); log: {self._log_path}"
                )
            return
        # A port picked by us can be taken between the probe and the server's
        # bind; picking again is the cure.
        attempts = 3
        for attempt in range(attempts):
            chosen = port if (port is not None and attempt == 0) else _free_port(_HOST)
            if self._launch(chosen):
                return
        raise LocalBackendError(
            f"llama-server could not bind a free port on {_HOST} in {attempts} attempts; "
            f"log: {self._log_path}"
        )

    def _launch(self, port: int) -> bool:
        """Start one process on `port` and wait until healthy; False if the port was taken."""
        assert self._log_path is not None  # set by _spawn just before
        command = [str(self.binary)] if self.kind == "build" else wheel_command()
        argv = [
            *command,
            "-m",
            str(self.model),
            "--host",
            _HOST,
            "--port",
            str(port),
            "-c",
            str(self.context),
            "-np",
            "1",
            "--jinja",
            *(["-t", str(self.threads)] if self.threads is not None else []),
            *self.extra_args,
        ]
        with self._log_path.open("ab") as sink:
            start_offset = sink.tell()
            sink.write(f"$ {shlex.join(argv)}\n".encode())
            sink.flush()
            try:
                process = subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=sink,
                    stderr=subprocess.STDOUT,
                    # Its own session: Ctrl-C in a terminal reaches carryall, which
                    # then stops the server in order instead of both dying at once.
                    start_new_session=os.name == "posix",
                    preexec_fn=_die_with_parent(),
                )
            except OSError as exc:
                raise LocalBackendError(f"cannot run {argv[0]}: {exc}") from exc
        self._process = process
        self._port = port
        if not self._at_exit:
            atexit.register(self.close)
            self._at_exit = True
        try:
            self._props = self._wait_ready(process, port, start_offset)
        except _PortTaken:
            self._process = None
            return False
        except BaseException:
            self._process = None
            _stop(process)
            raise
        return True

    def _wait_ready(
        self, process: subprocess.Popen[bytes], port: int, log_offset: int
    ) -> dict[str, Any]:
        # Imported here, not with the package: `status` callers never talk HTTP.
        import httpx2

        url = f"http://{_HOST}:{port}"
        deadline = time.monotonic() + self.startup_timeout
        # trust_env=False: a proxy from the environment must never see loopback traffic.
        with httpx2.Client(base_url=url, timeout=5.0, trust_env=False) as client:
            while True:
                code = process.poll()
                if code is not None:
                    tail = log_tail(self._log_path, start=log_offset) if self._log_path else []
                    if any("couldn't bind" in line for line in tail):
                        raise _PortTaken
                    raise LocalBackendError(
                        f"llama-server exited ({_describe_exit(code)}) while starting "
                        f"(model {self.model}, port {port}); log: {self._log_path}"
                        + (f"\n{indent(tail)}" if tail else "")
                    )
                try:
                    if client.get("/health").status_code == 200:
                        break
                except httpx2.TransportError:
                    pass  # not listening yet
                if time.monotonic() > deadline:
                    raise LocalBackendError(
                        f"llama-server on port {port} was not healthy within "
                        f"{self.startup_timeout:g} s; log: {self._log_path}"
                    )
                time.sleep(0.1)
            try:
                return read_props(url, client=client)
            except ProviderError as exc:
                raise LocalBackendError(exc.message) from exc

    def _log_tail(self) -> list[str]:
        return log_tail(self._log_path) if self._log_path is not None else []


_log_numbers = itertools.count(1)


class _PortTaken(Exception):
    """The server lost the race for the port it was given."""


def _describe_exit(code: int) -> str:
    """`exit code 1`, or `killed by SIGKILL` for the negative codes Popen gives signals."""
    if code >= 0:
        return f"exit code {code}"
    try:
        return f"killed by {signal.Signals(-code).name}"
    except ValueError:
        return f"killed by signal {-code}"


# From <linux/prctl.h>: the signal a child gets when the thread that made it dies.
_PR_SET_PDEATHSIG: Final = 1


def _die_with_parent() -> Callable[[], None] | None:
    """A pre-exec hook that has the kernel SIGKILL the server when carryall dies.

    The signal handlers and `atexit` stop the server on every exit Python
    sees; this covers the ones it does not (SIGKILL, a crash). Linux sends
    the signal when the *thread* that forked dies, so the hook is only given
    to a server started from the main thread, which lives as long as the
    process: a server started from a worker thread relies on `close` alone.
    """
    if not sys.platform.startswith("linux"):
        return None
    if threading.current_thread() is not threading.main_thread():
        return None
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    parent = os.getpid()

    def hook() -> None:
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        # The parent may have died between fork and prctl: then nobody would send it.
        if os.getppid() != parent:
            os._exit(1)

    return hook


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


_singleton: LocalServer | None = None
_singleton_lock = threading.Lock()


def get_local_server() -> LocalServer:
    """The process's one local server, started (or restarted once) on demand.

    Every caller in the process shares it: one model in memory, one port.
    Thread-safe: concurrent first calls start a single process.
    """
    global _singleton
    with _singleton_lock:
        if _singleton is None:
            _singleton = LocalServer()
        server = _singleton
    server.ensure_running()
    return server


def shutdown_local_server() -> None:
    """Stop and forget the process's shared server; the next `get_local_server` starts anew."""
    global _singleton
    with _singleton_lock:
        server, _singleton = _singleton, None
    if server is not None:
        server.close()
