"""Credentials kept out of every error message and log line: one function, `mask`.

A server may echo the key it was sent in its error message (a 401 from an
OpenAI-compatible proxy often does), and a base URL may carry
`user:password@`. Both end up in text a person pastes into an issue, so the
places that word a failure (the transports, the CLI's error line) pass it
through `mask` first. Keys are masked by their known shapes and by the
configured key itself (a custom key has no shape to find it by); URL
userinfo is masked always.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

__all__ = ["MASK", "mask"]

MASK: Final = "***"
"""What stands where a credential was."""

_MIN_KEY = 8
"""A configured key shorter than this is not searched for as text: it would mask ordinary words
(and a placeholder such as "none" is no secret)."""

_KEY_SHAPES: Final = re.compile(
    # OpenAI (sk-, sk-proj-), Anthropic (sk-ant-), OpenRouter (sk-or-) keys; then
    # whatever follows a Bearer or Basic scheme (Basic is user:password in
    # base64, what httpx sends for URL userinfo) or an api-key header or parameter.
    r"\b(?P<prefix>sk-(?:ant-|proj-|or-)?)[A-Za-z0-9_\-]{8,}"
    r"|(?P<scheme>\b(?:Bearer|Basic)\s+)[A-Za-z0-9._~+/\-]{8,}=*"
    r"|(?P<field>\b(?:x-)?api[-_]?key[\"']?\s*[:=]\s*[\"']?)[^\s\"',;&]{4,}",
    re.IGNORECASE,
)
_USERINFO: Final = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)[^/\s@?#]*@")


def mask(text: str, keys: Iterable[str | None] = ()) -> str:
    """`text` with every credential in it replaced by `MASK`.

    `keys` are the keys actually configured, masked wherever they appear
    (each at least eight characters; shorter ones are not secrets worth the
    false hits). Key-shaped tokens keep their public prefix (`sk-ant-***`),
    URLs keep their scheme (`https://***@host`).
    """
    for key in keys:
        if key and len(key) >= _MIN_KEY:
            text = text.replace(key, MASK)
    text = _USERINFO.sub(lambda m: f"{m['scheme']}{MASK}@", text)
    return _KEY_SHAPES.sub(_keep_prefix, text)


def _keep_prefix(match: re.Match[str]) -> str:
    prefix = match["prefix"] or match["scheme"] or match["field"] or ""
    return f"{prefix}{MASK}"
