"""Finding text sources: ask each one for its models with a short timeout, and look for the
local servers people usually run on their usual loopback ports."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from byoa_skills.runtimes.text.config import TextSource
from byoa_skills.runtimes.text.errors import TextFailure
from byoa_skills.runtimes.text.runtime import TextRuntime

#: The local servers looked for, at their default addresses.
LOCAL_CANDIDATES = (
    TextSource("lmstudio", "openai", "http://localhost:1234/v1"),
    TextSource("ollama", "ollama", "http://localhost:11434"),
    TextSource("llamacpp", "openai", "http://localhost:8080/v1"),
    TextSource("vllm", "openai", "http://localhost:8000/v1"),
    TextSource("jan", "openai", "http://localhost:1337/v1"),
)


@dataclass(frozen=True)
class Probe:
    """What one source said when asked for its models."""

    source: TextSource
    answers: bool
    models: list[str] = field(default_factory=list)
    #: Why it did not answer: a failure code and message.
    problem: str | None = None
    seconds: float = 0.0


async def probe(runtime: TextRuntime, source: TextSource, timeout: float) -> Probe:
    """Ask ``source`` for its models, giving up after ``timeout`` seconds."""
    began = time.monotonic()
    try:
        models = await asyncio.wait_for(runtime.list_models(source, fresh=True), timeout)
    except asyncio.TimeoutError:
        return Probe(
            source,
            False,
            problem=f"source-down: no answer in {timeout:g} s",
            seconds=time.monotonic() - began,
        )
    except TextFailure as failure:
        return Probe(
            source,
            False,
            problem=f"{failure.code}: {failure.message}",
            seconds=time.monotonic() - began,
        )
    return Probe(source, True, [m.id for m in models], seconds=time.monotonic() - began)


async def probe_all(runtime: TextRuntime, sources: list[TextSource], timeout: float) -> list[Probe]:
    """Every source probed at once, in the order given."""
    return list(await asyncio.gather(*(probe(runtime, s, timeout) for s in sources)))
