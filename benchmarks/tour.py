"""How often the README's tour prompts get a correct answer from the embedded model.

Each prompt runs `--count` times as a newcomer runs it: `carryall run PROMPT`
in a workspace holding a notes.txt this script writes, on the `local`
backend (llama-server with SmolLM2-135M), a fresh `CARRYALL_HOME` per run.
Each answer is judged by one check per prompt:

- listing the workspace: the answer names every file in it;
- summarising the notes (read with a tool, or piped in): the answer names
  at least two of the notes' three points, and is not a copy of a template
  (`<your answer>`), a tool error or the notes themselves.

It prints each prompt's correct count, the answers' median length and
wall time, and one line per wrong answer, so what a small model gets wrong
is seen, not guessed.

    .venv/bin/python benchmarks/tour.py [--count 10] [--show] [--keep DIR]

`--keep DIR` keeps each run's workspace and `CARRYALL_HOME` under DIR, so
a wrong answer's whole session (every request's tool calls and results)
can be read with `CARRYALL_HOME=DIR/<run> carryall sessions show last`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from carryall import local

README = Path(__file__).resolve().parent.parent / "README.md"

NOTES = (
    "Team meeting, Tuesday.\n"
    "1. The product launch moves from February to March.\n"
    "2. The design budget is raised to 40,000 euros.\n"
    "3. Alice leads the security review next week.\n"
)
POINTS = (("march",), ("budget", "40,000", "40000"), ("alice", "security"))
FILES = ("notes.txt", "plan.md", "data.csv")


def _listed(answer: str) -> bool:
    return all(name in answer for name in FILES)


def _summarised(answer: str) -> bool:
    low = answer.lower()
    hits = sum(any(word in low for word in point) for point in POINTS)
    copied = NOTES.strip().lower() in low or "<your" in low or low.startswith("error")
    return hits >= 2 and not copied


@dataclass(frozen=True)
class Prompt:
    """One tour prompt: what is typed, what is piped in, and the check of its answer."""

    text: str
    check: Callable[[str], bool]
    stdin: str | None = None


PROMPTS = (
    Prompt("Use the list_dir tool to list the files in the workspace.", _listed),
    Prompt("Summarise notes.txt", _summarised),
    Prompt("Summarise this", _summarised, stdin=NOTES),
)


def _workspace(root: Path) -> Path:
    ws = root / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text(NOTES)
    (ws / "plan.md").write_text("# Plan\n\n- ship it\n")
    (ws / "data.csv").write_text("a,b\n1,2\n")
    return ws


def one_run(prompt: Prompt, keep: Path | None = None) -> tuple[str, float, int]:
    """The answer, the wall time and the exit code of one `carryall run`.

    Its files go in a temporary folder, or under `keep` to be read afterwards.
    """
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="carryall-tour-") as tmp:
        root = Path(tempfile.mkdtemp(prefix="run-", dir=keep)) if keep is not None else Path(tmp)
        ws = _workspace(root)
        env = {**os.environ, "CARRYALL_HOME": str(root / "home"), "COLUMNS": "80"}
        for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "CARRYALL_STORE"):
            env.pop(name, None)
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "carryall", "run", "--json", "-w", str(ws), prompt.text],
            input=prompt.stdin,
            capture_output=True,
            text=True,
            env=env,
            timeout=900,
        )
        wall = time.monotonic() - started
    try:
        answer = str(json.loads(done.stdout)["answer"])
    except (ValueError, KeyError, TypeError):
        answer = f"(no answer: exit {done.returncode}: {done.stderr.strip()[-200:]})"
    return answer, wall, done.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=10, help="runs per prompt")
    parser.add_argument("--show", action="store_true", help="print every answer")
    parser.add_argument("--keep", type=Path, help="keep each run's home and workspace here")
    args = parser.parse_args()
    if not local.status().ready:
        sys.exit("the local backend is not installed: run `carryall local install`")
    readme = README.read_text()
    print(f"tour prompts on the local backend, {args.count} run(s) each")
    total = 0
    for prompt in PROMPTS:
        in_readme = re.search(re.escape(f'"{prompt.text}"'), readme) is not None
        correct, walls, lengths = 0, [], []
        wrong: list[str] = []
        for _ in range(args.count):
            answer, wall, _code = one_run(prompt, args.keep)
            walls.append(wall)
            lengths.append(len(answer))
            if prompt.check(answer):
                correct += 1
            else:
                wrong.append(answer)
            if args.show:
                print(f"    {answer!r}")
        total += correct
        piped = " (notes piped in)" if prompt.stdin else ""
        print(
            f"{correct}/{args.count} correct  {prompt.text!r}{piped}"
            f"{'' if in_readme else '  [not in the README]'}  "
            f"median answer {statistics.median(lengths):.0f} chars, "
            f"median wall {statistics.median(walls):.1f} s"
        )
        for answer in wrong:
            print(f"    wrong: {answer[:150]!r}")
    print(f"total: {total}/{args.count * len(PROMPTS)} correct")


if __name__ == "__main__":
    main()
