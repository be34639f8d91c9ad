# ruff: noqa: E501
"""The ledger of recorded-2026 checks that fail on today's code, and why.

Each key is (exchange id, check) of `tests/providers/test_recorded_2026.py`; the value is the
failure as the check words it (what was lost, refused or changed, and where). The test runs
each listed case as a strict xfail, so a gap that closes fails until its line is deleted.
"""

GAPS: dict[tuple[str, str], str] = {
    (
        "llama_server/2026/two_tool_calls_round#0",
        "echo",
    ): 'echo: the recorded assistant message (a text, two calls whose arguments json.dumps wrote, a space after each separator) is exactly what carryall\'s own file export writes, so the importer reads the spaced arguments as its own file form (else an exported history would not read back as the history it was) and the request sends them compact; a message laid out as carryall never writes one (content null or "" beside calls) keeps its argument text',
}
