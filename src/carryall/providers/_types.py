"""What every dialect's codec takes and gives back: requests, responses, capabilities."""

from __future__ import annotations

import operator
from collections.abc import Iterable
from typing import Any, Final, Literal, TypeAlias

import msgspec

from carryall.blocks import Block, Citation, Downgrade, Message, Origin, Text
from carryall.capabilities import CachePolicy, Capabilities
from carryall.errors import CarryallError
from carryall.usage import Usage

__all__ = [
    "DEFAULT_TARGET",
    "CachePolicy",
    "Capabilities",
    "Dialect",
    "Downgrade",
    "Effort",
    "Encoded",
    "HostedTool",
    "HostedToolKind",
    "Imported",
    "Logprobs",
    "ModelOptions",
    "OutputSchema",
    "Request",
    "Response",
    "StopReason",
    "Target",
    "TokenLogprob",
    "ToolChoice",
    "ToolSpec",
    "Usage",
]

StopReason: TypeAlias = Literal[
    "end_turn", "tool_use", "max_tokens", "refusal", "pause_turn", "other"
]
ToolChoice: TypeAlias = Literal["auto", "none", "required"]
Effort: TypeAlias = Literal["low", "medium", "high"]
Dialect: TypeAlias = Literal["openai", "llama-server"]
"""The two dialects of the OpenAI Chat Completions wire: OpenAI's own and llama-server's."""


class ToolSpec(msgspec.Struct, frozen=True):
    """A tool as a model is told of it: name, description and JSON schema of its input.

    `choices` names, for some top-level string arguments, every value the
    argument can usefully take right now (the files a `read_file` could
    read): a constrained-output schema offers them as an `enum`, so a model
    too small to spell a path can only pick one that exists. The input
    schema stays open; a native tool-calling model may still name others.
    """

    name: str
    description: str
    input_schema: dict[str, Any]
    choices: dict[str, tuple[str, ...]] = msgspec.field(default_factory=dict)
    strict: bool = False
    """Ask the wire to hold the model's arguments to `input_schema` exactly, where it can."""


class ModelOptions(msgspec.Struct, frozen=True, omit_defaults=True, forbid_unknown_fields=True):
    """How a model samples and stops, and the wire settings carryall does not model.

    Every field left at its default is not sent. A field a wire cannot take
    is left off that request and named in its `Encoded.downgrades` (kind
    `option`, the field's name in the reason), never dropped silently.
    `extra` maps a wire's name (`anthropic`, `openai`, `responses`,
    `gemini`, `bedrock`, `llama-server`) to body fields passed through to
    that wire only, as given; on every other wire they are named as left off.
    """

    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    seed: int | None = None
    stop: tuple[str, ...] = ()
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    parallel_tool_calls: bool | None = None
    service_tier: str | None = None
    store: bool | None = None
    extra: dict[str, dict[str, Any]] = msgspec.field(default_factory=dict)


class OutputSchema(msgspec.Struct, frozen=True):
    """Ask for an answer that is JSON matching `schema` (a JSON Schema object).

    `name` is what the wires that want one call it; `strict` asks the wire
    to enforce the schema while generating, where it can.
    """

    schema: dict[str, Any]
    name: str = "answer"
    strict: bool = True


HostedToolKind: TypeAlias = Literal[
    "web_search", "web_fetch", "code_execution", "file_search", "url_context", "mcp", "advisor"
]


class HostedTool(msgspec.Struct, frozen=True, omit_defaults=True):
    """A tool the provider runs itself (web search, code execution, ...), declared by kind.

    `config` holds the kind's settings as carryall names them (for `mcp`:
    `server_url`, `server_label`; for `file_search`: `vector_store_ids`;
    for `web_search`: `max_uses`, `allowed_domains`; for `advisor`, the
    model consulted: `model`, `max_tokens`); each wire maps them
    to its own tool definition, and a wire without the kind refuses it
    with a named reason.
    """

    kind: HostedToolKind
    config: dict[str, Any] = msgspec.field(default_factory=dict)


