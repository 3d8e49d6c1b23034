"""``byoa-bench soak``: a long mixed run with chaos, run only when named (never in CI).

A real ``serve`` with an instant text source takes calls mixed as a day would bring them
(good clips and bad inputs, text calls, over HTTP and the WebSocket, calls under grants that
are created and released) while a worker is killed (SIGKILL) and one stopped (SIGSTOP, then
SIGCONT) at random moments, and a few clients never read or send their request head slowly.

The report: calls sent, answered, lost (no answer: must be 0), answered twice (must be 0);
the resident memory of each process, its open files and the shared-memory segments mapped,
at the start and at the end; and the p50/p99 latency of the good clips during the chaos
against a quiet run before it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from byoa_skills.bench.children import spawn
from byoa_skills.bench.clips import load_clips, skill_body
from byoa_skills.bench.server import (
    EngineProcess,
    free_port,
    grant_request,
    rss_mib,
    start_engine,
)
from byoa_skills.pool.memory import rss_mib as process_rss_mib
from byoa_skills.serve.app import HEADER_READ_SECONDS

NAME = "soak"
TITLE = "Soak and chaos: a long mixed run with workers killed and stopped"
#: Every call's deadline: a stopped worker's call ends then, never later.
CALL_DEADLINE_SECONDS = 20
#: How long aiohttp keeps an idle pooled connection (its connector's default), in seconds.
POOLED_CONNECTION_SECONDS = 15.0
MANIFEST = {
    "byoa": "0.1-draft",
    "purpose": {
        "summary": "A soak run",
        "limits": {"maxCallsPerMinute": 1200, "maxParallelCalls": 16},
    },
    "skills": {"audio.transcribe": {"required": True}, "text.generate": {"required": False}},
    "privacy": "personal",
    "expectedCost": {"perSession": "1 USD"},
}
MESSAGES = [{"role": "user", "content": "Say hello."}]


@dataclass
class Tally:
    """What came back, by call."""

    sent: int = 0
    answered: int = 0
    lost: int = 0
    answered_twice: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    good_latency: list[float] = field(default_factory=list)


def main(argv: list[str] | None = None) -> int:
    """``byoa-bench soak [--calls N] ...``: run, print the report (Markdown) and write JSON."""
    parser = argparse.ArgumentParser(prog="byoa-bench soak", description=__doc__)
    parser.add_argument("--calls", type=int, default=10_000, help="calls in the chaos run")
    parser.add_argument("--quiet-calls", type=int, default=40, help="good clips, quiet run")
    parser.add_argument(
        "--warmup-calls",
        type=int,
        default=1000,
        help="mixed calls, chaos too, before the start's figures",
    )
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--model", default="tiny.en")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--chaos-every", type=float, default=8.0, help="mean seconds between a kill or a stop"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path, help="write the report here as JSON too")
    parser.add_argument(
        "--attack",
        choices=("never-reads",),
        help="instead: the engine's memory under the hostile site's attack",
    )
    parser.add_argument(
        "--engine-path",
        type=Path,
        help="run the engine from this source folder (to compare versions)",
    )
    args = parser.parse_args(argv)
    if args.attack:
        print(json.dumps(attack_memory(args), indent=2))
        return 0
    report = run_soak(args)
    print(markdown(report))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    lost = report["lost"] + report["warmup_lost"]
    return 0 if lost == 0 and report["answered_twice"] + report["warmup_answered_twice"] == 0 else 1


def run_soak(args: argparse.Namespace) -> dict[str, Any]:
    """Start the engine and a text source, run quiet then chaos, and report."""
    from byoa_skills.models import ensure_model

    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(prefix="byoa-soak-") as folder:
        home = Path(folder)
        ensure_model(args.model, cache_dir=home / "cache" / "models")
        source, source_url = _text_source(home)
        (home / "config").mkdir(mode=0o700, exist_ok=True)
        (home / "config" / "sources.json").write_text(
            json.dumps({"sources": [{"name": "instant", "kind": "openai", "url": source_url}]})
        )
        engine = start_engine(home, args.model, workers=args.workers, extra=("--queue", "64"))
        try:
            engine.wait_ready()
            return asyncio.run(_run(engine, args, rng))
        finally:
            engine.stop()
            source.terminate()
            source.wait(30)


async def _run(engine: EngineProcess, args: argparse.Namespace, rng: random.Random) -> dict:
    clips, _ = load_clips()
    good = [json.dumps(skill_body(clips[label])) for label in ("1s", "5s")]
    headers = {"Authorization": f"Bearer {engine.token}", "Content-Type": "application/json"}
    quiet, chaos, warm = Tally(), Tally(), Tally()
    first = snapshot(engine)
    # every road once first, the chaos's too (text source connections, grants, the activity
    # log, workers replaced, clients cut off), so that the start's figures are those of an
    # engine in use: the memory a first use of each road takes is not a leak
    async with _session(headers) as http:
        warming = _troubles(engine, rng, args.chaos_every, good[0], warm, args.warmup_calls)
        await _drive(engine, http, good, warm, args.warmup_calls, args.concurrency, rng, mix=True)
        warm_chaos, _ = await warming.finish()
    await _settle(engine, args.workers)
    async with _session(headers) as http:
        await _drive(engine, http, good, quiet, args.quiet_calls, args.concurrency, rng, mix=False)
    await _settle(engine, args.workers)  # the quiet run's connections are closed by then
    start = snapshot(engine)
    troubles = _troubles(engine, rng, args.chaos_every, good[0], chaos, args.calls)
    began = time.monotonic()
    async with _session(headers) as http:
        await _drive(engine, http, good, chaos, args.calls, args.concurrency, rng, mix=True)
    seconds = time.monotonic() - began
    chaos_log, memory = await troubles.finish()
    await _settle(engine, args.workers)
    end = snapshot(engine)
    return {
        "calls": args.calls,
        "warmup_calls": args.warmup_calls,
        "warmup_chaos": warm_chaos,
        "before_warmup": first,
        "warmup_lost": warm.lost,
        "warmup_answered_twice": warm.answered_twice,
        "concurrency": args.concurrency,
        "model": args.model,
        "workers": args.workers,
        "seconds": round(seconds, 1),
        "sent": chaos.sent,
        "answered": chaos.answered,
        "lost": chaos.lost,
        "answered_twice": chaos.answered_twice,
        "outcomes": dict(chaos.outcomes),
        "chaos": chaos_log,
        "start": start,
        "end": end,
        "serve_rss_by_tenth": memory,
        "serve_rss_growth_pct": serve_growth(first, start, end),
        "latency": {
            "quiet": _percentiles(quiet.good_latency),
            "chaos": _percentiles(chaos.good_latency),
        },
    }


def serve_growth(
    engine_start: dict[str, Any], after_warmup: dict[str, Any], end: dict[str, Any]
) -> dict[str, float | None]:
    """The ``serve`` process's RSS growth to the end, in percent, both ways it is read: from
    the engine's start (ready, before any call) and from the end of the warm-up (the soak's
    goal, within 5 %, is read on the second)."""

    def rss(snap: dict[str, Any]) -> float | None:
        value = snap.get("processes", {}).get("serve", {}).get("rss_mb")
        return float(value) if isinstance(value, (int, float)) else None

    last = rss(end)

    def growth(base: float | None) -> float | None:
        if base is None or last is None or base <= 0:
            return None
        return round((last - base) / base * 100, 1)

    return {
        "from_engine_start": growth(rss(engine_start)),
        "after_warmup": growth(rss(after_warmup)),
    }


@dataclass
class Troubles:
    """The chaos and the hostile clients running beside a part of the run."""

    engine: EngineProcess
    stop: asyncio.Event
    tasks: list[asyncio.Task[Any]]

    async def finish(self) -> tuple[list[str], list[float]]:
        """Stop them; (what the chaos did, serve's RSS by tenth). Nothing stays stopped."""
        self.stop.set()
        chaos_log, _, _, memory = await asyncio.gather(*self.tasks)
        for pid in await asyncio.to_thread(self.engine.workers):
            _signal(pid, signal.SIGCONT)
        return chaos_log, memory


def _troubles(
    engine: EngineProcess,
    rng: random.Random,
    every: float,
    clip_body: str,
    tally: Tally,
    calls: int,
) -> Troubles:
    stop = asyncio.Event()
    tasks = [
        asyncio.create_task(_chaos(engine, rng, every, stop)),
        asyncio.create_task(_never_reads(engine, clip_body, stop)),
        asyncio.create_task(_slow_heads(engine, stop)),
        asyncio.create_task(_watch_memory(engine, tally, calls, stop)),
    ]
    return Troubles(engine, stop, tasks)


async def _drive(
    engine: EngineProcess,
    http: aiohttp.ClientSession,
    good: list[str],
    tally: Tally,
    calls: int,
    concurrency: int,
    rng: random.Random,
    mix: bool,
) -> None:
    """``calls`` calls from ``concurrency`` clients; ``mix``: of every kind, else good clips
    over HTTP."""
    kinds = ["clip-http"] * 35 + ["clip-ws"] * 15 + ["bad-http"] * 15 + ["text-http"] * 15
    kinds += ["text-ws"] * 5 + ["grant-call"] * 10 + ["grant-cycle"] * 5
    plan = [rng.choice(kinds) if mix else "clip-http" for _ in range(calls)]
    queue: asyncio.Queue[str] = asyncio.Queue()
    for kind in plan:
        queue.put_nowait(kind)
    grant_id = await _new_grant(engine, http)

    async def client(index: int) -> None:
        async with http.ws_connect(f"{engine.url}/v1/ws", max_msg_size=0) as ws:
            next_id = 0
            while not queue.empty():
                kind = queue.get_nowait()
                tally.sent += 1
                body = _body(kind, good, rng, grant_id)
                began = time.monotonic()
                try:
                    if kind.endswith("-ws"):
                        next_id += 1
                        outcome = await _over_ws(ws, next_id, kind, body)
                    elif kind == "grant-cycle":
                        outcome = await _grant_cycle(engine, http)
                    else:
                        skill = "text.generate" if kind.startswith("text") else "audio.transcribe"
                        outcome = await _over_http(engine, http, skill, body)
                except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as error:
                    tally.lost += 1
                    tally.outcomes[f"lost:{type(error).__name__}"] += 1
                    continue
                if outcome == "twice":
                    tally.answered_twice += 1
                tally.answered += 1
                tally.outcomes[f"{kind}:{outcome}"] += 1
                if kind in ("clip-http", "clip-ws") and outcome == "ok":
                    tally.good_latency.append(time.monotonic() - began)

    await asyncio.gather(*(client(i) for i in range(concurrency)))


def _body(kind: str, good: list[str], rng: random.Random, grant_id: str) -> dict[str, Any]:
    if kind.startswith("clip") or kind == "grant-call":
        body = json.loads(rng.choice(good))
    elif kind == "bad-http":
        body = {"input": {"audio": {"mime": "audio/wav", "base64": "not base64!"}}}
    else:
        body = {
            "input": {"messages": MESSAGES},
            "params": {"model": "instant/instant", "maxTokens": 4},
        }
    body["deadlineSeconds"] = CALL_DEADLINE_SECONDS
    if kind == "grant-call":
        body["grantId"] = grant_id
    return body


async def _over_http(
    engine: EngineProcess, http: aiohttp.ClientSession, skill: str, body: dict[str, Any]
) -> str:
    timeout = aiohttp.ClientTimeout(total=CALL_DEADLINE_SECONDS * 4)
    async with http.post(f"{engine.url}/v1/skills/{skill}", json=body, timeout=timeout) as answer:
        result = await answer.json(content_type=None)
    return "ok" if result.get("ok") else str(result.get("code"))


async def _over_ws(
    ws: aiohttp.ClientWebSocketResponse, call_id: int, kind: str, body: dict[str, Any]
) -> str:
    skill = "text.generate" if kind.startswith("text") else "audio.transcribe"
    await ws.send_json({"type": "call", "id": call_id, "skill": skill, **body})
    results = []
    while not results:
        frame = await ws.receive_json(timeout=CALL_DEADLINE_SECONDS * 4)
        if frame.get("type") == "result":
            if frame.get("id") != call_id:
                return "twice"  # an answer to an earlier call: it came a second time
            results.append(frame)
    return "ok" if results[0].get("ok") else str(results[0].get("code"))


async def _new_grant(engine: EngineProcess, http: aiohttp.ClientSession) -> str:
    skills = ["audio.transcribe", "text.generate"]
    body = grant_request("https://soak.example", MANIFEST, skills, hours=2)
    async with http.post(f"{engine.url}/v1/grants", json=body) as answer:
        summary = await answer.json()
    if not summary.get("ok"):
        raise RuntimeError(f"the soak's grant was refused: {summary}")
    return str(summary["grantId"])


async def _grant_cycle(engine: EngineProcess, http: aiohttp.ClientSession) -> str:
    grant_id = await _new_grant(engine, http)
    async with http.delete(f"{engine.url}/v1/grants/{grant_id}") as answer:
        return "ok" if answer.status == 200 else str(answer.status)


async def _chaos(
    engine: EngineProcess, rng: random.Random, every: float, stop: asyncio.Event
) -> list[str]:
    """Kill or stop a random worker at random moments until ``stop``; what was done."""
    done: list[str] = []
    while not stop.is_set():
        with_pause = rng.expovariate(1 / every)
        try:
            await asyncio.wait_for(stop.wait(), with_pause)
            break
        except asyncio.TimeoutError:
            pass
        workers = await asyncio.to_thread(engine.workers)
        if not workers:
            continue
        pid = rng.choice(workers)
        if rng.random() < 0.5:
            _signal(pid, signal.SIGKILL)
            done.append("kill")
        else:
            _signal(pid, signal.SIGSTOP)
            await asyncio.sleep(rng.uniform(2, 6))
            _signal(pid, signal.SIGCONT)
            done.append("stop")
    return done


async def _watch_memory(
    engine: EngineProcess, tally: Tally, calls: int, stop: asyncio.Event
) -> list[float]:
    """The ``serve`` process's RSS (MB) each time another tenth of the ``calls`` is sent:
    memory that levels off is a cache filling, memory that keeps rising is a leak."""
    marks: list[float] = []
    while not stop.is_set() and len(marks) < 10:
        if tally.sent >= calls * (len(marks) + 1) / 10:
            marks.append(round(rss_mib(engine.process.pid), 1))
        await asyncio.sleep(0.5)
    return marks


async def _never_reads(engine: EngineProcess, clip_body: str, stop: asyncio.Event) -> None:
    """A client that sends calls on the WebSocket and never reads an answer."""
    body = json.loads(clip_body)
    headers = {"Authorization": f"Bearer {engine.token}"}
    async with aiohttp.ClientSession(headers=headers) as http:
        while not stop.is_set():
            try:
                async with http.ws_connect(f"{engine.url}/v1/ws") as ws:
                    for call_id in range(50):
                        await ws.send_json(
                            {"type": "call", "id": call_id, "skill": "audio.transcribe", **body}
                        )
                    await asyncio.wait_for(stop.wait(), 30)
            except (aiohttp.ClientError, asyncio.TimeoutError, OSError):
                continue


async def _slow_heads(engine: EngineProcess, stop: asyncio.Event) -> None:
    """A few clients that send their request head one byte at a time, without a token."""

    async def one() -> None:
        while not stop.is_set():
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", engine.port)
                for byte in b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 400:
                    writer.write(bytes([byte]))
                    await asyncio.sleep(0.5)
                    if stop.is_set() or reader.at_eof() or writer.is_closing():
                        break  # (the engine cuts such a client off after a while)
                writer.close()
            except OSError:
                await asyncio.sleep(0.5)

    await asyncio.gather(*(one() for _ in range(4)))


def _session(headers: dict[str, str]) -> aiohttp.ClientSession:
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), headers=headers)


