"""``byoa-skills sources``: the text sources, whether each answers and its models; add,
remove, set the default model, or find the local servers on their usual ports."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import replace
from typing import Any

from byoa_skills.runtimes.text import (
    KINDS,
    PROVIDER_KINDS,
    SourceConfig,
    SourceConfigError,
    SourceStore,
    TextRuntime,
)
from byoa_skills.runtimes.text.config import source_from_json
from byoa_skills.runtimes.text.discovery import LOCAL_CANDIDATES, Probe, probe_all

EXIT_OK, EXIT_NOTHING, EXIT_USAGE = 0, 1, 2
#: Seconds a source has to list its models before it counts as down.
DEFAULT_TIMEOUT = 1.5


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Add ``sources list|find|add|remove|default`` to the ``byoa-skills`` parser."""
    sources = subparsers.add_parser(
        "sources",
        help="the text sources for text.generate: list, find, add, remove, default",
        description=(
            "Text sources answer text.generate: an OpenAI-compatible server (LM Studio, "
            "llama.cpp's server, vLLM, LocalAI), Ollama, or OpenRouter with a key. A model is "
            "named SOURCE/MODEL. They are kept in sources.json in the config folder; without "
            "that file LM Studio and Ollama on their usual ports are used (and OpenRouter "
            "when $OPENROUTER_API_KEY is set). A source that is down is reported, not fatal."
        ),
    )
    actions = sources.add_subparsers(dest="sources_command", metavar="COMMAND")
    listing = actions.add_parser("list", help="each source, whether it answers, its models")
    for parser in (sources, listing):
        parser.add_argument("--json", action="store_true", help="print JSON")
        parser.add_argument(
            "--timeout",
            type=float,
            default=DEFAULT_TIMEOUT,
            help=f"seconds each source has to answer ({DEFAULT_TIMEOUT:g})",
        )
    find = actions.add_parser(
        "find", help="look for LM Studio, Ollama, llama.cpp, vLLM and Jan on loopback"
    )
    find.add_argument("--add", action="store_true", help="add the ones that answer")
    find.add_argument("--json", action="store_true", help="print JSON")
    find.add_argument("--timeout", type=float, default=0.5, help="seconds per server (0.5)")
    add = actions.add_parser("add", help="add or replace a source")
    add.add_argument("name", metavar="NAME", help="a short name: a-z, 0-9, '-'")
    add.add_argument("--kind", required=True, choices=KINDS, help="the wire format it speaks")
    add.add_argument("--url", required=True, help="its base URL, e.g. http://localhost:1234/v1")
    add.add_argument("--key-env", help="the environment variable holding its API key")
    add.add_argument(
        "--max-concurrent", type=int, help="requests at once (default 4; 8 for OpenRouter)"
    )
    add.add_argument(
        "--provider",
        choices=PROVIDER_KINDS,
        help="what the grant calls it (default: from its kind and address)",
    )
    remove = actions.add_parser("remove", help="remove a source")
    remove.add_argument("name", metavar="NAME")
    default = actions.add_parser("default", help="the model used when a call names none")
    default.add_argument(
        "model", metavar="SOURCE/MODEL", nargs="?", help="omit to clear the default"
    )
    sources.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Do the ``sources`` subcommand; 0 done, 1 nothing answered or nothing to do, 2 a usage
    error or a damaged sources file."""
    store = SourceStore()
    try:
        config = store.load()
        command = args.sources_command or "list"
        if command == "list":
            probes = asyncio.run(_probe(list(config.sources.values()), args.timeout))
            _print_probes(probes, config, args.json)
            return EXIT_OK if any(p.answers for p in probes) else EXIT_NOTHING
        if command == "find":
            return _find(store, config, args)
        if command == "add":
            return _add(store, config, args)
        if command == "remove":
            if args.name not in config.sources:
                print(f"no source named {args.name}", file=sys.stderr)
                return EXIT_NOTHING
            kept = {n: s for n, s in config.sources.items() if n != args.name}
            store.save(replace(config, sources=kept))
            print(f"removed {args.name}")
            return EXIT_OK
        return _default(store, config, args.model)
    except (SourceConfigError, OSError) as error:
        print(f"byoa-skills sources: {error}", file=sys.stderr)
        return EXIT_USAGE


async def _probe(sources: list[Any], timeout: float) -> list[Probe]:
    runtime = TextRuntime()
    try:
        return await probe_all(runtime, sources, timeout)
    finally:
        await runtime.close()


def _find(store: SourceStore, config: SourceConfig, args: argparse.Namespace) -> int:
    probes = asyncio.run(_probe(list(LOCAL_CANDIDATES), args.timeout))
    found = [p for p in probes if p.answers]
    _print_probes(probes, config, args.json)
    if args.add and found:
        sources = dict(config.sources)
        for found_probe in found:
            known = any(s.url == found_probe.source.url for s in sources.values())
            if not known:
                sources[found_probe.source.name] = found_probe.source
        store.save(replace(config, sources=sources))
        if not args.json:
            print(f"added: {', '.join(p.source.name for p in found)}")
    return EXIT_OK if found else EXIT_NOTHING


def _add(store: SourceStore, config: SourceConfig, args: argparse.Namespace) -> int:
    entry: dict[str, Any] = {"name": args.name, "kind": args.kind, "url": args.url}
    if args.key_env:
        entry["keyEnv"] = args.key_env
    if args.max_concurrent is not None:
        entry["maxConcurrent"] = args.max_concurrent
    if args.provider:
        entry["provider"] = args.provider
    source = source_from_json(entry)
    store.save(replace(config, sources={**config.sources, source.name: source}))
    print(f"added {source.name} ({source.kind}, {source.url}, {source.provider_kind})")
    return EXIT_OK


def _default(store: SourceStore, config: SourceConfig, model: str | None) -> int:
    if model is not None:
        source_name = model.partition("/")[0]
        if "/" not in model or source_name not in config.sources:
            print(f"{model!r}: name a model as SOURCE/MODEL of a known source", file=sys.stderr)
            return EXIT_USAGE
    store.save(replace(config, default_model=model))
    print(f"default model: {model or 'none'}")
    return EXIT_OK


def _print_probes(probes: list[Probe], config: SourceConfig, as_json: bool) -> None:
    if as_json:
        print(
            json.dumps(
                [
                    {
                        "name": p.source.name,
                        "kind": p.source.kind,
                        "url": p.source.url,
                        "provider": p.source.provider_kind,
                        "answers": p.answers,
                        "models": p.models,
                        "problem": p.problem,
                        "ms": round(p.seconds * 1000, 1),
                    }
                    for p in probes
                ],
                indent=2,
            )
        )
        return
    for p in probes:
        state = "answers" if p.answers else "down"
        print(
            f"{p.source.name:<12} {p.source.kind:<10} {p.source.url:<34} {state:<8} "
            f"{p.source.provider_kind}"
        )
        if p.answers:
            for model in p.models or ["(no models listed)"]:
                print(f"    {p.source.name}/{model}")
        else:
            print(f"    {p.problem}")
    if config.default_model:
        print(f"default model: {config.default_model}")
