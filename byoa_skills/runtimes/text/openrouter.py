"""OpenRouter: the OpenAI wire plus its own parts. It is told who calls (the attribution
headers ``HTTP-Referer`` and ``X-Title``), asked for usage accounting, and its answer's
``usage.cost`` (in USD) is the call's real cost. Its streams carry keep-alive comment lines
(``: OPENROUTER PROCESSING``) and report a failure after the first token as a ``data`` event
with an ``error`` member and ``finish_reason: "error"``."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

from byoa_skills.runtimes.text.config import TextSource
from byoa_skills.runtimes.text.errors import TextFailure
from byoa_skills.runtimes.text.openai_compat import OpenAICompatibleWire
from byoa_skills.runtimes.text.wire import ChatReply, ChatRequest

#: Who calls, as OpenRouter's attribution headers say it.
APP_URL = "https://bringyourownagent.org"
APP_TITLE = "byoa-skills"


class OpenRouterWire(OpenAICompatibleWire):
    """OpenRouter's chat completions."""

    def headers(self, source: TextSource) -> dict[str, str]:
        """The key (required) and the attribution headers."""
        if not source.api_key():
            raise TextFailure(
                "upstream-refused", f"{source.name}: no API key (set ${source.key_env})"
            )
        return {**super().headers(source), "HTTP-Referer": APP_URL, "X-Title": APP_TITLE}

    def body(self, request: ChatRequest) -> dict[str, Any]:
        """The OpenAI body, asking for the usage with its cost."""
        return {**super().body(request), "usage": {"include": True}}

    def take_usage(self, reply: ChatReply, usage: Any) -> None:
        """The token counts, and the cost OpenRouter charged."""
        super().take_usage(reply, usage)
        if isinstance(usage, dict) and usage.get("cost") is not None:
            try:
                cost = Decimal(str(usage["cost"]))
            except (InvalidOperation, ValueError):
                raise TextFailure("upstream-malformed", "usage.cost is not a number") from None
            if not cost.is_finite() or cost < 0:
                raise TextFailure("upstream-malformed", "usage.cost is not a cost")
            reply.cost = cost
