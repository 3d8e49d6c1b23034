"""Text sources behind one runtime: any OpenAI-compatible server (LM Studio, llama.cpp's
server, vLLM, LocalAI), Ollama's own API, and OpenRouter.

:class:`TextRuntime` answers; :class:`SourceStore` keeps the visitor's sources;
:class:`TextFailure` carries the code of a call that failed.
"""

from byoa_skills.runtimes.text.config import (
    KINDS,
    PROVIDER_KINDS,
    SourceConfig,
    SourceConfigError,
    SourceStore,
    TextSource,
    default_config,
)
from byoa_skills.runtimes.text.errors import CODES, TextFailure
from byoa_skills.runtimes.text.runtime import ChunkHook, TextAnswer, TextCall, TextRuntime

__all__ = [
    "CODES",
    "KINDS",
    "PROVIDER_KINDS",
    "ChunkHook",
    "SourceConfig",
    "SourceConfigError",
    "SourceStore",
    "TextAnswer",
    "TextCall",
    "TextFailure",
    "TextRuntime",
    "TextSource",
    "default_config",
]