async def _settle(engine: EngineProcess, workers: int) -> None:
    """Wait until all ``workers`` are warm again (none is being replaced, so no starting
    process's pipes are counted), then past the idle-socket timeouts (the engine's for its
    clients, aiohttp's for the engine's pooled connections to the text source), so that only
    the connections still in use are open."""
    for _ in range(1200):
        if await asyncio.to_thread(engine.warm) >= workers:
            break
        await asyncio.sleep(0.1)
    await asyncio.sleep(max(HEADER_READ_SECONDS, POOLED_CONNECTION_SECONDS) + 2)


def _signal(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)


def snapshot(engine: EngineProcess) -> dict[str, Any]:
    """Memory, open files and shared-memory segments of ``serve`` and its workers now."""
    processes = {"serve": engine.process.pid}
    for index, pid in enumerate(engine.workers()):
        processes[f"worker-{index}"] = pid
    taken: dict[str, Any] = {}
    segments: set[str] = set()
    for role, pid in processes.items():
        proc = Path(f"/proc/{pid}")
        try:
            rss = process_rss_mib(pid)
            if rss is None:
                raise OSError(f"process {pid} is gone")
            kinds = Counter(_fd_kind(proc / "fd" / fd) for fd in os.listdir(proc / "fd"))
            files = sum(kinds.values())
            segments |= {
                line.split()[-1]
                for line in (proc / "maps").read_text().splitlines()
                if "/dev/shm/" in line
            }
        except (OSError, StopIteration):
            continue
        taken[role] = {
            "pid": pid,
            "rss_mb": round(rss, 1),
            "open_files": files,
            "open_by_kind": dict(kinds),
        }
    return {"processes": taken, "shm_segments": len(segments)}


