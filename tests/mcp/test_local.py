"""An MCP server's image on the real local llama-server (no vision): its placeholder on the wire."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the MCP tests need the mcp extra: pip install 'carryall[mcp]'")

from carryall import local
from carryall.agent import Agent
from carryall.backends import open_backend
from carryall.mcp import McpToolbox
from tests.support.local import ATTEMPTS, MAX_STEPS, MAX_TOKENS
from tests.support.mcp_peer import everything_server

_STATUS = local.status()

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not _STATUS.ready, reason="the local backend is not installed; run `carryall local install`"
    ),
    pytest.mark.timeout(600),
]


def test_the_reference_servers_image_reaches_a_blind_model_as_its_placeholder(
    tmp_path: Path, recording_proxy: tuple[str, list[bytes]]
) -> None:
    url, bodies = recording_proxy
    with McpToolbox({"everything": everything_server()}) as box:
        box.start()
        tiny = [t for t in box.tools if t.name == "everything__get-tiny-image"]
        backend = open_backend("llama-server", base_url=url, max_retries=0)
        try:
            assert backend.capabilities.vision is False
            for _ in range(ATTEMPTS):
                bodies.clear()
                agent = Agent(backend, tools=tiny, max_steps=MAX_STEPS, max_tokens=MAX_TOKENS)
                agent.send("Call the everything__get-tiny-image tool to get the logo.")
                if any(m.images() for m in agent.messages):
                    break
        finally:
            backend.close()
    carrying = next(m for m in agent.messages if m.images())
    image = carrying.images()[0]  # the model may call it more than once in the round
    assert image.source == "everything/get-tiny-image image 1"
    sent = [json.dumps(json.loads(b)) for b in bodies]
    placeholder = image.placeholder()
    assert placeholder == "[image: everything/get-tiny-image image 1 (image/png)]"
    after = [wire for wire in sent if placeholder in wire]
    assert after, "no request carried the round's placeholder"
    for wire in sent:
        assert "image_url" not in wire and image.data not in wire
