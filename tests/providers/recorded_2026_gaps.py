# ruff: noqa: E501
"""The ledger of recorded-2026 checks that fail on today's code, and why.

Each key is (exchange id, check) of `tests/providers/test_recorded_2026.py`; the value is the
failure as the check words it (what was lost, refused or changed, and where). The test runs
each listed case as a strict xfail, so a gap that closes fails until its line is deleted.
"""

GAPS: dict[tuple[str, str], str] = {
    (
        "openai_compatible/2026/openrouter_claude_reasoning_stream#0",
        "sdk",
    ): "sdk: continued to its own model on OpenRouter, the answer's reasoning goes back as reasoning_content (the chat codec's spelling for every endpoint, DeepSeek's and llama-server's); OpenRouter's official SDK (openrouter 1.3.84, ChatRequest, its ChatAssistantMessage) names that field reasoning, beside reasoning_details, and drops reasoning_content (OpenRouter's ChatRequest dropped or changed .messages[N].reasoning_content). The fix is the chat codec's assistant writer (providers/openai.py) spelling it reasoning to openrouter.ai",
    (
        "openai_compatible/2026/openrouter_preserve_reasoning#1",
        "sdk",
    ): "sdk: continued to its own model on OpenRouter, the answer's reasoning goes back as reasoning_content (the chat codec's spelling for every endpoint, DeepSeek's and llama-server's); OpenRouter's official SDK (openrouter 1.3.84, ChatRequest, its ChatAssistantMessage) names that field reasoning, beside reasoning_details, and drops reasoning_content (OpenRouter's ChatRequest dropped or changed .messages[N].reasoning_content). The fix is the chat codec's assistant writer (providers/openai.py) spelling it reasoning to openrouter.ai",
    (
        "openai_compatible/2026/openrouter_thinking_high_alias#0",
        "sdk",
    ): "sdk: continued to its own model on OpenRouter, the answer's reasoning goes back as reasoning_content (the chat codec's spelling for every endpoint, DeepSeek's and llama-server's); OpenRouter's official SDK (openrouter 1.3.84, ChatRequest, its ChatAssistantMessage) names that field reasoning, beside reasoning_details, and drops reasoning_content (OpenRouter's ChatRequest dropped or changed .messages[N].reasoning_content). The fix is the chat codec's assistant writer (providers/openai.py) spelling it reasoning to openrouter.ai",
    (
        "openai_compatible/2026/openrouter_thinking_true_alias#0",
        "sdk",
    ): "sdk: continued to its own model on OpenRouter, the answer's reasoning goes back as reasoning_content (the chat codec's spelling for every endpoint, DeepSeek's and llama-server's); OpenRouter's official SDK (openrouter 1.3.84, ChatRequest, its ChatAssistantMessage) names that field reasoning, beside reasoning_details, and drops reasoning_content (OpenRouter's ChatRequest dropped or changed .messages[N].reasoning_content). The fix is the chat codec's assistant writer (providers/openai.py) spelling it reasoning to openrouter.ai",
    (
        "llama_server/2026/two_tool_calls_round#0",
        "echo",
    ): 'echo: the recorded assistant message (a text, two calls whose arguments json.dumps wrote, a space after each separator) is exactly what carryall\'s own file export writes, so the importer reads the spaced arguments as its own file form (else an exported history would not read back as the history it was) and the request sends them compact; a message laid out as carryall never writes one (content null or "" beside calls) keeps its argument text',
}
