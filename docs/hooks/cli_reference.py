"""MkDocs hook: the CLI reference, generated from the `carryall` command's own definitions.

A page holding the line `<!-- carryall-cli-reference -->` gets it replaced by
every command and group of `carryall.cli.build_app()`, as click sees them
after typer has built them: usage, help text and each argument and option
with its type, default and environment variable. Nothing is written by
hand, so the page says what `--help` says. The commands are read by what
they do (`list_commands`, `param_type_name`), not by class: typer may bring
its own copy of click's classes.
"""

from __future__ import annotations

from typing import Any

import typer

MARKER = "<!-- carryall-cli-reference -->"


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if MARKER not in markdown:
        return markdown
    from carryall.cli import build_app

    root = typer.main.get_command(build_app())
    return markdown.replace(MARKER, "\n".join(_command(root, [], "carryall")))


def _command(command: Any, parents: list[Any], name: str) -> list[str]:
    """The Markdown of `command` and of every command under it; `parents` are its contexts."""
    parent_ctx = parents[-1] if parents else None
    # The command's own settings (`-h` beside `--help`); a subcommand inherits its parent's.
    settings = command.context_settings or {}
    ctx = command.context_class(command, info_name=name, parent=parent_ctx, **settings)
    path = ctx.command_path.split()
    level = "#" * min(len(path) + 1, 6)
    lines = [f"{level} `{' '.join(path)}`", ""]
    if command.help:
        lines += [_help_text(command.help), ""]
    usage = " ".join(command.collect_usage_pieces(ctx))
    lines += ["```text", f"Usage: {' '.join(path)} {usage}".rstrip(), "```", ""]
    params = [p for p in command.get_params(ctx) if not getattr(p, "hidden", False)]
    arguments = [p for p in params if p.param_type_name == "argument"]
    options = [p for p in params if p.param_type_name == "option"]
    if arguments:
        lines += ["**Arguments**", ""] + [_param(p, ctx) for p in arguments] + [""]
    if options:
        lines += ["**Options**", ""] + [_param(p, ctx) for p in options] + [""]
    if hasattr(command, "list_commands"):
        subcommands = command.list_commands(ctx)
        if subcommands:
            lines += ["**Commands**", ""]
            for sub in subcommands:
                found = command.get_command(ctx, sub)
                short = found.get_short_help_str(limit=200) if found else ""
                lines.append(f"- `{sub}`: {short}")
            lines.append("")
        for sub in subcommands:
            found = command.get_command(ctx, sub)
            if found is not None and not found.hidden:
                lines += _command(found, [*parents, ctx], sub)
    return lines


def _help_text(text: str) -> str:
    # typer keeps the docstring as written; an "Example:" line reads best as code.
    out = []
    for line in text.strip().splitlines():
        stripped = line.strip()
        if stripped.startswith("Example:") or stripped.startswith("Examples:"):
            head, _, rest = stripped.partition(":")
            out.append(f"{head}: `{rest.strip()}`" if rest.strip() else f"{head}:")
        else:
            out.append(stripped)
    return "\n".join(out)


def _param(param: Any, ctx: Any) -> str:
    argument = param.param_type_name == "argument"
    if argument:
        names = f"`{param.human_readable_name}`"
    else:
        names = ", ".join(f"`{opt}`" for opt in [*param.opts, *param.secondary_opts])
    facts = []
    if not getattr(param, "is_flag", False):
        metavar = param.make_metavar(ctx) if _takes_ctx(param) else param.make_metavar()
        if metavar.strip("{}[]. ") != param.human_readable_name:
            facts.append(f"`{metavar}`")
    if param.required:
        facts.append("required")
    help_text = getattr(param, "help", None) or ""
    default = param.default
    shown = getattr(param, "show_default", None)
    if (
        not argument
        and default not in (None, False, "", ())
        and shown is not False
        and not callable(default)
    ):
        facts.append(f"default `{default}`")
    envvar = param.envvar
    if envvar:
        facts.append(f"env `{envvar}`")
    detail = f" ({', '.join(facts)})" if facts else ""
    return f"- {names}{detail}: {' '.join(help_text.split())}"


def _takes_ctx(param: Any) -> bool:
    import inspect

    return "ctx" in inspect.signature(param.make_metavar).parameters
