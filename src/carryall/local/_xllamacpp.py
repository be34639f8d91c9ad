"""llama-server's command line, served by the prebuilt `xllamacpp` wheel.

`python -m carryall.local._xllamacpp -m MODEL --host H --port P -c N -np 1
--jinja --temp T --top-p P` runs llama.cpp's own HTTP server code (the same routes, `/props`
and grammar sampling as a compiled `llama-server`) from the wheel, in a
process of its own. Taking the compiled binary's arguments means the
supervisor starts, checks, stops and reads the log of either one the same
way; only the first words of the command line differ. `--version` prints
the binary's `version:` line, which is what verification reads.

Only the arguments `LocalServer` passes are understood: anything else is
refused by name, rather than silently ignored by a server that would then
run with different settings than asked for.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from typing import Final

__all__ = ["main", "wheel_version"]

# The signals that end the server; blocked before the server's threads start
# so that they inherit the mask and only `sigwait` below ever receives them.
_STOP_SIGNALS: Final = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP}


def wheel_version() -> str:
    """`llama.cpp build 11549 (xllamacpp 2026.10.11549)`, from the installed wheel."""
    import xllamacpp

    version = str(xllamacpp.__version__)
    build = version.rsplit(".", 1)[-1]
    return f"llama.cpp build {build} (xllamacpp {version})"


# From <linux/prctl.h>: set the calling thread's name, the one `ps` and /proc show.
_PR_SET_NAME: Final = 15


def _name_process(name: str) -> None:
    """Be called `name` in `ps`, `pgrep` and /proc, like the compiled server (Linux only).

    Whoever looks for the local server (a person with `pgrep llama-server`,
    the exit tests) then finds it by the same name whichever install runs it;
    the threads the server starts inherit the name.
    """
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_NAME, name.encode(), 0, 0, 0)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m carryall.local._xllamacpp",
        description="llama-server's arguments, served by the xllamacpp wheel.",
    )
    parser.add_argument("--version", action="store_true")
    parser.add_argument("-m", "--model")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("-c", "--ctx-size", type=int, default=4096)
    parser.add_argument("-np", "--parallel", type=int, default=1)
    parser.add_argument("-t", "--threads", type=int, default=None)
    parser.add_argument("--jinja", action="store_true")
    parser.add_argument("--temp", type=float, default=None)
    parser.add_argument("--top-p", type=float, default=None)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Serve until SIGTERM, SIGINT or SIGHUP; exit 0 then, non-zero when the server fails."""
    args = _parser().parse_args(argv)
    if args.version:
        print(f"version: {wheel_version()}", flush=True)
        return 0
    if not args.model:
        print("error: -m MODEL is required", file=sys.stderr, flush=True)
        return 2
    signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    _name_process("llama-server")
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.hostnames = [args.host]
    params.port = args.port
    params.n_ctx = args.ctx_size
    params.n_parallel = args.parallel
    params.use_jinja = args.jinja
    # The compiled server answers /props by default; carryall reads it at start-up.
    params.endpoint_props = True
    if args.threads is not None:
        params.cpuparams.n_threads = args.threads
    if args.temp is not None:
        params.sampling.temp = args.temp
    if args.top_p is not None:
        params.sampling.top_p = args.top_p
    try:
        server = xllamacpp.Server(params)
    except RuntimeError as error:
        # The server has already logged why (a port it couldn't bind, a bad model).
        print(f"error: {error}", file=sys.stderr, flush=True)
        return 1
    print(f"main: server is listening on {server.listening_address}", flush=True)
    received = signal.sigwait(_STOP_SIGNALS)
    print(f"main: {signal.Signals(received).name} received, stopping", flush=True)
    sys.stdout.flush()
    # The server's threads are still serving: leave without running their
    # destructors, which would wait on connections a client may hold open.
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
