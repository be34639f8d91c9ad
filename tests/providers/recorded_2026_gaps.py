# ruff: noqa: E501
"""The ledger of recorded-2026 checks that fail on today's code, and why.

Each key is (exchange id, check) of `tests/providers/test_recorded_2026.py`; the value is the
failure as the check words it (what was lost, refused or changed, and where). The test runs
each listed case as a strict xfail, so a gap that closes fails until its line is deleted.
"""

GAPS: dict[tuple[str, str], str] = {
    (
        "anthropic/2026/advisor_tool_replay#0",
        "sdk",
    ): "sdk: the installed anthropic SDK's ServerToolUseBlockParam.name knows no 'advisor' tool, and the recording's own server_tool_use block names it (its input goes as {})",
    (
        "anthropic/2026/advisor_tool_replay#1",
        "sdk",
    ): "sdk: the installed anthropic SDK's ServerToolUseBlockParam.name knows no 'advisor' tool, and the recording's own server_tool_use block names it (its input goes as {})",
    (
        "anthropic/2026/advisor_tool_stream#0",
        "sdk",
    ): "sdk: the installed anthropic SDK's ServerToolUseBlockParam.name knows no 'advisor' tool, and the recording's own server_tool_use block names it (its input goes as {})",
    (
        "anthropic/2026/compaction_stream_with_cache#0",
        "stream",
    ): "stream: stream and whole answer differ",
    (
        "bedrock/2026/nova_code_execution_stream#0",
        "stream",
    ): "stream: ProviderError: response.output.message.content[1]: a content block has exactly one kind, got []",
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
        "decode",
    ): "decode: decode lost reasoning.text.text (first: answer[0].reasoning_details[1].text='This')",
    (
        "openai_compatible/2026/openrouter_claude_reasoning_stream#0",
        "stream",
    ): "stream: stream and whole answer differ",
    (
        "responses/2026/reasoning_then_function_calls#0",
        "continue",
    ): "continue: the next request to gpt-5 left out function_call.plan (first: answer[1].arguments.plan='Plan:\n1) Determine required first-letter acrostics'): the value is sent inside the call's JSON arguments string, escaped once more than the walk looks for",
    (
        "responses/2026/file_search_with_results#0",
        "sdk",
    ): "sdk: continued to its own model, the file_search_call item goes back as the API sent it, with fields the installed openai SDK's input type does not know",
    (
        "responses/2026/web_search_stream_then_whole#0",
        "sdk",
    ): "sdk: continued to its own model, the web_search_call item's sources of type 'api' go back as the API sent them; the installed openai SDK's input type knows only 'url'",
    (
        "responses/2026/web_search_stream_then_whole#1",
        "sdk",
    ): "sdk: continued to its own model, the web_search_call item's sources of type 'api' go back as the API sent them; the installed openai SDK's input type knows only 'url'",
    (
        "openai_compatible/2026/openrouter_cache_point_alias#0",
        "sdk",
    ): "sdk: the text part goes back with the cache_control the recording sent (an OpenRouter extension); the installed openai SDK's text part type knows no such key",
    (
        "llama_server/2026/two_tool_calls_round#0",
        "echo",
    ): 'echo: the recorded assistant message (a text, two calls whose arguments json.dumps wrote, a space after each separator) is exactly what carryall\'s own file export writes, so the importer reads the spaced arguments as its own file form (else an exported history would not read back as the history it was) and the request sends them compact; a message laid out as carryall never writes one (content null or "" beside calls) keeps its argument text',
}
