"""`Capabilities` (what the model on the other end can do) and `CachePolicy`.

Their own module, so the backend table (`carryall.backend_specs`) and the
config file's checks, which every session reader loads, can name them
without loading the codecs; `carryall.providers` exports both as its own.
"""

from __future__ import annotations

from typing import Literal, TypeAlias

import msgspec

__all__ = ["CachePolicy", "Capabilities"]

CachePolicy: TypeAlias = Literal["off", "auto"]
"""Prompt caching: `auto` places each wire's cache markers (`carryall.providers.caching`)."""


class Capabilities(msgspec.Struct, frozen=True):
    """What the model on the other end can do; every encoder takes one.

    `vision`: it can see images (otherwise each renders as its placeholder
    line). `native_tools`: it takes tool definitions and returns structured
    calls (otherwise prompt mode). `thinking`: it can return reasoning.
    """

    vision: bool = True
    native_tools: bool = True
    thinking: bool = False
