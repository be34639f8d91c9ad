"""Cold start: the CPU a command costs before it does anything, beside `python -c pass`.

Each command runs in a fresh process on an empty store (a temporary
`CARRYALL_HOME`), several times; the CPU is the child's user plus system
time (`resource.getrusage(RUSAGE_CHILDREN)`), so a loaded machine's waiting
is not counted. The target (`sessions list` and `recall WORD` at most 0.2 s)
is printed as met or missed, never asserted.

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
        "carryall --help": [carryall, "--help"],
        "carryall sessions list": [carryall, "sessions", "list"],
        "carryall recall WORD": [carryall, "recall", "WORD"],
        "carryall run --help": [carryall, "run", "--help"],
    }
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "CARRYALL_HOME": home}
        print(f"CPU seconds (user + system), {args.runs} fresh runs each, empty store")
        print(f"  {'command':<26}{'median':>9}{'mean':>9}{'- bare':>9}")
        bare = 0.0
        for name, argv in commands.items():
            times = cpu(argv, env, args.runs)
            median = statistics.median(times)
            bare = bare or median
            print(f"  {name:<26}{median:9.3f}{statistics.fmean(times):9.3f}{median - bare:9.3f}")
            if name in ("carryall sessions list", "carryall recall WORD"):
                verdict = "met" if median <= TARGET else "MISSED"
                print(f"    target: at most {TARGET:g} s: {median:.3f} s -> {verdict}")


if __name__ == "__main__":
    main()
