"""Comparing answers whose blocks carry their wire's spelling (`carryall.Spelling`)."""

from __future__ import annotations

import json

import msgspec

from carryall.blocks import Message


def unspelled(message: Message) -> Message:
    """`message` with every block's spelling left off: what the block model itself holds."""
    return Message(
        message.role,
        tuple(
            msgspec.structs.replace(block, spelling=None)
            if getattr(block, "spelling", None) is not None
            else block
            for block in message.content
        ),
    )


def per_request_ids_apart(message: Message) -> Message:
    """`message` without the item ids a server makes afresh per request, in its spellings.

    Two requests for the same answer (one streamed, one whole) get different
    item ids and may list an item's fields in another order; everything else
    a spelling holds must agree.
    """
    blocks = []
    for block in message.content:
        spelling = getattr(block, "spelling", None)
        if spelling is not None and spelling.extra:
            fields = {k: v for k, v in json.loads(spelling.extra).items() if k != "id"}
            extra = json.dumps(fields, sort_keys=True)
            block = msgspec.structs.replace(
                block, spelling=msgspec.structs.replace(spelling, extra=extra)
            )
        blocks.append(block)
    return Message(message.role, tuple(blocks))
