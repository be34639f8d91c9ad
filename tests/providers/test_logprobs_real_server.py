"""Token probabilities from a real llama-server, asked through `extra`, whole and streamed.

The embedded SmolLM2 model answers one greedy request twice through
carryall's own backend, once whole and once streamed, asked for each
token's probability and its two likeliest rivals (`logprobs`,
`top_logprobs`) with the prompt cache off, so both answers are computed
alike. The streamed answer's `Response.logprobs` (every chunk's tokens in
turn) must be the whole answer's, token ids and bytes included, and the
tokens must spell the answer's text.
"""

from __future__ import annotations

import pytest

from carryall import local
from carryall.backends import open_backend
from carryall.blocks import Message
from carryall.providers import ModelOptions, Request, Response

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

ASKED = ModelOptions(
    temperature=0,
    top_k=1,
    seed=1,
    extra={"llama-server": {"logprobs": True, "top_logprobs": 2, "cache_prompt": False}},
)


def _answer(server: local.LocalServer, *, stream: bool) -> Response:
    backend = open_backend("llama-server", base_url=server.base_url, stream=stream, max_retries=0)
    try:
        request = Request(
            model="", messages=(Message.user("Say hello."),), max_tokens=8, options=ASKED
        )
        return backend.complete(request)
    finally:
        backend.close()


def test_a_streamed_answer_has_the_token_probabilities_of_the_whole_one(
    server: local.LocalServer,
) -> None:
    whole = _answer(server, stream=False)
    streamed = _answer(server, stream=True)
    assert whole.logprobs is not None, "the server sent no token probabilities"
    tokens = whole.logprobs.tokens
    assert tokens and "".join(t.token for t in tokens) == whole.message.text()
    for token in tokens:
        # llama-server names each token's id; greedy, the chosen token leads its rivals.
        assert token.token_id is not None and token.token_bytes == tuple(token.token.encode())
        assert len(token.top) == 2 and token.top[0].token_id == token.token_id
    assert streamed.message == whole.message
    assert streamed.logprobs == whole.logprobs
    assert [d for d in whole.downgrades if "logprobs" in d.reason] == []
