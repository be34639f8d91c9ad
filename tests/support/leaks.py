"""Whether a secret is anywhere a store keeps bytes: its files, its blobs, its tables.

`store_bytes` reads every byte a store holds (a JSONL store's folder whole:
transcripts, torn lines, blobs, the recall index and its journal; a
PostgreSQL store's every `carryall_*` table, each value as its bytes), and
`leaks` finds a secret in bytes in every form a writer could have put it
there: as it is, lowercased (a full-text index folds case) and as base64 at
each of the three alignments (a document or an image is held as base64).
"""

from __future__ import annotations

import base64
from pathlib import Path


def store_bytes(location: str | Path) -> bytes:
    """Every byte the store at `location` (a folder, or a postgresql:// URL) holds."""
    if str(location).startswith(("postgresql://", "postgres://")):
        return _table_bytes(str(location))
    root = Path(location)
    return b"\n".join(p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file())


def _table_bytes(url: str) -> bytes:
    import psycopg

    out: list[bytes] = []
    with psycopg.connect(url, autocommit=True) as conn:
        tables = [
            row[0]
            for row in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public' "
                "AND tablename LIKE 'carryall%' ORDER BY tablename"
            )
        ]
        for table in tables:
            for row in conn.execute(f'SELECT * FROM "{table}"'):  # type: ignore[arg-type]
                for value in row:
                    if isinstance(value, bytes | memoryview | bytearray):
                        out.append(bytes(value))
                    else:
                        out.append(str(value).encode("utf-8", "surrogatepass"))
    return b"\n".join(out)


def secret_forms(secret: str) -> list[bytes]:
    """The byte strings that show `secret` was written: raw, lowercased, base64 at 3 offsets."""
    raw = secret.encode()
    forms = [raw, raw.lower()]
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + raw)
        # The part of the encoding that depends on the secret alone.
        forms.append(encoded[4 if shift else 0 : -4])
    return forms


def leaks(secret: str, data: bytes | str) -> bool:
    """Whether `data` holds `secret` in any of its `secret_forms`."""
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    return any(form in data for form in secret_forms(secret))
