# ruff: noqa: E501
"""The ledger of recorded-2026 checks that fail on today's code, and why.

Each key is (exchange id, check) of `tests/providers/test_recorded_2026.py`; the value is the
failure as the check words it (what was lost, refused or changed, and where). The test runs
each listed case as a strict xfail, so a gap that closes fails until its line is deleted.
"""

GAPS: dict[tuple[str, str], str] = {
    (
        "responses/2026/file_search_with_results#0",
        "sdk",
    ): "sdk: continued to its own model, the file_search_call item goes back as the API sent it, and each of its results carries vector_store_id, which openai 3.63.0's ResponseFileSearchToolCallParam.Result (the only input type of a file_search_call, in ResponseInputItemParam) does not have (nor does its output type ResponseFileSearchToolCall.Result); the SDK type drops the key. No other input item holds the results: item_reference is an id alone and needs the response stored",
    (
        "responses/2026/web_search_stream_then_whole#0",
        "sdk",
    ): "sdk: continued to its own model, the web_search_call item goes back as the API sent it, with action.sources [{type: 'api', name: 'oai-weather'}]; openai 3.63.0's ResponseFunctionWebSearchParam.ActionSearchSource (the only input type of a web_search_call, in ResponseInputItemParam) takes only {type: 'url', url} (its output type ResponseFunctionWebSearch too). No other input item holds the call: item_reference is an id alone and needs the response stored. (The recording's own next request sent the call back without action.sources and was answered 200.)",
    (
        "responses/2026/web_search_stream_then_whole#1",
        "sdk",
    ): "sdk: continued to its own model, the web_search_call item goes back as the API sent it, with action.sources [{type: 'api', name: 'oai-weather'}]; openai 3.63.0's ResponseFunctionWebSearchParam.ActionSearchSource (the only input type of a web_search_call, in ResponseInputItemParam) takes only {type: 'url', url} (its output type ResponseFunctionWebSearch too). No other input item holds the call: item_reference is an id alone and needs the response stored. (The recording's own next request sent the call back without action.sources and was answered 200.)",
    (
        "openai_compatible/2026/openrouter_cache_point_alias#0",
        "sdk",
    ): "sdk: the user text part goes back with OpenRouter's cache_control {type: 'ephemeral', ttl: '1h'}, as the recording sent it; openai 3.63.0's ChatCompletionContentPartTextParam has text, type and OpenAI's own prompt_cache_breakpoint only, and drops the key (no other Chat Completions part type holds a text with a cache marker)",
}
