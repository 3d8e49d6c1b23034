"""Measures the engine against the runtime called directly, on this machine, in one run.

    python scripts/measure_engine.py --model base [--calls 24] [--repeats 5] [--json OUT]

Figures: worker start to ready; first call after ready against the warm median; warm latency
of 1 s, 5 s and 15 s clips; throughput at saturation through the API against the runtime
called directly in every process x thread layout that fits the cores; the API's overhead
per call; resident memory of each worker and of the front process.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import aiohttp  # noqa: E402
from engine import TOKEN, start_engine  # noqa: E402

from byoa_skills.models import ensure_model  # noqa: E402
from byoa_skills.pool.config import available_cores  # noqa: E402
from byoa_skills.wav import parse_wav, wav_base64  # noqa: E402

SPEECH = ROOT / "tests" / "data" / "speech"


def test_clips() -> dict[str, np.ndarray]:
    """int16 clips of about 1, 5 and 15 s of real speech."""

    def read(name: str) -> np.ndarray:
        return parse_wav((SPEECH / name).read_bytes()).samples.copy()

    fifteen = np.concatenate([read("jfk.wav"), read("en-fox.wav")])[: 15 * 16000]
    return {"1s": read("en-hello.wav"), "5s": read("en-fox.wav"), "15s": fifteen}


def skill_input(samples: np.ndarray) -> dict[str, object]:
    return {"audio": {"mime": "audio/wav", "base64": wav_base64(samples / 32768.0)}}


# -- the runtime called directly -----------------------------------------------------------


def _direct_worker(  # type: ignore[no-untyped-def]
    model_dir: str, name: str, threads: int, clips: list[np.ndarray], jobs, out
) -> None:
    from byoa_skills.runtimes import load_backend

    backend = load_backend(model_dir, model_name=name, cpu_threads=threads)
    backend.transcribe(clips[0].astype(np.float32) / 32768, "en")  # warm-up, as the pool does
    out.put("ready")
    while (index := jobs.get()) is not None:
        backend.transcribe(clips[index].astype(np.float32) / 32768, "en")
    out.put("done")


def direct_throughput(
    model_dir: Path, name: str, processes: int, threads: int, calls: list[np.ndarray]
) -> float:
    """Clips per second with ``processes`` x ``threads``, each process taking the next call
    as soon as it is free (as the pool's workers do)."""
    context = multiprocessing.get_context("spawn")
    jobs, out = context.Queue(), context.Queue()
    workers = [
        context.Process(
            target=_direct_worker, args=(str(model_dir), name, threads, calls, jobs, out)
        )
        for _ in range(processes)
    ]
    for worker in workers:
        worker.start()
    for _ in workers:
        assert out.get(timeout=600) == "ready"
    began = time.perf_counter()
    for index in range(len(calls)):
        jobs.put(index)
    for _ in workers:
        jobs.put(None)
    for _ in workers:
        assert out.get(timeout=1200) == "done"
    elapsed = time.perf_counter() - began
    for worker in workers:
        worker.join()
    return len(calls) / elapsed


def direct_latency(
    model_dir: Path, name: str, clips: dict[str, np.ndarray], repeats: int
) -> dict[str, float]:
    """Median seconds per clip length, one thread, in this process."""
    from byoa_skills.runtimes import load_backend

    backend = load_backend(model_dir, model_name=name, cpu_threads=1)
    backend.transcribe(clips["1s"].astype(np.float32) / 32768, "en")
    figures = {}
    for label, samples in clips.items():
        floats = samples.astype(np.float32) / 32768
        times = []
        for _ in range(repeats):
            began = time.perf_counter()
            backend.transcribe(floats, "en")
            times.append(time.perf_counter() - began)
        figures[label] = statistics.median(times)
    return figures


# -- the engine ----------------------------------------------------------------------------


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def timed_call(engine, body: dict[str, object]) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """``(seconds the client waited, seconds of it outside the model)``: the second figure
    is the API's overhead, from the ``Server-Timing`` the engine sends."""
    data = json.dumps(body).encode()
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with aiohttp.ClientSession() as session:
        began = time.perf_counter()
        async with session.post(
            f"{engine.url}/v1/skills/audio.transcribe", data=data, headers=headers
        ) as response:
            answer = await response.json()
        waited = time.perf_counter() - began
    assert response.status == 200, answer
    timing = dict(
        part.strip().split(";dur=") for part in response.headers["Server-Timing"].split(",")
    )
    inside = (float(timing["queue"]) + float(timing["infer"])) / 1000
    return waited, waited - inside


async def saturate(engine, bodies: list[dict[str, object]], concurrency: int) -> float:  # type: ignore[no-untyped-def]
    """Clips per second with ``concurrency`` calls always in flight."""
    pending = list(bodies)

    async def client() -> None:
        while pending:
            await timed_call(engine, pending.pop())

    began = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(concurrency)))
    return len(bodies) / (time.perf_counter() - began)


def measure_engine(home: Path, name: str, workers: int, clips: dict[str, np.ndarray],
                   mix: list[np.ndarray], repeats: int) -> dict[str, object]:  # fmt: skip
    began = time.perf_counter()
    engine = start_engine(home, "--model", name, "--workers", str(workers), "--threads", "1",
                          "--log-level", "warning", log_name=f"measure-{name}.log")  # fmt: skip
    try:
        engine.wait_ready()
        ready_seconds = time.perf_counter() - began
        bodies = {
            label: {"input": skill_input(s), "params": {"language": "en"}}
            for label, s in clips.items()
        }

        async def run() -> dict[str, object]:
            first, _ = await timed_call(engine, bodies["1s"])
            latency, overhead = {}, {}
            for label, body in bodies.items():
                timings = [await timed_call(engine, body) for _ in range(repeats)]
                latency[label] = statistics.median(t[0] for t in timings)
                overhead[label] = statistics.median(t[1] for t in timings) * 1000
            mixed = [{"input": skill_input(s), "params": {"language": "en"}} for s in mix]
            throughput = await saturate(engine, mixed, concurrency=2 * workers)
            return {
                "first_call_s": first,
                "warm_latency_s": latency,
                "api_overhead_ms": overhead,
                "throughput_clips_per_s": throughput,
            }

        figures = asyncio.run(run())
        figures["start_to_ready_s"] = ready_seconds
        figures["rss_worker_mib"] = [round(rss_mib(pid), 1) for pid in engine.workers()]
        figures["rss_front_mib"] = round(rss_mib(engine.process.pid), 1)
        return figures
    finally:
        engine.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="base")
    parser.add_argument("--calls", type=int, default=24, help="calls in the throughput runs")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    home = Path(tempfile.mkdtemp(prefix="byoa-measure-"))
    os.environ["BYOA_SKILLS_HOME"] = str(home)
    model_dir = ensure_model(args.model)
    clips = test_clips()
    mix = [clips[label] for label in ("1s", "5s", "15s")] * (args.calls // 3)
    cores = available_cores()
    layouts = sorted({(p, cores // p) for p in range(1, cores + 1) if cores % p == 0})

    report: dict[str, object] = {"model": args.model, "cores": cores, "calls": len(mix)}
    report["direct_latency_1_thread_s"] = direct_latency(model_dir, args.model, clips, args.repeats)
    report["direct_throughput"] = {
        f"{p}x{t}": direct_throughput(model_dir, args.model, p, t, mix) for p, t in layouts
    }
    report["engine"] = measure_engine(home, args.model, cores, clips, mix, args.repeats)
    best = max(report["direct_throughput"].values())
    engine = report["engine"]
    report["engine_vs_direct_best"] = engine["throughput_clips_per_s"] / best
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
