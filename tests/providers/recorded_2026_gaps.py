"""The ledger of recorded-2026 checks that fail on today's code, and why.

Each key is (exchange id, check) of `tests/providers/test_recorded_2026.py`; the value is the
failure as the check words it (what was lost, refused or changed, and where). The test runs
each listed case as a strict xfail, so a gap that closes fails until its line is deleted.
"""

GAPS: dict[tuple[str, str], str] = {}
