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
    ): "sdk: the SDK request type refuses the body near {'id': 'srvtoolu_012xj8SM...ype': 'server_tool_use'}, input_t",
    (
        "anthropic/2026/advisor_tool_replay#1",
        "sdk",
    ): "sdk: the SDK request type refuses the body near {'id': 'srvtoolu_012xj8SM...ype': 'server_tool_use'}, input_t",
    (
        "anthropic/2026/advisor_tool_stream#0",
        "sdk",
    ): "sdk: the SDK request type refuses the body near {'type': 'server_tool_use... 'advisor', 'input': ''}, input_t",
    (
        "anthropic/2026/code_execution_container_reuse#0",
        "continue",
    ): "continue: the next request to claude-sonnet-4-5 left out bash_code_execution_tool_result.tool_use_id, server_tool_use.id",
    (
        "anthropic/2026/compaction_stream_with_cache#0",
        "stream",
    ): "stream: ProviderError: Anthropic stream event (content_block_delta): unknown delta type 'compaction_delta'",
    (
        "anthropic/2026/memory_tool_alias#1",
        "echo",
    ): 'echo: echo differs at messages[2]: sent [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01YC8RhZeDTZRbb8n1gUFTmb", "content": "The user lives in Mexico City."}]}] recorded [{"content": [{"content": "The user lives in Mexico City.", "is_error": false, "tool_use_id": "toolu',
    (
        "anthropic/2026/mid_system_tool_pair#0",
        "echo",
    ): 'echo: echo differs at messages[2]: sent [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": "Prefer explicit signatures."}]}] recorded [{"content": [{"content": [{"text": "Prefer explicit signatures.", "type": "text"}], "is_error": false, "tool_use_id": "call_1"',
    (
        "anthropic/2026/parallel_tool_calls_haiku_alias#1",
        "echo",
    ): 'echo: echo differs at messages[2]: sent [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_0167cfEnoQaPviGdVXA95zcu", "content": "alice is bob\'s wife"}, {"type": "tool_result" recorded [{"content": [{"content": "alice is bob\'s wife", "is_error": false, "tool_use_id": "toolu_',
    (
        "anthropic/2026/strict_tool_rounds_alias#1",
        "echo",
    ): 'echo: echo differs at messages[2]: sent [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01Ttepb9joVoQFHP568v7UAL", "content": "Japan"}]}] recorded [{"content": [{"content": "Japan", "is_error": false, "tool_use_id": "toolu_01Ttepb9joVoQFHP568v7UAL", "type": "tool_result"}',
    (
        "anthropic/2026/strict_tool_rounds_alias#2",
        "echo",
    ): 'echo: echo differs at messages[2]: sent [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01Ttepb9joVoQFHP568v7UAL", "content": "Japan"}]}] recorded [{"content": [{"content": "Japan", "is_error": false, "tool_use_id": "toolu_01Ttepb9joVoQFHP568v7UAL", "type": "tool_result"}',
    (
        "anthropic/2026/thinking_alias_continued#0",
        "continue",
    ): "continue: the next request to claude-sonnet-4-5 left out thinking.signature, thinking.thinking",
    (
        "anthropic/2026/tool_search_surface#1",
        "echo",
    ): 'echo: echo differs at messages[2]: sent [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_012vhSRCUoTpkR8JWcxJkw6M", "content": [{"tool_name": "search_only_tool", "type": "to recorded [{"content": [{"content": [{"tool_name": "search_only_tool", "type": "tool_reference"}], "',
    (
        "anthropic/2026/tool_search_surface#2",
        "echo",
    ): 'echo: echo differs at messages[2]: sent [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_012vhSRCUoTpkR8JWcxJkw6M", "content": [{"tool_name": "search_only_tool", "type": "to recorded [{"content": [{"content": [{"tool_name": "search_only_tool", "type": "tool_reference"}], "',
    (
        "bedrock/2026/kimi_k2_thinking_tool_call#1",
        "echo",
    ): 'echo: echo differs at messages[2]: sent [{"role": "user", "content": [{"toolResult": {"toolUseId": "functions.get_temperature:0", "content": [{"text": "30\\u00b0C"}]}}]}] recorded [{"role": "user", "content": [{"toolResult": {"toolUseId": "functions.get_temperature:0", "content": [{"text": "30\\u00b0C',
    (
        "bedrock/2026/nova_code_execution#1",
        "echo",
    ): 'echo: echo differs at messages[2]: sent [{"role": "user", "content": [{"toolResult": {"toolUseId": "tooluse_DaRsVjwcShCI_3pOsIsWqg", "content": [{"text": "Final result processed."}]}}, {"text": "Now m recorded [{"role": "user", "content": [{"toolResult": {"toolUseId": "tooluse_DaRsVjwcShCI_3pOsIsWqg',
    (
        "bedrock/2026/nova_code_execution_stream#0",
        "stream",
    ): "stream: ProviderError: response.output.message.content[1]: a content block has exactly one kind, got []",
    (
        "bedrock/2026/tool_with_thinking_claude_3_7#1",
        "echo",
    ): 'echo: echo differs at messages[2]: sent [{"role": "user", "content": [{"toolResult": {"toolUseId": "tooluse_W9DaUFg4Tj2cRPpndqxWSg", "content": [{"text": "Mexico"}]}}]}] recorded [{"role": "user", "content": [{"toolResult": {"toolUseId": "tooluse_W9DaUFg4Tj2cRPpndqxWSg", "content": [{"text": "Mexico',
    (
        "gemini/2026/file_search_grounding_stream_gemini_3#0",
        "continue",
    ): "continue: the next request to gemini-3-flash-preview left out customMetadata.key, customMetadata.stringValue, retrievedContext.fileSearchStore, retrievedContext.text, toolCall.id, toolCall.toolType, toolResponse.id, toolResponse.toolType",
    (
        "gemini/2026/file_search_grounding_stream_gemini_3#1",
        "echo",
    ): 'echo: echo differs at contents[1]: sent [{"role": "model", "parts": [{"text": "The capital of France is **Paris**.\\n\\nParis is not only the capital but also the largest city in France. It is a major g recorded [{"parts": [{"thoughtSignature": "EpYSCpMSCAISjhIBDDnWx-meFE0lq4hrGQYuMZoLV_gi_Nj-DoiDjsCq',
    ("gemini/2026/llm_gemini_3_thought_signatures#1", "decode"): "decode: decode lost parts.text",
    (
        "gemini/2026/llm_gemini_3_thought_signatures#1",
        "echo",
    ): "echo: BlockError: a content's part: this part has no block form",
    (
        "gemini/2026/llm_gemini_tools#1",
        "echo",
    ): "echo: BlockError: a content's part: this part has no block form",
    ("gemini/2026/llm_gemini_tools#2", "decode"): "decode: decode lost parts.text",
    (
        "gemini/2026/llm_gemini_tools#2",
        "echo",
    ): "echo: BlockError: a content's part: this part has no block form",
    (
        "gemini/2026/thinking_signed_gemini_3_pro#0",
        "continue",
    ): "continue: the next request to gemini-3-pro-preview left out parts.text",
    (
        "gemini/2026/thinking_signed_gemini_3_pro#1",
        "echo",
    ): 'echo: echo differs at contents[1]: sent [{"role": "model", "parts": [{"text": "Crossing the street safely is a fundamental skill that requires awareness and patience. Here is a step-by-step guide to d recorded [{"parts": [{"text": "**A Safe Street-Crossing Guide: My Thought Process**\\n\\nAlright, let',
    (
        "gemini/2026/vercel_vertex_partial_args#0",
        "decode",
    ): "decode: ProviderError: stream chunk 2.candidates[0].content.parts[0].functionCall needs a name, got null",
    (
        "gemini/2026/vercel_vertex_partial_args#1",
        "decode",
    ): "decode: ProviderError: stream chunk 2.candidates[0].content.parts[0].functionCall needs a name, got null",
    (
        "gemini/2026/vertex_logprobs#0",
        "decode",
    ): "decode: decode lost candidates.logProbability, candidates.token, candidates.tokenId, chosenCandidates.logProbability, chosenCandidates.token, chosenCandidates.tokenId",
    (
        "gemini/2026/vertex_snake_case_audio_tool_return#1",
        "echo",
    ): "echo: BlockError: a content's part: this part has no block form",
    (
        "gemini/2026/vertex_snake_case_audio_tool_return#2",
        "echo",
    ): "echo: BlockError: a content's part: this part has no block form",
    (
        "gemini/2026/vertex_snake_case_uploaded_video#1",
        "echo",
    ): "echo: BlockError: a content's part: this part has no block form",
    (
        "gemini/2026/vertex_snake_case_uploaded_video#2",
        "echo",
    ): "echo: BlockError: a content's part: this part has no block form",
    (
        "gemini/2026/vertex_snake_case_url_image_tool_return#1",
        "echo",
    ): "echo: BlockError: a content's part: this part has no block form",
    (
        "gemini/2026/vertex_snake_case_url_image_tool_return#2",
        "echo",
    ): "echo: BlockError: a content's part: this part has no block form",
    (
        "openai_compatible/2026/openrouter_cache_point_alias#0",
        "echo",
    ): 'echo: echo differs at messages[0]: sent [{"role": "user", "content": "Final context to cache. Final context to cache. Final context to cache. Final context to cache. Final context to cache. Final cont recorded [{"content": [{"cache_control": {"ttl": "1h", "type": "ephemeral"}, "text": "Final context',
    (
        "openai_compatible/2026/openrouter_cache_point_alias#0",
        "import",
    ): "import: import lost ephemeral.ttl",
    (
        "openai_compatible/2026/openrouter_claude_reasoning_stream#0",
        "decode",
    ): "decode: decode lost reasoning.text.text",
    (
        "openai_compatible/2026/openrouter_claude_reasoning_stream#0",
        "stream",
    ): "stream: stream and whole answer differ",
    (
        "responses/2026/code_interpreter_with_reasoning#0",
        "continue",
    ): "continue: the next request to gpt-5 left out code_interpreter_call.code, code_interpreter_call.container_id, code_interpreter_call.id, message.id, reasoning.encrypted_content, reasoning.id",
    (
        "responses/2026/code_interpreter_with_reasoning#0",
        "echo",
    ): 'echo: echo differs at an input item: sent [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "what is 65465-6544 * 65464-6+1.02255"}]}] recorded [{"content": "what is 65465-6544 * 65464-6+1.02255", "role": "user"}]',
    (
        "responses/2026/code_interpreter_with_reasoning#1",
        "echo",
    ): "echo: BlockError: an input item: item type 'code_interpreter_call' has no block form",
    (
        "responses/2026/code_interpreter_with_reasoning#1",
        "import",
    ): "import: BlockError: an input item: item type 'code_interpreter_call' has no block form",
    (
        "responses/2026/compacted_history#0",
        "echo",
    ): "echo: BlockError: an input item: item type 'compaction' has no block form",
    (
        "responses/2026/file_search_alias#0",
        "echo",
    ): 'echo: echo differs at an input item: sent [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "What is the capital of France?"}]}] recorded [{"content": "What is the capital of France?", "role": "user"}]',
    (
        "responses/2026/file_search_alias#1",
        "echo",
    ): 'echo: echo differs at an input item: sent [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "What is the capital of France?"}]}] recorded [{"content": "What is the capital of France?", "role": "user"}]',
    (
        "responses/2026/file_search_stream#0",
        "echo",
    ): 'echo: echo differs at an input item: sent [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "What is the capital of France?"}]}] recorded [{"content": "What is the capital of France?", "role": "user"}]',
    (
        "responses/2026/file_search_with_results#0",
        "echo",
    ): 'echo: echo differs at an input item: sent [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "What is the capital of France?"}]}] recorded [{"content": "What is the capital of France?", "role": "user"}]',
    (
        "responses/2026/mcp_connector#0",
        "echo",
    ): 'echo: echo differs at an input item: sent [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "What do I have on my Google Calendar for today?"}]}] recorded [{"content": "What do I have on my Google Calendar for today?", "role": "user"}]',
    (
        "responses/2026/mcp_server_tool#0",
        "continue",
    ): "continue: the next request to o4-mini left out mcp_call.id, mcp_call.name, mcp_call.question, mcp_call.server_label, mcp_list_tools.id, mcp_list_tools.name, mcp_list_tools.server_label, message.id, reasoning.encrypted_content, reasoning.id",
    (
        "responses/2026/mcp_server_tool#0",
        "echo",
    ): 'echo: echo differs at an input item: sent [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Can you tell me more about the pydantic/pydantic-ai repo? Keep your answer shor recorded [{"content": "Can you tell me more about the pydantic/pydantic-ai repo? Keep your answer',
    (
        "responses/2026/mcp_server_tool#1",
        "echo",
    ): "echo: BlockError: an input item: item type 'mcp_list_tools' has no block form",
    (
        "responses/2026/mcp_server_tool#1",
        "import",
    ): "import: BlockError: an input item: item type 'mcp_list_tools' has no block form",
    (
        "responses/2026/phase_commentary_final#0",
        "continue",
    ): "continue: the next request to gpt-5.5 left out function_call.id, message.id, message.phase, reasoning.encrypted_content, reasoning.id",
    (
        "responses/2026/phase_commentary_final#0",
        "echo",
    ): 'echo: echo differs at an input item: sent [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "What is the capital of PotatoLand?"}]}] recorded [{"content": "What is the capital of PotatoLand?", "role": "user"}]',
    (
        "responses/2026/phase_commentary_final#1",
        "echo",
    ): 'echo: echo differs at an input item: sent [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "What is the capital of PotatoLand?"}]}] recorded [{"content": "What is the capital of PotatoLand?", "role": "user"}]',
    (
        "responses/2026/phase_commentary_final#1",
        "import",
    ): "import: import lost function_call.id, message.id, message.phase",
    (
        "responses/2026/reasoning_summary_auto#0",
        "echo",
    ): 'echo: echo differs at an input item: sent [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Write a Python function that calculates the factorial of a number. Think step b recorded [{"content": "Write a Python function that calculates the factorial of a number. Think s',
    (
        "responses/2026/reasoning_then_function_calls#0",
        "continue",
    ): "continue: the next request to gpt-5 left out function_call.id, function_call.plan, reasoning.encrypted_content, reasoning.id",
    (
        "responses/2026/reasoning_then_function_calls#0",
        "echo",
    ): 'echo: echo differs at an input item: sent [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Compose a 12-line poem where the first letters of the odd-numbered lines form t recorded [{"content": "Compose a 12-line poem where the first letters of the odd-numbered lines f',
    (
        "responses/2026/reasoning_then_function_calls#1",
        "echo",
    ): 'echo: echo differs at an input item: sent [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Compose a 12-line poem where the first letters of the odd-numbered lines form t recorded [{"content": "Compose a 12-line poem where the first letters of the odd-numbered lines f',
    (
        "responses/2026/reasoning_then_function_calls#1",
        "import",
    ): "import: import lost function_call.id",
    (
        "responses/2026/url_citation_annotations#0",
        "echo",
    ): 'echo: echo differs at an input item: sent [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "What is the tallest mountain in Alberta? Provide one sentence with a citation." recorded [{"content": "What is the tallest mountain in Alberta? Provide one sentence with a citat',
    (
        "responses/2026/url_citation_annotations#1",
        "echo",
    ): 'echo: echo differs at an input item: sent [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "What is the tallest mountain in Alberta? Provide one sentence with a citation." recorded [{"content": "What is the tallest mountain in Alberta? Provide one sentence with a citat',
    (
        "responses/2026/url_citation_annotations_stream#0",
        "echo",
    ): 'echo: echo differs at an input item: sent [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "What is the tallest mountain in Alberta? Provide one sentence with a citation." recorded [{"content": "What is the tallest mountain in Alberta? Provide one sentence with a citat',
    (
        "responses/2026/web_search_alias_continued#0",
        "continue",
    ): "continue: the next request to gpt-5 left out message.id, reasoning.encrypted_content, reasoning.id, search.query, web_search_call.id",
    (
        "responses/2026/web_search_alias_continued#0",
        "echo",
    ): 'echo: echo differs at an input item: sent [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "What is the weather in San Francisco today?"}]}] recorded [{"content": "What is the weather in San Francisco today?", "role": "user"}]',
    (
        "responses/2026/web_search_alias_continued#1",
        "echo",
    ): "echo: BlockError: an input item: item type 'web_search_call' has no block form",
    (
        "responses/2026/web_search_alias_continued#1",
        "import",
    ): "import: BlockError: an input item: item type 'web_search_call' has no block form",
    (
        "responses/2026/web_search_no_external_access#0",
        "echo",
    ): 'echo: echo differs at an input item: sent [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Search the web for the year the Eiffel Tower opened to the public. Reply with t recorded [{"content": "Search the web for the year the Eiffel Tower opened to the public. Reply w',
    (
        "responses/2026/web_search_stream_then_whole#0",
        "continue",
    ): "continue: the next request to gpt-5 left out message.id, reasoning.id, search.query, web_search_call.id",
    (
        "responses/2026/web_search_stream_then_whole#0",
        "echo",
    ): 'echo: echo differs at an input item: sent [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "What is the weather in San Francisco today?"}]}] recorded [{"content": "What is the weather in San Francisco today?", "role": "user"}]',
    (
        "responses/2026/web_search_stream_then_whole#1",
        "echo",
    ): "echo: BlockError: an input item: item type 'web_search_call' has no block form",
    (
        "responses/2026/web_search_stream_then_whole#1",
        "import",
    ): "import: BlockError: an input item: item type 'web_search_call' has no block form",
}
