"""A scripted backend for agent-loop tests: answers from a list, no server."""

from __future__ import annotations

from collections.abc import Callable

from carryall.blocks import Document, Image, Message, Text, ToolUse
from carryall.providers import Capabilities, Request, Response
from carryall.transport import ModelInfo

Step = Response | BaseException | Callable[[Request], Response]


class ScriptedBackend:
    """A backend double that answers from a script and keeps every request it was sent."""

    name = "scripted"
    context_window: int | None = None

    def __init__(self, *steps: Step, model: str = "scripted-1", vision: bool = True) -> None:
        self.steps = list(steps)
        self.model = model
        self.capabilities = Capabilities(vision=vision)
        self.requests: list[Request] = []
        self.closed = False

    def complete(self, request: Request, on_text: Callable[[str], None] | None = None) -> Response:
        self.requests.append(request)
        if not self.steps:
            raise AssertionError("the script ran out: the loop made one request too many")
        step = self.steps.pop(0)
        if isinstance(step, BaseException):
            raise step
        response = step(request) if callable(step) else step
        text = response.message.text()
        if on_text is not None:
            for i in range(0, len(text), 3):
                on_text(text[i : i + 3])
        return response

    def list_models(self) -> list[ModelInfo]:
        return [ModelInfo(id=self.model)]

    def takes_url(self, block: Image | Document) -> bool:
        # The safe side: a URL is fetched and its bytes sent, as for a wire that needs them.
        return False

    def close(self) -> None:
        self.closed = True


def say(text: str) -> Response:
    return Response(message=Message.assistant([Text(text)]), stop_reason="end_turn")


def call(*uses: ToolUse, text: str = "") -> Response:
    blocks = [Text(text)] if text else []
    return Response(message=Message.assistant([*blocks, *uses]), stop_reason="tool_use")
