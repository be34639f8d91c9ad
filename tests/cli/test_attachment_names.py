"""`-i` takes images and documents, and says so when a file is neither."""

from __future__ import annotations

from pathlib import Path

from tests.support.cli import invoke


def test_an_attachment_with_no_known_extension_names_both_kinds_i_takes(
    tmp_path: Path,
) -> None:
    workspace = tmp_path
    odd = workspace / "passwd"
    odd.write_text("root:x:0:0\n")
    result = invoke("run", "-i", str(odd), "hi", "--no-record", "-w", str(workspace))
    assert result.exit_code == 1
    assert "image extension" in result.stderr and "pdf or txt" in result.stderr
