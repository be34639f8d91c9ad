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
        "anthropic/2026/compaction_stream_with_cache#0",
        "stream",
    ): "stream: stream and whole answer differ",
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
    ): "continue: the next request to gemini-3-flash-preview left out customMetadata.key, customMetadata.stringValue, retrievedContext.fileSearchStore, retrievedContext.text (first: answer[0].groundingMetadata.groundingChunks[0].retrievedContext.text='Paris is the capital of France. The Eiffel Tower i')",
    (
        "gemini/2026/file_search_grounding_stream_gemini_3#1",
        "echo",
    ): 'echo: echo differs at contents[1]: sent [{"role": "model", "parts": [{"thoughtSignature": "EpYSCpMSCAISjhIBDDnWx-meFE0lq4hrGQYuMZoLV_gi_Nj-DoiDjsCqvSsP2fXzn_h_ya43XIWuvWlsYEzJdGxyavjiV-wb", "toolCall" recorded [{"parts": [{"thoughtSignature": "EpYSCpMSCAISjhIBDDnWx-meFE0lq4hrGQYuMZoLV_gi_Nj-DoiDjsCq',
    (
        "gemini/2026/llm_gemini_3_thought_signatures#1",
        "decode",
    ): "decode: decode lost parts.text (first: answer[0].content.parts[1].text=' is 15.')",
    (
        "gemini/2026/llm_gemini_3_thought_signatures#1",
        "echo",
    ): 'echo: echo differs at contents[1]: sent [{"role": "model", "parts": [{"functionCall": {"id": "call_1", "name": "multiply", "args": {"y": 3, "x": 5}}, "thoughtSignature": "Et0BCtoBAXLI2nwMB4momyXTj+K3O recorded [{"role": "model", "parts": [{"text": ""}, {"function_call": {"name": "multiply", "args": ',
    (
        "gemini/2026/llm_gemini_tools#1",
        "echo",
    ): 'echo: echo differs at contents[1]: sent [{"role": "model", "parts": [{"functionCall": {"id": "call_27db36357f594e73b557ec8f70da9e87", "name": "pelican_name_generator", "args": {}}, "thoughtSignature": recorded [{"role": "model", "parts": [{"function_call": {"name": "pelican_name_generator", "args": ',
    (
        "gemini/2026/llm_gemini_tools#2",
        "decode",
    ): "decode: decode lost parts.text (first: answer[0].content.parts[0].text='How')",
    (
        "gemini/2026/llm_gemini_tools#2",
        "echo",
    ): 'echo: echo differs at contents[1]: sent [{"role": "model", "parts": [{"functionCall": {"id": "call_27db36357f594e73b557ec8f70da9e87", "name": "pelican_name_generator", "args": {}}, "thoughtSignature": recorded [{"role": "model", "parts": [{"function_call": {"name": "pelican_name_generator", "args": ',
    (
        "gemini/2026/thinking_signed_gemini_3_pro#0",
        "continue",
    ): "continue: the next request to gemini-3-pro-preview left out parts.text (first: answer[0].content.parts[0].text='**A Safe Street-Crossing Guide: My Thought Process')",
    (
        "gemini/2026/thinking_signed_gemini_3_pro#1",
        "echo",
    ): 'echo: echo differs at contents[1]: sent [{"role": "model", "parts": [{"text": "Crossing the street safely is a fundamental skill that requires awareness and patience. Here is a step-by-step guide to d recorded [{"parts": [{"text": "**A Safe Street-Crossing Guide: My Thought Process**\\n\\nAlright, let',
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
        "gemini/2026/vertex_snake_case_audio_tool_return#1",
        "echo",
    ): 'echo: echo differs at contents[1]: sent [{"role": "model", "parts": [{"functionCall": {"id": "pyd_ai_643dd3d7cf8b46809ec8b53551b1b77c", "name": "list_files", "args": {}}, "thoughtSignature": "CtAEAY89 recorded [{"parts": [{"function_call": {"args": {}, "id": "pyd_ai_643dd3d7cf8b46809ec8b53551b1b77c"',
    (
        "gemini/2026/vertex_snake_case_audio_tool_return#2",
        "echo",
    ): 'echo: echo differs at contents[1]: sent [{"role": "model", "parts": [{"functionCall": {"id": "pyd_ai_643dd3d7cf8b46809ec8b53551b1b77c", "name": "list_files", "args": {}}, "thoughtSignature": "CtAEAY89 recorded [{"parts": [{"function_call": {"args": {}, "id": "pyd_ai_643dd3d7cf8b46809ec8b53551b1b77c"',
    (
        "gemini/2026/vertex_snake_case_uploaded_video#1",
        "echo",
    ): 'echo: echo differs at contents[1]: sent [{"role": "model", "parts": [{"functionCall": {"id": "pyd_ai_1b1c860905b6476c9ac5f7b5ff154c58", "name": "list_files", "args": {}}, "thoughtSignature": "CvYDAY89 recorded [{"parts": [{"function_call": {"args": {}, "id": "pyd_ai_1b1c860905b6476c9ac5f7b5ff154c58"',
    (
        "gemini/2026/vertex_snake_case_uploaded_video#2",
        "echo",
    ): 'echo: echo differs at contents[1]: sent [{"role": "model", "parts": [{"functionCall": {"id": "pyd_ai_1b1c860905b6476c9ac5f7b5ff154c58", "name": "list_files", "args": {}}, "thoughtSignature": "CvYDAY89 recorded [{"parts": [{"function_call": {"args": {}, "id": "pyd_ai_1b1c860905b6476c9ac5f7b5ff154c58"',
    (
        "gemini/2026/vertex_snake_case_url_image_tool_return#1",
        "echo",
    ): 'echo: echo differs at contents[1]: sent [{"role": "model", "parts": [{"functionCall": {"id": "pyd_ai_66ab27b68c8d449e987257dfe420c0e9", "name": "list_files", "args": {}}, "thoughtSignature": "CqwLAY89 recorded [{"parts": [{"function_call": {"args": {}, "id": "pyd_ai_66ab27b68c8d449e987257dfe420c0e9"',
    (
        "gemini/2026/vertex_snake_case_url_image_tool_return#2",
        "echo",
    ): 'echo: echo differs at contents[1]: sent [{"role": "model", "parts": [{"functionCall": {"id": "pyd_ai_66ab27b68c8d449e987257dfe420c0e9", "name": "list_files", "args": {}}, "thoughtSignature": "CqwLAY89 recorded [{"parts": [{"function_call": {"args": {}, "id": "pyd_ai_66ab27b68c8d449e987257dfe420c0e9"',
    (
        "openai_compatible/2026/openrouter_cache_point_alias#0",
        "echo",
    ): 'echo: echo differs at messages[0]: sent [{"role": "user", "content": "Final context to cache. Final context to cache. Final context to cache. Final context to cache. Final context to cache. Final cont recorded [{"content": [{"cache_control": {"ttl": "1h", "type": "ephemeral"}, "text": "Final context',
    (
        "openai_compatible/2026/openrouter_cache_point_alias#0",
        "import",
    ): "import: import lost ephemeral.ttl (first: request.messages[0].content[0].cache_control.ttl='1h')",
    (
        "openai_compatible/2026/openrouter_claude_reasoning_stream#0",
        "decode",
    ): "decode: decode lost reasoning.text.text (first: answer[0].reasoning_details[1].text='This')",
    (
        "openai_compatible/2026/openrouter_claude_reasoning_stream#0",
        "stream",
    ): "stream: stream and whole answer differ",
    (
        "responses/2026/code_interpreter_with_reasoning#0",
        "continue",
    ): "continue: the next request to gpt-5 left out code_interpreter_call.container_id, code_interpreter_call.id, message.id, reasoning.encrypted_content, reasoning.id (first: answer[0].encrypted_content='gAAAAABozbpoKwjspVdWvC2skgCFSKx1Fiw9QGDrOxixFaC8O5')",
    (
        "responses/2026/code_interpreter_with_reasoning#0",
        "echo",
    ): 'echo: echo differs at input[0]: sent [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "what is 65465-6544 * 65464-6+1.02255"}]}] recorded [{"content": "what is 65465-6544 * 65464-6+1.02255", "role": "user"}]',
    (
        "responses/2026/code_interpreter_with_reasoning#1",
        "echo",
    ): 'echo: echo differs at input[0]: sent [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "what is 65465-6544 * 65464-6+1.02255"}]}] recorded [{"content": "what is 65465-6544 * 65464-6+1.02255", "role": "user"}]',
    (
        "responses/2026/code_interpreter_with_reasoning#1",
        "import",
    ): "import: import lost message.id (first: request.messages[4].id='msg_68cdba6652ac81a3a58625883261465809b7445677780c')",
    (
        "responses/2026/compacted_history#0",
        "echo",
    ): 'echo: echo differs at input[1]: sent [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "And 5+5?"}]}] recorded [{"content": "And 5+5?", "role": "user"}]',
    (
        "responses/2026/file_search_alias#0",
        "echo",
    ): 'echo: echo differs at input[0]: sent [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "What is the capital of France?"}]}] recorded [{"content": "What is the capital of France?", "role": "user"}]',
    (
        "responses/2026/file_search_alias#1",
        "echo",
    ): 'echo: echo differs at input[0]: sent [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "What is the capital of France?"}]}] recorded [{"content": "What is the capital of France?", "role": "user"}]',
    (
        "responses/2026/file_search_stream#0",
        "echo",
    ): 'echo: echo differs at input[0]: sent [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "What is the capital of France?"}]}] recorded [{"content": "What is the capital of France?", "role": "user"}]',
    (
        "responses/2026/file_search_with_results#0",
        "echo",
    ): 'echo: echo differs at input[0]: sent [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "What is the capital of France?"}]}] recorded [{"content": "What is the capital of France?", "role": "user"}]',
    (
        "responses/2026/mcp_connector#0",
        "echo",
    ): 'echo: echo differs at input[0]: sent [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "What do I have on my Google Calendar for today?"}]}] recorded [{"content": "What do I have on my Google Calendar for today?", "role": "user"}]',
    (
        "responses/2026/mcp_server_tool#0",
        "continue",
    ): "continue: the next request to o4-mini left out mcp_call.id, mcp_list_tools.id, message.id, reasoning.encrypted_content, reasoning.id (first: answer[0].id='mcpl_0083938b3a28070e0068fabd81d51081a09d4b183ced6')",
    (
        "responses/2026/mcp_server_tool#0",
        "echo",
    ): 'echo: echo differs at input[0]: sent [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Can you tell me more about the pydantic/pydantic-ai repo? Keep your answer shor recorded [{"content": "Can you tell me more about the pydantic/pydantic-ai repo? Keep your answer shor',
    (
        "responses/2026/mcp_server_tool#1",
        "echo",
    ): 'echo: echo differs at input[0]: sent [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Can you tell me more about the pydantic/pydantic-ai repo? Keep your answer shor recorded [{"content": "Can you tell me more about the pydantic/pydantic-ai repo? Keep your answer shor',
    (
        "responses/2026/mcp_server_tool#1",
        "import",
    ): "import: import lost message.id (first: request.messages[5].id='msg_0083938b3a28070e0068fabd989bb481a08c61416ab343')",
    (
        "responses/2026/phase_commentary_final#0",
        "continue",
    ): "continue: the next request to gpt-5.5 left out function_call.id, message.id, message.phase, reasoning.encrypted_content, reasoning.id (first: answer[0].encrypted_content='gAAAAABp79WDw4XrgvYRqT5JP7i32L_akJcFj0qu_nMCyUCtjb')",
    (
        "responses/2026/phase_commentary_final#0",
        "echo",
    ): 'echo: echo differs at input[0]: sent [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "What is the capital of PotatoLand?"}]}] recorded [{"content": "What is the capital of PotatoLand?", "role": "user"}]',
    (
        "responses/2026/phase_commentary_final#1",
        "echo",
    ): 'echo: echo differs at input[0]: sent [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "What is the capital of PotatoLand?"}]}] recorded [{"content": "What is the capital of PotatoLand?", "role": "user"}]',
    (
        "responses/2026/phase_commentary_final#1",
        "import",
    ): "import: import lost function_call.id, message.id, message.phase (first: request.messages[2].id='msg_094ebefab06f6c100069efd58302b4819587854b18d82b')",
    (
        "responses/2026/reasoning_summary_auto#0",
        "echo",
    ): 'echo: echo differs at input[0]: sent [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Write a Python function that calculates the factorial of a number. Think step b recorded [{"content": "Write a Python function that calculates the factorial of a number. Think step b',
    (
        "responses/2026/reasoning_then_function_calls#0",
        "continue",
    ): "continue: the next request to gpt-5 left out function_call.id, function_call.plan, reasoning.encrypted_content, reasoning.id (first: answer[0].encrypted_content='gAAAAABoxC0_aDtrISw_zls0dyams-nhm23et1xecYaqlI8y44')",
    (
        "responses/2026/reasoning_then_function_calls#0",
        "echo",
    ): 'echo: echo differs at input[0]: sent [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Compose a 12-line poem where the first letters of the odd-numbered lines form t recorded [{"content": "Compose a 12-line poem where the first letters of the odd-numbered lines form t',
    (
        "responses/2026/reasoning_then_function_calls#1",
        "echo",
    ): 'echo: echo differs at input[0]: sent [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Compose a 12-line poem where the first letters of the odd-numbered lines form t recorded [{"content": "Compose a 12-line poem where the first letters of the odd-numbered lines form t',
    (
        "responses/2026/reasoning_then_function_calls#1",
        "import",
    ): "import: import lost function_call.id (first: request.messages[2].id='fc_68c42d3e9e4881968b15fbb8253f58540e8bc41441c948f')",
    (
        "responses/2026/url_citation_annotations#0",
        "echo",
    ): 'echo: echo differs at input[0]: sent [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "What is the tallest mountain in Alberta? Provide one sentence with a citation." recorded [{"content": "What is the tallest mountain in Alberta? Provide one sentence with a citation."',
    (
        "responses/2026/url_citation_annotations#1",
        "echo",
    ): 'echo: echo differs at input[0]: sent [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "What is the tallest mountain in Alberta? Provide one sentence with a citation." recorded [{"content": "What is the tallest mountain in Alberta? Provide one sentence with a citation."',
    (
        "responses/2026/url_citation_annotations_stream#0",
        "echo",
    ): 'echo: echo differs at input[0]: sent [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "What is the tallest mountain in Alberta? Provide one sentence with a citation." recorded [{"content": "What is the tallest mountain in Alberta? Provide one sentence with a citation."',
    (
        "responses/2026/web_search_alias_continued#0",
        "continue",
    ): "continue: the next request to gpt-5 left out message.id, reasoning.encrypted_content, reasoning.id, web_search_call.id (first: answer[0].encrypted_content='gAAAAABoycg20IcGnesrSxQLRh2yjCjaCx-O9xA4RVYLpo0E7n')",
    (
        "responses/2026/web_search_alias_continued#0",
        "echo",
    ): 'echo: echo differs at input[0]: sent [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "What is the weather in San Francisco today?"}]}] recorded [{"content": "What is the weather in San Francisco today?", "role": "user"}]',
    (
        "responses/2026/web_search_alias_continued#1",
        "echo",
    ): 'echo: echo differs at input[0]: sent [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "What is the weather in San Francisco today?"}]}] recorded [{"content": "What is the weather in San Francisco today?", "role": "user"}]',
    (
        "responses/2026/web_search_alias_continued#1",
        "import",
    ): "import: import lost message.id (first: request.messages[4].id='msg_028829e50fbcad090068c9c8362ef08195a8a69090feef')",
    (
        "responses/2026/web_search_no_external_access#0",
        "echo",
    ): 'echo: echo differs at input[0]: sent [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Search the web for the year the Eiffel Tower opened to the public. Reply with t recorded [{"content": "Search the web for the year the Eiffel Tower opened to the public. Reply with t',
    (
        "responses/2026/web_search_stream_then_whole#0",
        "continue",
    ): "continue: the next request to gpt-5 left out message.id, reasoning.id, web_search_call.id (first: answer[0].id='rs_00a60507bf41223d0068c9d2fc927081a088e0b920cdfe3')",
    (
        "responses/2026/web_search_stream_then_whole#0",
        "echo",
    ): 'echo: echo differs at input[0]: sent [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "What is the weather in San Francisco today?"}]}] recorded [{"content": "What is the weather in San Francisco today?", "role": "user"}]',
    (
        "responses/2026/web_search_stream_then_whole#1",
        "echo",
    ): 'echo: echo differs at input[0]: sent [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "What is the weather in San Francisco today?"}]}] recorded [{"content": "What is the weather in San Francisco today?", "role": "user"}]',
    (
        "responses/2026/web_search_stream_then_whole#1",
        "import",
    ): "import: import lost message.id (first: request.messages[4].id='msg_00a60507bf41223d0068c9d30b055481a0b0ee28a02191')",
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
}
