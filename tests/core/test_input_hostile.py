"""Issue 18, input and configuration: each hostile input is one clear line, never a hang.

The CLI runs for real (`catch_exceptions=False`, so a traceback fails the
test); nothing here reaches a backend, since every input is refused before
one is opened.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from carryall.cli import app
from carryall.config import load_config
from carryall.errors import CarryallError, TranscriptError
from carryall.interchange import read_messages_file
from tests.support.blocking import bounded


def _opening_writer(fifo: Path) -> Callable[[], None]:
    def unblock() -> None:
        with contextlib.suppress(OSError):
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))

    return unblock


def test_a_config_file_that_is_a_fifo_is_refused_without_hanging(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    os.mkfifo(path)
    got = bounded(lambda: load_config(path), _opening_writer(path), "load_config on a FIFO")
    assert isinstance(got, CarryallError)
    assert str(got) == f"config file {path}: cannot read it: it is a FIFO, not a regular file"


def test_a_config_file_nested_past_the_recursion_limit_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("model = " + "[" * 50_000 + "]" * 50_000 + "\n")
    with pytest.raises(CarryallError) as refused:
        load_config(path)
    assert str(refused.value) == f"config file {path}: nested too deeply to be a config"


def test_an_import_path_that_is_a_fifo_is_refused_without_hanging(tmp_path: Path) -> None:
    path = tmp_path / "history.json"
    os.mkfifo(path)
    got = bounded(lambda: read_messages_file(path), _opening_writer(path), "import from a FIFO")
    assert isinstance(got, TranscriptError)
    assert "FIFO" in str(got)


def test_import_of_a_regular_file_still_reads(tmp_path: Path) -> None:
    path = tmp_path / "history.json"
    path.write_text(json.dumps([{"role": "user", "content": "hi"}]))
    assert [m.text() for m in read_messages_file(path).messages] == ["hi"]


# Every test here runs `carryall` in this process: nothing from the shell may steer it.
pytestmark = pytest.mark.usefixtures("home")


def _run(*args: str, home: Path, input: bytes | None = None) -> Any:
    env = {"CARRYALL_HOME": str(home), "OPENAI_API_KEY": "k" * 12}
    return CliRunner().invoke(app, ["run", *args], input=input, env=env, catch_exceptions=False)


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://[::1", "is not a valid URL"),
        ("::::", "is not a valid URL"),
        ("example.org/v1", "must start with http:// or https://"),
        ("ftp://example.org/v1", "must start with http:// or https:// (not ftp://)"),
        ("http://", "names no host"),
        ("http://example.org:99999/v1", "port 99999 is not 1 to 65535"),
    ],
)
def test_a_garbage_base_url_is_one_clear_line(tmp_path: Path, url: str, reason: str) -> None:
    result = _run("--backend", "openai", "--model", "m", "--base-url", url, "hi", home=tmp_path)
    assert result.exit_code == 1
    assert result.stderr.startswith(f"error: base URL {url!r}")
    assert reason in result.stderr
    assert "Traceback" not in result.stderr


def test_a_password_in_a_bad_base_url_is_masked_in_the_refusal(tmp_path: Path) -> None:
    result = _run(
        "--backend", "openai", "--base-url", "ftp://u:s3cret-pass@h/", "hi", home=tmp_path
    )
    assert result.exit_code == 1
    assert "s3cret-pass" not in result.stderr


def test_a_prompt_argument_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    # What Python makes of argv bytes that are not UTF-8: lone surrogates.
    prompt = b"caf\xe9 au lait".decode("utf-8", "surrogateescape")
    result = _run("--backend", "openai", "--model", "m", prompt, home=tmp_path)
    assert result.exit_code == 1
    assert "error: the prompt is not UTF-8 text (byte 0xe9 at offset 3)" in result.stderr


def test_stdin_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    result = _run("--backend", "openai", "--model", "m", "-", home=tmp_path, input=b"ok \xff\xfe")
    assert result.exit_code == 1
    assert "error: standard input is not UTF-8 text (byte 0xff at offset 3)" in result.stderr


def test_a_system_prompt_file_that_is_not_text_is_refused(tmp_path: Path) -> None:
    binary = tmp_path / "prog"
    binary.write_bytes(b"\x7fELF\x02\x01\x01\x00\xff\xfe\x00")
    result = _run(
        "--backend", "openai", "--model", "m", "--system", f"@{binary}", "hi", home=tmp_path
    )
    assert result.exit_code == 1
    assert f"error: the system prompt file {str(binary)!r} is not UTF-8 text" in result.stderr
