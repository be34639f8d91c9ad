"""Credentials kept out of every error message and log line: one helper, `masked`.

A server may echo the key it was sent in its error message (a 401 from an
OpenAI-compatible proxy often does; Gemini and Bedrock quote keys too), and
a base URL may carry `user:password@`. Both end up in text a person pastes
into an issue, and in the `failed` note a session keeps of a prompt whose
request failed, so every place that words a failure (the transports, the
CLI's error line, the note) passes it through `masked` first. Keys are
masked by their known shapes and by the configured keys themselves (a custom
key has no shape to find it by): every backend's key variable, any other
`*_API_KEY` in the environment, and the keys the config file hands to MCP
servers. URL userinfo is masked always.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from typing import Final

__all__ = ["KEY_VARIABLES", "MASK", "configured_keys", "mask", "masked"]

MASK: Final = "***"
"""What stands where a credential was."""

KEY_VARIABLES: Final = (
    "ANTHROPIC_API_KEY",
    "OPENAI_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "AWS_BEARER_TOKEN_BEDROCK",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
)
"""The environment variables every backend reads a credential from (`carryall.backends`)."""

_MIN_KEY = 8
"""A configured key shorter than this is not searched for as text: it would mask ordinary words
(and a placeholder such as "none" is no secret)."""

# A name that says its value is a credential, in the environment or in an MCP
# server's `env` table.
_SECRET_NAME: Final = re.compile(
    r"(?:_API_KEY|_ACCESS_KEY|_TOKEN|_SECRET|PASSWORD)$", re.IGNORECASE
)
# A header that carries one.
_SECRET_HEADER: Final = re.compile(r"authorization|api[-_]?key|token|secret", re.IGNORECASE)

_KEY_SHAPES: Final = re.compile(
    # OpenAI (sk-, sk-proj-), Anthropic (sk-ant-), OpenRouter (sk-or-) keys; the
    # shapes of Google (AIza), Bedrock API keys (ABSK), AWS access key ids
    # (AKIA, ASIA), GitHub, Slack, Hugging Face and Stripe tokens; then
    # whatever follows a Bearer or Basic scheme (Basic is user:password in
    # base64, what httpx sends for URL userinfo), an api-key header or
    # parameter, an AWS secret or session token field, or a `key=` query
    # parameter (how Gemini's REST API is sent its key).
    r"\b(?P<prefix>sk-(?:ant-|proj-|or-)?)[A-Za-z0-9_\-]{8,}"
    r"|(?<![A-Za-z0-9_\-])(?P<shape>(?-i:"
    r"(?:AKIA|ASIA)(?=[0-9A-Z]{16}(?![A-Za-z0-9]))"
    r"|AIza(?=[0-9A-Za-z_\-]{35})"
    r"|ABSK(?=[A-Za-z0-9+/]{20})"
    r"|gh[pousr]_(?=[A-Za-z0-9]{20})|github_pat_(?=[A-Za-z0-9_]{20})"
    r"|xox[abprs]-(?=[A-Za-z0-9\-]{10})|hf_(?=[A-Za-z0-9]{20})"
    r"|[sr]k_(?:live|test)_(?=[0-9A-Za-z]{10})"
    r"))[A-Za-z0-9_\-+/]+=*"
    r"|(?P<scheme>\b(?:Bearer|Basic)\s+)[A-Za-z0-9._~+/\-]{8,}=*"
    r"|(?P<field>(?:\b(?:x-)?api[-_]?key|\b(?:aws_)?secret_access_key|\b(?:aws_)?session_token"
    r"|\bx-amz-security-token|[?&]key)[\"']?\s*[:=]\s*[\"']?)[^\s\"',;&]{4,}",
    re.IGNORECASE,
)
_USERINFO: Final = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)[^/\s@?#]*@")


def mask(text: str, keys: Iterable[str | None] = ()) -> str:
    """`text` with every credential in it replaced by `MASK`: key shapes, URL userinfo, `keys`.

    `keys` are keys known to be in use, masked wherever they appear (each at
    least eight characters; shorter ones are not secrets worth the false
    hits). Key-shaped tokens keep their public prefix (`sk-ant-***`,
    `AIza***`), URLs keep their scheme (`https://***@host`). An error path
    calls `masked`, which adds every configured key to `keys`.
    """
    from urllib.parse import quote  # with the first key to mask, not with every import

    for key in sorted({k for k in keys if k and len(k) >= _MIN_KEY}, key=len, reverse=True):
        # As sent, and as a URL or a JSON body quotes it (`/` as `%2F`, as `\/`).
        for form in {key, quote(key, safe=""), key.replace("/", "\\/")}:
            text = text.replace(form, MASK)
    text = _USERINFO.sub(lambda m: f"{m['scheme']}{MASK}@", text)
    return _KEY_SHAPES.sub(_keep_prefix, text)


def masked(text: str, keys: Iterable[str | None] = ()) -> str:
    """`text` as a failure may show it: `mask` with `keys` and every `configured_keys()`.

    The one helper every error path calls (a transport's error, the CLI's
    error line, a session's `failed` note), so a key configured anywhere is
    masked everywhere.
    """
    return mask(text, [*keys, *configured_keys()])


def configured_keys() -> list[str]:
    """Every credential carryall may be holding: the key variables, any other environment
    variable named like one (`*_API_KEY`, `*_TOKEN`, ...), and the secrets of MCP servers'
    `env` and `headers` in the config file."""
    keys = [os.environ.get(name) or "" for name in KEY_VARIABLES]
    keys += [value for name, value in os.environ.items() if _SECRET_NAME.search(name)]
    keys += _config_secrets()
    return [key for key in keys if len(key) >= _MIN_KEY]


def _config_secrets() -> list[str]:
    # Read on a failure only; a config file that cannot be read has no keys
    # to add here (its own error is told where it is loaded).
    from carryall.config import load_config
    from carryall.errors import CarryallError

    try:
        servers = load_config().mcp_servers
    except (CarryallError, OSError):
        return []
    found: list[str] = []
    for server in servers.values():
        found += [v for k, v in server.env.items() if _SECRET_NAME.search(k)]
        for name, value in server.headers.items():
            if _SECRET_HEADER.search(name):
                found += [value, value.partition(" ")[2]]  # `Bearer <token>`: the token too
    return found


def _keep_prefix(match: re.Match[str]) -> str:
    prefix = match["prefix"] or match["shape"] or match["scheme"] or match["field"] or ""
    return f"{prefix}{MASK}"