class Request(msgspec.Struct, frozen=True, kw_only=True):
    """One call to a model. Everything but `model` and `messages` is optional.

    `endpoint` is the host (and port) of the base URL the request goes to.
    The backend fills it from its transport's base URL before encoding
    (`SdkBackend.complete`), so that with the codec's dialect and `model` it
    names the target origin: a signature or provider-native block goes out
    only when its `Origin` is that one's maker (`Origin.same_maker`). Empty
    means "no particular server", which no stamped origin matches.
    `account` is the fingerprint of the credential the request is sent with,
    on the wires whose encrypted content is bound to it (the backend fills
    it too); empty means unknown, which does not tell accounts apart.
    """

    model: str
    messages: tuple[Message, ...]
    endpoint: str = ""
    account: str = ""
    system: str | None = None
    tools: tuple[ToolSpec, ...] = ()
    max_tokens: int = 4096
    tool_choice: ToolChoice | None = None
    thinking: bool = False
    thinking_budget: int | None = None
    effort: Effort | None = None
    cache: CachePolicy = "off"
    """Prompt caching: `auto` places each wire's cache markers (`carryall.providers.caching`).

    `off` here, so a request built by hand sends only what it names; an
    `Agent` (and `run` and `chat`) asks for `auto` unless told otherwise.
    """
    cache_key: str = ""
    """The conversation's name on a wire that routes by one (OpenAI's `prompt_cache_key`),
    sent as given; empty: a digest of the system prompt and the tools."""
    max_images: int = 20
    options: ModelOptions = ModelOptions()
    output_schema: OutputSchema | None = None
    hosted_tools: tuple[HostedTool, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.messages, tuple):
            msgspec.structs.force_setattr(self, "messages", tuple(self.messages))
        if not isinstance(self.tools, tuple):
            msgspec.structs.force_setattr(self, "tools", tuple(self.tools))
        if not isinstance(self.hosted_tools, tuple):
            msgspec.structs.force_setattr(self, "hosted_tools", tuple(self.hosted_tools))
        if self.cache not in ("off", "auto"):
            raise CarryallError(f"Request cache must be 'off' or 'auto', got {self.cache!r}")


class TokenLogprob(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One token of an answer and how likely the model found it.

    The one form every wire's token probabilities are read into (Chat
    Completions `logprobs.content`, Responses `output_text.logprobs`, Gemini
    and Vertex `logprobsResult`).
    `logprob` is the natural log of its probability.
    """

    token: str
    logprob: float
    token_id: int | None = None
    """The token's id in the model's vocabulary, where the wire gives it (Gemini, llama-server)."""
    token_bytes: tuple[int, ...] | None = None
    """The token's UTF-8 bytes, where the wire gives them (Chat Completions, Responses): a character
    may be split over tokens, so the bytes say what `token` cannot."""
    top: tuple[TokenLogprob, ...] = ()
    """The likeliest tokens at this place, likeliest first, as many as the request asked
    for (Gemini `logprobs`, Chat Completions `top_logprobs`); the chosen one among them."""


class Logprobs(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """How likely the model found its answer, token by token, where the request asked.

    `tokens` are the answer's tokens in order (a stream's, every chunk's in
    turn); `refusal` a refusal's, where the wire keeps them apart (Chat
    Completions). `average` and `total` are the wire's own summaries of the
    answer (Gemini's `avgLogprobs`, a length-normalised score to compare
    answers by, and `logProbabilitySum`), None where it sends none.
    """

    tokens: tuple[TokenLogprob, ...] = ()
    refusal: tuple[TokenLogprob, ...] = ()
    average: float | None = None
    total: float | None = None


class Response(msgspec.Struct, frozen=True, kw_only=True):
    """A model's answer decoded into blocks.

    `malformed_tool_args` counts tool calls whose arguments were not valid
    JSON: the most telling reliability figure when comparing models. Each
    such call still surfaces as a `ToolUse` whose input is the raw text, so
    the loop can answer it with an error result instead of dropping it.
    """

    message: Message
    stop_reason: StopReason
    usage: Usage = Usage()
    model: str | None = None
    refusal: str | None = None
    malformed_tool_args: int = 0
    stop_sequence: str | None = None
    """The stop sequence (`ModelOptions.stop`) that ended the answer, where the wire says which."""
    raw_usage: dict[str, Any] | None = None
    """The usage figures as the wire sent them, before `usage` put them in one meaning."""
    logprobs: Logprobs | None = None
    """The answer's token probabilities, where the request asked for them and the wire
    sent them (Chat Completions and llama-server `choices[0].logprobs`, Responses
    `output_text.logprobs`, Gemini and Vertex `logprobsResult` and `avgLogprobs`);
    None otherwise."""
    downgrades: tuple[Downgrade, ...] = ()
    """What the request that got this answer could not send as held (`Encoded.downgrades`),
    then what the decoder read of the answer and could not keep.

    The first are filled by the backend that encoded that request, from the
    one encode it sent, so a caller learns what was lost without encoding
    it again; the decoder's own (message index 0, the answer) name each
    wire field no block holds (`kind` `field`, its path in the reason).
    """

    def as_requested(self, model: str, account: str = "") -> Response:
        """This answer with every origin it stamped also naming the model asked for and the account.

        A decoder knows the model the answer names; the transport knows the
        name the request used and the key it was sent with, and stamps them
        here, so a continuation that asks by the same name (an alias) finds
        its own signed and opaque blocks again (`Origin.same_maker`).
        """
        content = self.message.content
        stamped = tuple(_requested_block(b, model, account) for b in content)
        if all(map(operator.is_, stamped, content)):
            return self
        message = Message(self.message.role, stamped)
        return msgspec.structs.replace(self, message=message)


class Imported(list[Message]):
    """A history read from another program's file: its messages, and what no block keeps.

    A list of the messages, so every caller of an importer reads it as
    before; `downgrades` names each field of the file that no block holds
    (by message index and path), so an import is never silently lossy.
    """

    def __init__(self, messages: Iterable[Message] = (), downgrades: Iterable[Downgrade] = ()):
        super().__init__(messages)
        self.downgrades: tuple[Downgrade, ...] = tuple(downgrades)


class Target(msgspec.Struct, frozen=True, kw_only=True):
    """Where a codec writes to and reads from: everything beside the request it needs.

    Every wire module takes one (`encode_body`, `encode_bytes`, `decode`,
    `StreamDecoder`), so a caller holds one value per backend instead of
    each wire's own arguments. A field a wire has no use for is ignored
    there: each names the wires that read it.
    """

    caps: Capabilities = Capabilities()
    """What the model takes: images, native tool calls, thinking (every encoder)."""
    dialect: Dialect = "openai"
    """Whose server speaks an OpenAI wire: OpenAI's own, or llama-server's (Chat Completions
    and Responses); the origin's dialect of what the Chat Completions decoders read."""
    endpoint: str = ""
    """The host of the base URL the backend talks to, stamped on the origin of what the
    decoders read (every decoder); the encoders take theirs from `Request.endpoint`."""
    model: str = ""
    """The model id the request went to, for a wire whose answer names none (Bedrock's
    Converse): the model part of the origin its decoders stamp."""
    constrained: bool = False
    """Prompt mode held to a JSON schema of calls or an answer (Responses on llama-server,
    and `prompt` on Chat Completions): how its answer is read."""
    every_origin: bool = False
    """Keep every signature and native block whatever made it: for writing a history to a
    file rather than sending it (Anthropic and Chat Completions)."""


