"""The visitor's text sources: a small JSON file, ``sources.json`` in the config folder.

Without the file the engine knows LM Studio (``lmstudio``, OpenAI-compatible, on
``http://localhost:1234/v1``), Ollama (``ollama``, on ``http://localhost:11434``) and, when
``$OPENROUTER_API_KEY`` is set, OpenRouter (``openrouter``). A model is named
``SOURCE/MODEL``: the source's name, a slash, and the model's id at that source.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from byoa_skills.store import paths
from byoa_skills.store.files import write_private

KINDS = ("openai", "ollama", "openrouter")
#: The provider kinds the gate knows: a model on this computer, one on the home network,
#: one paid for with a key.
PROVIDER_KINDS = ("local-model", "home-server", "api-key")
OPENROUTER_URL = "https://openrouter.ai/api/v1"
OPENROUTER_KEY_ENV = "OPENROUTER_API_KEY"
_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,31}")
_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


class SourceConfigError(ValueError):
    """A sources file or a source entry that cannot be used; the message says why."""


@dataclass(frozen=True)
class TextSource:
    """One text source: where it answers and how it is spoken to."""

    name: str
    kind: str
    url: str
    #: The environment variable holding the API key, if any.
    key_env: str | None = None
    #: The API key itself, when kept in the sources file (mode 0600).
    key: str | None = field(default=None, repr=False)
    #: Upstream requests this source may have running at once.
    max_concurrent: int = 4
    #: The gate's provider kind; derived from the kind and the address when not set.
    provider: str | None = None

    @property
    def provider_kind(self) -> str:
        """``local-model`` on loopback, ``api-key`` for OpenRouter, else ``home-server``."""
        if self.provider:
            return self.provider
        if self.kind == "openrouter":
            return "api-key"
        return "local-model" if is_loopback_url(self.url) else "home-server"

    def api_key(self) -> str | None:
        """The key to send, from the file or the environment, or None."""
        if self.key:
            return self.key
        return os.environ.get(self.key_env) or None if self.key_env else None

    def to_json(self) -> dict[str, Any]:
        """As the sources file keeps it."""
        entry: dict[str, Any] = {"name": self.name, "kind": self.kind, "url": self.url}
        if self.key_env:
            entry["keyEnv"] = self.key_env
        if self.key:
            entry["key"] = self.key
        entry["maxConcurrent"] = self.max_concurrent
        if self.provider:
            entry["provider"] = self.provider
        return entry


@dataclass(frozen=True)
class SourceConfig:
    """Every source, by name, and the model used when a call names none."""

    sources: dict[str, TextSource]
    default_model: str | None = None

    def to_json(self) -> dict[str, Any]:
        """As the sources file keeps it."""
        body: dict[str, Any] = {"sources": [s.to_json() for s in self.sources.values()]}
        if self.default_model:
            body["default"] = self.default_model
        return body


def default_config() -> SourceConfig:
    """The sources known without a file."""
    sources = [
        TextSource("lmstudio", "openai", "http://localhost:1234/v1"),
        TextSource("ollama", "ollama", "http://localhost:11434"),
    ]
    if os.environ.get(OPENROUTER_KEY_ENV):
        sources.append(
            TextSource(
                "openrouter",
                "openrouter",
                OPENROUTER_URL,
                key_env=OPENROUTER_KEY_ENV,
                max_concurrent=8,
            )
        )
    return SourceConfig({source.name: source for source in sources})


def source_from_json(entry: Any) -> TextSource:
    """A source from one entry of the file; :class:`SourceConfigError` when it is bad."""
    if not isinstance(entry, dict):
        raise SourceConfigError("a source must be an object")
    name, kind, url = entry.get("name"), entry.get("kind"), entry.get("url")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise SourceConfigError(f"source name {name!r}: use a-z, 0-9 and '-', at most 32")
    if kind not in KINDS:
        raise SourceConfigError(f"source {name}: kind must be one of {', '.join(KINDS)}")
    check_url(url, name)
    concurrent = entry.get("maxConcurrent", 8 if kind == "openrouter" else 4)
    if isinstance(concurrent, bool) or not isinstance(concurrent, int) or concurrent < 1:
        raise SourceConfigError(f"source {name}: maxConcurrent must be a whole number from 1")
    provider = entry.get("provider")
    if provider is not None and provider not in PROVIDER_KINDS:
        raise SourceConfigError(f"source {name}: provider must be one of {PROVIDER_KINDS}")
    for key in ("keyEnv", "key"):
        if entry.get(key) is not None and not isinstance(entry[key], str):
            raise SourceConfigError(f"source {name}: {key} must be a string")
    return TextSource(
        name, kind, url.rstrip("/"), entry.get("keyEnv"), entry.get("key"), concurrent, provider
    )


def check_url(url: Any, name: str = "source") -> None:
    """Refuse a URL that is not plain ``http(s)://host[:port][/path]``; plain HTTP only on
    loopback or a private address (a key must not travel in clear over the internet)."""
    if not isinstance(url, str):
        raise SourceConfigError(f"{name}: url must be a string")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SourceConfigError(f"{name}: url must be http(s)://host[:port][/path]")
    if parts.username or parts.password or parts.query or parts.fragment:
        raise SourceConfigError(f"{name}: url must not hold credentials, a query or a fragment")
    if parts.scheme == "http" and not _is_near(parts.hostname):
        raise SourceConfigError(f"{name}: plain http only on loopback or a private address")


def is_loopback_url(url: str) -> bool:
    """Whether the URL's host is this computer."""
    host = urlsplit(url).hostname or ""
    if host in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _is_near(host: str) -> bool:
    if host in _LOOPBACK_NAMES or host.endswith(".local") or host.endswith(".lan"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local


def config_from_json(body: Any) -> SourceConfig:
    """The configuration a sources file holds; :class:`SourceConfigError` when it is bad."""
    if not isinstance(body, dict) or not isinstance(body.get("sources"), list):
        raise SourceConfigError('the sources file must be {"sources": [...]}')
    sources: dict[str, TextSource] = {}
    for entry in body["sources"]:
        source = source_from_json(entry)
        if source.name in sources:
            raise SourceConfigError(f"source {source.name} is listed twice")
        sources[source.name] = source
    default = body.get("default")
    if default is not None and not (isinstance(default, str) and "/" in default):
        raise SourceConfigError("default must name a model as SOURCE/MODEL")
    return SourceConfig(sources, default)


class SourceStore:
    """The sources file, read again whenever it changed (so a change needs no restart)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or paths.config_dir() / "sources.json"
        self._seen: tuple[int, int] | None = None
        self._config: SourceConfig | None = None

    def load(self) -> SourceConfig:
        """The configuration now: the file's, or :func:`default_config` without a file.
        :class:`SourceConfigError` when the file is damaged."""
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            self._seen, self._config = None, None
            return default_config()
        stamp = (stat.st_mtime_ns, stat.st_size)
        if self._config is None or stamp != self._seen:
            try:
                body = json.loads(self.path.read_bytes())
            except (ValueError, OSError) as error:
                raise SourceConfigError(f"{self.path} cannot be read: {error}") from None
            self._config, self._seen = config_from_json(body), stamp
        return self._config

    def save(self, config: SourceConfig) -> None:
        """Write the whole configuration (atomically, readable only by the user)."""
        write_private(self.path, (json.dumps(config.to_json(), indent=2) + "\n").encode())
        self._seen, self._config = None, None