def attack_memory(args: argparse.Namespace) -> dict[str, Any]:
    """The ``serve`` process's resident memory before, at its highest during, and after the
    reference site's ``never-reads`` attack (``--calls`` calls of a 15 s clip, never read)."""
    from byoa_skills.models import ensure_model

    with tempfile.TemporaryDirectory(prefix="byoa-attack-") as folder:
        home = Path(folder)
        ensure_model(args.model, cache_dir=home / "cache" / "models")
        env = {"PYTHONPATH": str(args.engine_path)} if args.engine_path else None
        engine = EngineProcess.start(
            home,
            ["--model", args.model, "--workers", str(args.workers), "--log-level", "warning"],
            env=env,
        )
        try:
            engine.wait_ready()
            return asyncio.run(_attack(engine, args.calls))
        finally:
            engine.stop()


async def _attack(engine: EngineProcess, calls: int) -> dict[str, Any]:
    from byoa_skills.demos.site.app import start_site

    def rss() -> float:
        return rss_mib(engine.process.pid)

    before = rss()
    runner, _, demo = await start_site(
        host="localhost", hostile="never-reads", hostile_calls=calls, hostile_hold=60
    )
    peak = before
    try:
        _, link = demo.new_code("127.0.0.1")
        headers = {"Authorization": f"Bearer {engine.token}"}
        async with aiohttp.ClientSession(headers=headers) as http:
            async with http.post(
                f"{engine.url}/v1/links", json={"link": link, "decision": "allow"}
            ) as answer:
                taken = await answer.json()
            while not demo.attacks:
                peak = max(peak, rss())
                await asyncio.sleep(0.2)
    finally:
        await demo.close()
        await runner.cleanup()
    await asyncio.sleep(5)
    report = demo.attacks[0]
    memory = {"before": round(before), "peak": round(peak), "after_site_left": round(rss())}
    return {
        "link": taken.get("state") or taken.get("code"),
        "calls_sent": report.sent,
        "site_dropped": report.closed_with is not None,
        "attack_seconds": round(report.seconds, 1),
        "rss_mb": memory,
    }


