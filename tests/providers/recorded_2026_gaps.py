# ruff: noqa: E501
"""The ledger of recorded-2026 checks that fail on today's code, and why.

Each key is (exchange id, check) of `tests/providers/test_recorded_2026.py`; the value is the
failure as the check words it (what was lost, refused or changed, and where). The test runs
each listed case as a strict xfail, so a gap that closes fails until its line is deleted.
"""

GAPS: dict[tuple[str, str], str] = {
    (
        "gemini/2026/file_search_grounding_stream_gemini_3#0",
        "continue",
    ): "continue: the next request to gemini-3-flash-preview left out customMetadata.key, customMetadata.stringValue, retrievedContext.fileSearchStore, retrievedContext.text (first: answer[0].groundingMetadata.groundingChunks[0].retrievedContext.text='Paris is the capital of France. The Eiffel Tower i')",
    (
        "gemini/2026/llm_gemini_3_thought_signatures#1",
        "decode",
    ): "decode: decode lost parts.text (first: answer[0].content.parts[1].text=' is 15.')",
    (
        "gemini/2026/llm_gemini_tools#2",
        "decode",
    ): "decode: decode lost parts.text (first: answer[0].content.parts[0].text='How')",
    (
        "gemini/2026/vercel_vertex_partial_args#0",
        "decode",
    ): "decode: decode lost partialArgs.jsonPath, partialArgs.stringValue (first: answer[0].content.parts[1].functionCall.partialArgs[0].jsonPath='$.recipe.ingredients[0].amount')",
    (
        "gemini/2026/vercel_vertex_partial_args#1",
        "decode",
    ): "decode: decode lost partialArgs.jsonPath (first: answer[0].content.parts[1].functionCall.partialArgs[0].jsonPath='$.location')",
    (
        "gemini/2026/vertex_logprobs#0",
        "decode",
    ): "decode: decode lost candidates.logProbability, candidates.token, candidates.tokenId, chosenCandidates.logProbability, chosenCandidates.token, chosenCandidates.tokenId (first: answer[0].logprobsResult.chosenCandidates[0].logProbability='-0.01972555')",
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
}