DEFAULT_TARGET: Final = Target()
"""A target of which nothing is known: default capabilities, no endpoint, no model."""


class Encoded(msgspec.Struct, frozen=True):
    """A request body and every `Downgrade` made to write it."""

    body: dict[str, Any]
    downgrades: tuple[Downgrade, ...] = ()


class Sent(msgspec.Struct, frozen=True, gc=False):
    """A request body as the bytes a transport sends, and every `Downgrade` made to write it.

    What a codec's bytes entry point gives (`Codec.sent`): the same JSON as
    `Encoded.body`, written from the blocks without building that dict tree.
    """

    data: bytes
    downgrades: tuple[Downgrade, ...] = ()


def _requested_block(block: Block, model: str, account: str) -> Block:
    spelling = getattr(block, "spelling", None)
    if spelling is not None:
        # How its wire wrote it is bound to its origin as well.
        stamped_spelling = _requested_origin(spelling.origin, model, account)
        if stamped_spelling is not spelling.origin and stamped_spelling is not None:
            spelt = msgspec.structs.replace(spelling, origin=stamped_spelling)
            block = msgspec.structs.replace(block, spelling=spelt)
    if type(block) is Text and block.citations:
        # A text's citations carry their origin, one each.
        cited = tuple(_requested_citation(c, model, account) for c in block.citations)
        if all(map(operator.is_, cited, block.citations)):
            return block
        return msgspec.structs.replace(block, citations=cited)
    origin: Origin | None = getattr(block, "origin", None)
    stamped = _requested_origin(origin, model, account)
    if stamped is origin:
        return block
    return msgspec.structs.replace(block, origin=stamped)


def _requested_citation(citation: Citation, model: str, account: str) -> Citation:
    stamped = _requested_origin(citation.origin, model, account)
    if stamped is citation.origin:
        return citation
    return msgspec.structs.replace(citation, origin=stamped)


def _requested_origin(origin: Origin | None, model: str, account: str) -> Origin | None:
    if origin is None or not origin.dialect or origin.requested:
        return origin
    # The asked-for name is written only where it differs from the answered
    # one: a transcript of a model asked for by its own name stores no second name.
    requested = model if model != origin.model else ""
    account = account or origin.account
    if not requested and account == origin.account:
        return origin
    return msgspec.structs.replace(origin, requested=requested, account=account)