def _fd_kind(fd: Path) -> str:
    try:
        target = os.readlink(fd)
    except OSError:
        return "gone"
    return target.split(":", 1)[0] if ":" in target else "file"


def _percentiles(values: list[float]) -> dict[str, float | int]:
    if len(values) < 2:
        return {"count": len(values)}
    cuts = statistics.quantiles(values, n=100)
    return {
        "count": len(values),
        "p50_ms": round(statistics.median(values) * 1000),
        "p99_ms": round(cuts[98] * 1000),
    }


def _text_source(home: Path) -> tuple[subprocess.Popen[bytes], str]:
    import urllib.request

    port = free_port()
    log = (home / "instant.log").open("wb")
    process = spawn(
        [sys.executable, "-m", "byoa_skills.bench.instant_source", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=log,
    )
    url = f"http://127.0.0.1:{port}/v1"
    for _ in range(600):
        try:
            with urllib.request.urlopen(url + "/models", timeout=5):
                return process, url
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("the instant text source did not start")


def markdown(report: dict[str, Any]) -> str:
    """The report as the Markdown of docs/reliability.md."""
    lines = [
        f"calls {report['calls']} (after {report['warmup_calls']} mixed calls with chaos to warm "
        f"up: {Counter(report['warmup_chaos'])['kill']} kills, "
        f"{Counter(report['warmup_chaos'])['stop']} stops, {report['warmup_lost']} lost) at "
        f"concurrency {report['concurrency']}, model "
        f"{report['model']}, {report['workers']} workers, {report['seconds']} s; chaos: "
        f"{Counter(report['chaos'])['kill']} kills, {Counter(report['chaos'])['stop']} stops",
        "",
        "| sent | answered | lost | answered twice |",
        "|---|---|---|---|",
        f"| {report['sent']} | {report['answered']} | {report['lost']} | "
        f"{report['answered_twice']} |",
        "",
        "| process | RSS start (MB) | RSS end (MB) | open files start | open files end |",
        "|---|---|---|---|---|",
    ]
    start, end = report["start"]["processes"], report["end"]["processes"]
    for role in sorted(set(start) | set(end)):
        a, b = start.get(role, {}), end.get(role, {})
        lines.append(
            f"| {role} | {a.get('rss_mb', '-')} | {b.get('rss_mb', '-')} | "
            f"{a.get('open_files', '-')} {a.get('open_by_kind', '')} | "
            f"{b.get('open_files', '-')} {b.get('open_by_kind', '')} |"
        )
    lines += [
        "",
        f"shared-memory segments mapped: {report['start']['shm_segments']} at the start, "
        f"{report['end']['shm_segments']} at the end",
        "",
        f"serve RSS (MB) before the warm-up: "
        f"{report['before_warmup']['processes'].get('serve', {}).get('rss_mb', '-')}; "
        "after each tenth of the calls: "
        + ", ".join(str(mark) for mark in report.get("serve_rss_by_tenth", [])),
        "",
        "serve RSS growth to the end: "
        f"{report.get('serve_rss_growth_pct', {}).get('from_engine_start')} % from the engine's "
        f"start, {report.get('serve_rss_growth_pct', {}).get('after_warmup')} % after the "
        "warm-up (the goal, within 5 %, is read on the second)",
        "",
        f"good clips, quiet: {report['latency']['quiet']}; during the chaos: "
        f"{report['latency']['chaos']}",
        "",
        "outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(report["outcomes"].items())),
    ]
    return "\n".join(lines)


def run(ctx: Any) -> dict[str, Any]:
    """Not part of a ``byoa-bench`` run: the soak is run by name (``byoa-bench soak``)."""
    from byoa_skills.bench.context import Skip

    raise Skip("the soak runs only when named: byoa-bench soak")
