"""Tokens/s of the local backend, prompt and generation, for each install present.

The xllamacpp wheel (the default install) and the compiled build
(`carryall local install --build`) are started side by side on the same
SmolLM2 model, and the same requests go to each in turn, interleaved, so
the machine's load falls on both alike. Each request processes a fixed
prompt from scratch (`cache_prompt` off) and generates a fixed number of
tokens (`ignore_eos`, greedy). Two figures per phase:

- tokens/s as the server times them (`timings` of llama.cpp's `/completion`:
  wall time inside the server, which a loaded machine slows);
- tokens per CPU-second of the server process (user plus system time of
  all its threads, from /proc, Linux only), which the load does not inflate.

    .venv/bin/python benchmarks/local_speed.py [--runs 5] [--prompt-tokens 128] [--gen-tokens 16]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

import httpx2

from carryall import local
from carryall.local import LocalServer

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def server_cpu(pid: int) -> float | None:
    """CPU seconds (user + system, every thread) the process has used, None off Linux."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    # utime and stime are fields 14 and 15 of stat(5); fields[0] is field 3.
    return (int(fields[11]) + int(fields[12])) / _TICKS


def one_request(
    client: httpx2.Client, pid: int, prompt: str, gen_tokens: int
) -> tuple[float, float, int, int, float | None, float | None]:
    """Prompt and generation tokens/s as timed by the server, the counts, and CPU seconds.

    The CPU of the prompt phase is taken from a first request that
    generates one token; the generation phase's is the full request's
    minus that.
    """
    request = {
        "prompt": prompt,
        "cache_prompt": False,
        "temperature": 0.0,
        "ignore_eos": True,
    }
    before = server_cpu(pid)
    client.post("/completion", json={**request, "n_predict": 1}).raise_for_status()
    middle = server_cpu(pid)
    answer = client.post("/completion", json={**request, "n_predict": gen_tokens})
    answer.raise_for_status()
    after = server_cpu(pid)
    timings = answer.json()["timings"]
    prompt_cpu = middle - before if before is not None and middle is not None else None
    full_cpu = after - middle if after is not None and middle is not None else None
    gen_cpu = full_cpu - prompt_cpu if full_cpu is not None and prompt_cpu is not None else None
    return (
        float(timings["prompt_per_second"]),
        float(timings["predicted_per_second"]),
        int(timings["prompt_n"]),
        int(timings["predicted_n"]),
        prompt_cpu,
        gen_cpu,
    )


def main() -> None:
    """Start every installed server, time the same requests on each, print them side by side."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="timed requests per server")
    parser.add_argument("--prompt-tokens", type=int, default=128, help="about this many")
    parser.add_argument("--gen-tokens", type=int, default=16)
    args = parser.parse_args()
    status = local.status()
    kinds = [
        kind
        for kind, there in (("wheel", status.wheel_installed), ("build", status.build_installed))
        if there
    ]
    if not status.model_installed or not kinds:
        sys.exit("the local backend is not installed: run `carryall local install`")
    # About one token per word for this tokenizer and this text.
    words = "The lighthouse keeper counted the ships that passed the rocks at night. "
    prompt = (words * (args.prompt_tokens // len(words.split()) + 1)).strip()
    servers = {kind: LocalServer(kind=kind) for kind in kinds}  # type: ignore[misc]
    results: dict[str, list[tuple[float, float, int, int, float | None, float | None]]] = {
        kind: [] for kind in kinds
    }
    try:
        clients = {}
        for kind, server in servers.items():
            server.start()
            clients[kind] = httpx2.Client(base_url=server.base_url, timeout=600, trust_env=False)
        for kind in kinds:  # one untimed warm-up each
            one_request(clients[kind], servers[kind].pid or 0, prompt, 4)
        for _ in range(args.runs):
            for kind in kinds:
                results[kind].append(
                    one_request(clients[kind], servers[kind].pid or 0, prompt, args.gen_tokens)
                )
    finally:
        for server in servers.values():
            server.close()
    first = results[kinds[0]][0]
    print(
        f"SmolLM2-135M Q4_1, {first[2]} prompt tokens, {first[3]} generated, "
        f"{args.runs} interleaved runs each, {os.cpu_count()} CPUs"
    )
    print(f"  wheel: {status.wheel_version}" if "wheel" in kinds else "  wheel: not installed")
    print(f"  build: {status.build_version}" if "build" in kinds else "  build: not installed")
    print(f"  {'install':<10}{'figure':<18}{'median':>10}{'mean':>10}")
    for kind in kinds:
        rows = results[kind]
        label = kind
        figures = {
            "prompt tok/s": [row[0] for row in rows],
            "gen tok/s": [row[1] for row in rows],
            "prompt tok/cpu-s": [row[2] / row[4] for row in rows if row[4]],
            "gen tok/cpu-s": [row[3] / row[5] for row in rows if row[5]],
        }
        for index, (name, values) in enumerate(figures.items()):
            if not values:
                continue
            shown = label if index == 0 else ""
            print(
                f"  {shown:<10}{name:<18}"
                f"{statistics.median(values):>10.1f}{statistics.fmean(values):>10.1f}"
            )


if __name__ == "__main__":
    main()
