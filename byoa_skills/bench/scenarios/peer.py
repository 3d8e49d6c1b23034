"""``peer``: the same clips and concurrency sweep against wyoming-faster-whisper, the Home
Assistant speech server, on loopback with the same model folder and options as close as its
command line allows. Spoken to in its Wyoming protocol by :mod:`byoa_skills.bench.wyoming`."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from byoa_skills.bench.children import spawn
from byoa_skills.bench.clips import LABELS
from byoa_skills.bench.context import Context, Skip
from byoa_skills.bench.load import by_clip, by_group, sweep
from byoa_skills.bench.scenarios.enginerun import groups
from byoa_skills.bench.server import free_port, rss_mib
from byoa_skills.bench.wyoming import describe, transcribe

NAME = "peer"
TITLE = "Peer: wyoming-faster-whisper"
MODULE = "wyoming_faster_whisper"
#: A separate environment the peer may live in: ``python -m venv .venv-peer &&
#: .venv-peer/bin/pip install wyoming-faster-whisper``.
PEER_VENV = Path(__file__).resolve().parents[3] / ".venv-peer"


def peer_python() -> str | None:
    """An interpreter that can run the peer: ``BYOA_BENCH_PEER_PYTHON``, this one, or
    ``.venv-peer``; ``None`` when none can."""
    named = os.environ.get("BYOA_BENCH_PEER_PYTHON")
    if named:
        return named
    if importlib.util.find_spec(MODULE) is not None:
        return sys.executable
    candidate = PEER_VENV / "bin" / "python"
    return str(candidate) if candidate.is_file() else None


def peer_command(python: str, ctx: Context, port: int, data_dir: Path) -> list[str]:
    """The peer's command line: our model folder and our decoding choices where it has them
    (beam 5, language given, Silero VAD with threshold 0.5 and 2 s minimum silence, int8 on
    the CPU); one process using every core, its only way to use them."""
    return [
        python,
        "-m",
        MODULE,
        "--uri",
        f"tcp://127.0.0.1:{port}",
        "--model",
        str(ctx.model_dir),
        "--data-dir",
        str(data_dir),
        "--local-files-only",
        "--stt-library",
        "faster-whisper",
        "--device",
        "cpu",
        "--compute-type",
        "int8",
        "--cpu-threads",
        str(ctx.cores),
        "--beam-size",
        "5",
        "--language",
        "en",
        "--vad-filter",
        "--vad-threshold",
        "0.5",
        "--vad-min-speech-ms",
        "0",
        "--vad-min-silence-ms",
        "2000",
    ]


def _wait_ready(process: subprocess.Popen[bytes], port: int, log: Path, timeout: float) -> None:
    limit = time.monotonic() + timeout
    while time.monotonic() < limit:
        if process.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"wyoming-faster-whisper ended early:\n{tail}")
        try:
            asyncio.run(describe("127.0.0.1", port, timeout=5))
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("wyoming-faster-whisper did not answer in time")


def run(ctx: Context) -> dict[str, Any]:
    """The peer's latency by clip length and its concurrency sweep, beside the engine's."""
    if ctx.settings.device == "cuda":
        ctx.reporter.note("peer: measured on the CPU")
    python = peer_python()
    if python is None:
        raise Skip(
            "wyoming-faster-whisper is not installed: pip install 'byoa-skills[peer]' "
            f"(or make {PEER_VENV.name} with it, or set BYOA_BENCH_PEER_PYTHON)"
        )
    levels = ctx.sweep()
    settings = ctx.settings
    ctx.reporter.start(NAME, 1 + settings.rounds * (len(LABELS) + len(ctx.real) + len(levels)))
    port = free_port()
    data_dir = Path(tempfile.mkdtemp(prefix="peer-", dir=ctx.home))
    log = ctx.home / "peer.log"
    ctx.reporter.step("starting wyoming-faster-whisper")
    began = time.perf_counter()
    with log.open("wb") as log_file:
        process = spawn(
            peer_command(python, ctx, port, data_dir), stdout=subprocess.DEVNULL, stderr=log_file
        )

    def stop() -> None:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    ctx.cleanups.append(stop)
    _wait_ready(process, port, log, timeout=600)
    ready_s = time.perf_counter() - began
    ctx.reporter.advance()
    pcm = {key: samples.astype("<i2").tobytes() for key, samples in ctx.clips.items()}

    texts: dict[str, str] = {}

    async def call(key: str) -> float:
        started = time.perf_counter()
        texts[key] = await transcribe("127.0.0.1", port, pcm[key], language=ctx.language(key))
        return time.perf_counter() - started

    async def go() -> dict[str, Any]:
        await call("1s")  # its first call loads nothing more, but pays any lazy start
        ctx.reporter.step("latency by clip length")
        latency = await by_clip(
            call, LABELS, settings.repeats, settings.rounds, ctx.reporter.advance
        )
        ctx.reporter.step("latency by clip group, the real clips one at a time")
        by_groups = await by_group(
            call, groups(ctx), settings.repeats, settings.rounds, ctx.reporter.advance
        )
        ctx.reporter.step(f"concurrency sweep {list(levels)}")
        levels_out = await sweep(
            call, ctx.real_mix(settings.calls), levels, settings.rounds, ctx.reporter.advance
        )
        return {
            "latency_s": latency,
            "group_latency_s": by_groups,
            "sweep": [level.to_dict() for level in levels_out],
        }

    figures = asyncio.run(go())
    figures["start_to_ready_s"] = ready_s
    figures["rss_mib"] = round(rss_mib(process.pid), 1)
    figures["command"] = " ".join(peer_command("python", ctx, port, Path("DATA")))
    figures["cpu_threads"] = ctx.cores
    figures["texts"] = texts
    top = max(figures["sweep"], key=lambda level: level["throughput"])
    figures["best_throughput"] = top["throughput"]
    stop()
    return figures
