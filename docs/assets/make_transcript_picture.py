"""Make docs/assets/transcript.png: the HTML export of a session that switched backends.

Run from the repository root with the `carryall` command's venv:

    .venv/bin/python docs/assets/make_transcript_picture.py

The session begins on the embedded local backend (SmolLM2 through a real
llama-server, `carryall local install` first), which calls the built-in
`list_dir` tool; it is then continued with `-c` on the Anthropic wire and
on the OpenAI wire (where the signed thinking is left off, reported).
Those two are the test suite's scripted server replaying the recorded
streams in tests/fixtures/sse, so the picture needs no API key. The HTML is
carryall's own `sessions show --format html`, and headless Chromium takes
the screenshot.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.support.scripted import Reply, served

ROOT = Path(__file__).resolve().parents[2]
PICTURE = ROOT / "docs" / "assets" / "transcript.png"


def carryall(env: dict[str, str], cwd: Path, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "carryall", *args],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    return done.stdout


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        workspace = folder / "workspace"
        workspace.mkdir()
        (workspace / "notes.txt").write_text("carryall keeps a conversation whole.\n")
        (workspace / "plan.md").write_text("# Plan\n")
        env = {**os.environ, "CARRYALL_HOME": str(folder / "home"), "NO_COLOR": "1"}
        for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
            env.pop(key, None)
        carryall(
            env, workspace, "run", "-t", "list_dir", "--max-steps", "1",
            "Use the list_dir tool to list the files in the workspace.",
        )  # fmt: skip
        # The recorded Anthropic stream thinks, signs its thinking and calls a
        # `get_weather` tool this run does not offer: the agent answers that
        # call with an error result, and the second stream is the answer.
        anthropic = [Reply(sse="anthropic_tool_thinking.sse"), Reply(sse="anthropic_text.sse")]
        with served(anthropic) as server:
            carryall(
                env, workspace, "run", "-c", "-b", "anthropic", "--base-url", server.url,
                "What is the weather in Paris?",
            )  # fmt: skip
        with served([Reply(sse="openai_text.sse")]) as server:
            carryall(
                env, workspace, "run", "-c", "-b", "openai", "--base-url", f"{server.url}/v1",
                "Say hello on another wire.",
            )  # fmt: skip
        page = folder / "transcript.html"
        page.write_text(carryall(env, workspace, "sessions", "show", "last", "--format", "html"))
        browser = shutil.which("chromium") or shutil.which("chromium-browser")
        if browser is None:
            raise SystemExit("no chromium on PATH: `apt-get install chromium`")
        subprocess.run(
            [
                browser, "--headless", "--no-sandbox", "--disable-gpu",
                "--disable-background-networking", "--hide-scrollbars",
                f"--screenshot={PICTURE}", "--window-size=1000,1900", page.as_uri(),
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )  # fmt: skip
    print(PICTURE)


if __name__ == "__main__":
    main()
