"""Lifting 100 declared 1 MiB images against reading the same files raw.

Makes 100 files of PNG magic followed by random bytes in a temporary
directory, one prompt carrier declaring all of them, and times `lift` (every
check the loader makes, plus base64) beside a plain `Path.read_bytes` loop
and a `read_bytes` + base64-to-str loop that keeps its results as `lift`
does, so the cost of the checks themselves shows.

    .venv/bin/python benchmarks/lift.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import base64
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from carryall.attachments import AttachmentPolicy, lift
from carryall.carrier import Marker, MarkerKind, render_prompt_tool_carrier

COUNT = 100
SIZE = 1024 * 1024
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def best_of(rounds: int, run: Callable[[], object]) -> float:
    """The fastest of `rounds` runs, in seconds: the least disturbed by the machine."""
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    """Build the files, time the three readers, print the figures and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="runs per reader; best is shown")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        paths = [root / f"shot_{n:03d}.png" for n in range(COUNT)]
        for path in paths:
            path.write_bytes(PNG_MAGIC + os.urandom(SIZE - len(PNG_MAGIC)))
        content = render_prompt_tool_carrier(
            "took 100 screenshots", [Marker(MarkerKind.IMAGE, str(p)) for p in paths]
        )
        policy = AttachmentPolicy([root], max_images=COUNT)

        def lifted() -> None:
            _, images = lift("user", content, policy)
            assert len(images) == COUNT

        def raw() -> None:
            for path in paths:
                path.read_bytes()

        def raw_b64() -> None:
            # What any lifter must do at least: every image as a base64 str, all kept.
            kept = [base64.b64encode(path.read_bytes()).decode("ascii") for path in paths]
            assert len(kept) == COUNT

        lifted()  # warm the page cache and imports for every reader alike
        t_lift = best_of(args.rounds, lifted)
        t_raw = best_of(args.rounds, raw)
        t_b64 = best_of(args.rounds, raw_b64)
    print(f"{COUNT} declared images of {SIZE // 1024} KiB, best of {args.rounds}")
    print(f"  lift (checks + read + base64): {t_lift * 1000:8.1f} ms")
    print(f"  raw read_bytes loop:           {t_raw * 1000:8.1f} ms")
    print(f"  raw read_bytes + base64 str:   {t_b64 * 1000:8.1f} ms")
    print(f"  lift / raw read:         {t_lift / t_raw:6.2f}x")
    print(f"  lift / raw read + base64: {t_lift / t_b64:6.2f}x")


if __name__ == "__main__":
    main()
