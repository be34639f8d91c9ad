"""Cold start: the CPU a command costs before it does anything, beside `python -c pass`.

Each command runs in a fresh process on an empty store (a temporary
`CARRYALL_HOME`), several times; the CPU is the child's user plus system
time (`resource.getrusage(RUSAGE_CHILDREN)`), so a loaded machine's waiting
is not counted. The target (`sessions list` and `recall WORD` at most 0.2 s)
is printed as met or missed, never asserted.

Two columns, because Python either finds a command's modules compiled or
compiles them on every run:

- `cached`: as an installed program runs from its second start on. The
  children write and read bytecode in a private folder
  (`PYTHONPYCACHEPREFIX` in the temporary directory), after one untimed
  warm-up run of each command; the target is read here.
- `no .pyc`: with `PYTHONDONTWRITEBYTECODE=1` (as some sandboxes and CI
  images set it) and no cached bytecode, so every module carryall imports
  from its source tree is compiled again in every run.

The `import typer, carryall` row is the floor every command stands on: the
interpreter, the command-line library and the block model (msgspec), with
no command built or run; what a command costs above it is carryall's own.

The `platform folders` row runs `sessions list` without `CARRYALL_HOME`
(a temporary `HOME` instead), so it also pays for finding the platform's
data folder.

    .venv/bin/python benchmarks/startup.py [--runs 7]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

TARGET = 0.2
"""Seconds of CPU `sessions list` and `recall` may cost on an empty store."""

JUDGED = ("carryall sessions list", "carryall recall WORD")


def cpu(argv: list[str], env: dict[str, str], runs: int) -> list[float]:
    """The CPU seconds of each of `runs` fresh runs of `argv`."""
    out: list[float] = []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        out.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return out


def main() -> None:
    """Time each command and print it beside the bare interpreter."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="fresh runs of each command")
    args = parser.parse_args()
    carryall = str(Path(sys.executable).with_name("carryall"))
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "import typer, carryall": [sys.executable, "-c", "import typer, carryall"],
        "carryall --help": [carryall, "--help"],
        "carryall sessions list": [carryall, "sessions", "list"],
        "carryall recall WORD": [carryall, "recall", "WORD"],
        "carryall run --help": [carryall, "run", "--help"],
        "sessions list (platform folders)": [carryall, "sessions", "list"],
    }
    with tempfile.TemporaryDirectory() as tmp:
        home, user = Path(tmp, "home"), Path(tmp, "user")
        home.mkdir()
        user.mkdir()
        base = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("CARRYALL_", "XDG_", "PYTHONPYCACHEPREFIX"))
            and k != "PYTHONDONTWRITEBYTECODE"
        }
        cached = {**base, "CARRYALL_HOME": str(home), "PYTHONPYCACHEPREFIX": str(Path(tmp, "pyc"))}
        compiling = {**base, "CARRYALL_HOME": str(home), "PYTHONDONTWRITEBYTECODE": "1"}
        print(f"CPU seconds (user + system), {args.runs} fresh runs each, empty store")
        print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print(f"  {'command':<34}{'cached: median':>15}{'mean':>8}{'x bare':>8}{'no .pyc':>10}")
        setups: dict[str, tuple[list[str], dict[str, str], dict[str, str]]] = {}
        for name, argv in commands.items():
            env, env_compiling = cached, compiling
            if name.endswith("(platform folders)"):
                away = {"HOME": str(user)}
                env = {k: v for k, v in cached.items() if k != "CARRYALL_HOME"} | away
                env_compiling = {k: v for k, v in compiling.items() if k != "CARRYALL_HOME"} | away
            setups[name] = (argv, env, env_compiling)
            cpu(argv, env, 1)  # the warm-up run writes the bytecode the timed runs read
        # Round by round, every command once per round: a change in the
        # machine's load falls on all of them alike.
        times: dict[str, list[float]] = {name: [] for name in setups}
        uncached: dict[str, list[float]] = {name: [] for name in setups}
        for _ in range(args.runs):
            for name, (argv, env, env_compiling) in setups.items():
                times[name] += cpu(argv, env, 1)
                uncached[name] += cpu(argv, env_compiling, 1)
        bare = statistics.median(times["python -c pass"])
        verdicts: list[str] = []
        for name in setups:
            median = statistics.median(times[name])
            print(
                f"  {name:<34}{median:15.3f}{statistics.fmean(times[name]):8.3f}"
                f"{median / bare:8.1f}{statistics.median(uncached[name]):10.3f}"
            )
            if name in JUDGED:
                verdict = "met" if median <= TARGET else "MISSED"
                verdicts.append(f"  {name}: {median:.3f} s (at most {TARGET:g} s) -> {verdict}")
        print("target, cached column:")
        print("\n".join(verdicts))


if __name__ == "__main__":
    main()
