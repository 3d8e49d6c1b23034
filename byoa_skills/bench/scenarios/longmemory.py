"""``longmemory``: how much memory the engine's front process takes for long recordings sent
to its OpenAI-compatible API: a 59-minute silent FLAC and an hour of real speech (the
English clips of ``tests/data/realspeech`` in turn, with pauses), one at a time and three at
once. Each figure is the growth of ``serve``'s resident memory over what it held just before:
its peak (the kernel's high-water mark, reset before each step where the kernel allows it,
else sampled every 20 ms) and what it keeps after.

Then a burst: sixteen 59-minute MP3s (32 kb/s, 14 MB each) sent at once, each client gone
1.5 s later: the peak growth under the bound on the uploads held, the answers (``uploads-full``
for those beyond it), and the CPU time ``serve`` spends in the 10 s after the last client
left (nothing is left to do for them), with how long until no recording works. The files are
made in the run's temporary home, never kept."""

from __future__ import annotations

import asyncio
import io
import json
import os
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np

from byoa_skills.bench.context import Context, Skip
from byoa_skills.bench.server import EngineProcess, post_transcription, rss_mib
from byoa_skills.pool.memory import peak_rss_mib
from byoa_skills.wav import SAMPLE_RATE

NAME = "longmemory"
TITLE = "Memory of long recordings"
#: The silent recording and the speech, in seconds: full and quick runs.
FULL_SECONDS, QUICK_SECONDS = (3540.0, 3600.0), (600.0, 600.0)
#: Where the real speech clips are, and the pauses put between them (s).
REALSPEECH = Path(__file__).resolve().parents[3] / "tests" / "data" / "realspeech"
PAUSES = (0.6, 1.5, 3.0, 0.8, 2.2)
#: The goal: peak growth for one recording, and for three at once (MiB).
GOAL_ONE_MIB, GOAL_THREE_MIB = 300.0, 600.0
#: The burst: how many uploads at once, their length (minutes), how long each client stays,
#: and how long the CPU time after they left is measured (s).
BURST, BURST_MINUTES, BURST_STAYS, AFTER_SECONDS = 16, 59, 1.5, 10.0


def silent_flac(path: Path, seconds: float) -> Path:
    """A FLAC of ``seconds`` of digital silence, 16 kHz mono 16-bit."""
    import soundfile

    with soundfile.SoundFile(path, "w", SAMPLE_RATE, 1, "PCM_16", format="FLAC") as file:
        block = np.zeros(60 * SAMPLE_RATE, dtype="<i2")
        left = int(seconds * SAMPLE_RATE)
        while left > 0:
            file.write(block[: min(left, len(block))])
            left -= len(block)
    return path


def speech_flac(path: Path, seconds: float, folder: Path = REALSPEECH) -> Path:
    """A FLAC of ``seconds`` of real English speech: each clip in turn, a pause after each."""
    import soundfile

    clips = [c for c in json.loads((folder / "clips.json").read_text()) if c["language"] == "en"]
    left, turn = int(seconds * SAMPLE_RATE), 0
    with soundfile.SoundFile(path, "w", SAMPLE_RATE, 1, "PCM_16", format="FLAC") as file:
        while left > 0:
            samples, rate = soundfile.read(folder / clips[turn % len(clips)]["file"], dtype="int16")
            if rate != SAMPLE_RATE:
                raise RuntimeError(f"{clips[turn % len(clips)]['file']} is not 16 kHz")
            pause = np.zeros(int(PAUSES[turn % len(PAUSES)] * SAMPLE_RATE), dtype="<i2")
            part = np.concatenate([samples, pause])[:left]
            file.write(part)
            left -= len(part)
            turn += 1
    return path


def repeated_recording(
    path: Path,
    minutes: int,
    codec: str = "libmp3lame",
    container: str = "mp3",
    bit_rate: int = 32000,
    rate: int = 16000,
) -> Path:
    """``minutes`` of a tone in quiet noise, mono at ``rate`` Hz, encoded by PyAV with
    ``codec`` at ``bit_rate`` in ``container``: one minute is encoded, and its packets written
    again ``minutes`` times one after the other (a second to make an hour, where encoding it
    all takes tens). Each minute holds a few more milliseconds than 60 s (the encoder's
    padding): 59 copies stay within an hour."""
    import av

    minute = io.BytesIO()
    samples = np.arange(rate * 60)
    noise = np.random.default_rng(7).normal(0, 500, len(samples))
    tone = (np.sin(2 * np.pi * 300 * samples / rate) * 8000 + noise).astype("<i2")
    with av.open(minute, mode="w", format=container) as file:
        stream = file.add_stream(codec, rate=rate, layout="mono")
        stream.bit_rate = bit_rate
        frame = av.AudioFrame.from_ndarray(tone.reshape(1, -1), format="s16", layout="mono")
        frame.sample_rate, frame.pts = rate, 0
        for packet in [*stream.encode(frame), *stream.encode(None)]:
            file.mux(packet)
    minute.seek(0)
    with av.open(minute) as source, av.open(str(path), mode="w", format=container) as target:
        given = source.streams.audio[0]
        written = target.add_stream_from_template(given)
        packets = [packet for packet in source.demux(given) if packet.size]
        span = packets[-1].pts + packets[-1].duration - packets[0].pts
        for copy in range(minutes):
            for packet in packets:
                again = av.Packet(bytes(packet))
                again.pts, again.dts = packet.pts + copy * span, packet.dts + copy * span
                again.duration, again.time_base = packet.duration, packet.time_base
                again.stream = written
                target.mux(again)
    return path


def run(ctx: Context) -> dict[str, Any]:
    """Peak and kept growth of the front process for each recording, one and three at once."""
    if not (REALSPEECH / "clips.json").is_file():
        raise Skip(f"the real speech clips are not in {REALSPEECH}")
    silent_s, speech_s = QUICK_SECONDS if ctx.settings.quick else FULL_SECONDS
    folder = ctx.home / "longmemory"
    folder.mkdir(exist_ok=True)
    files = {
        "silent": silent_flac(folder / "silent.flac", silent_s),
        "speech": speech_flac(folder / "speech.flac", speech_s),
    }
    warm = speech_flac(folder / "warm.flac", 60.0)
    burst_file = repeated_recording(folder / "burst.mp3", BURST_MINUTES)
    steps = [("silent", 1), ("speech", 1), ("silent", 3), ("speech", 3)]
    ctx.reporter.start(NAME, len(steps) + 2)
    engine = EngineProcess.start(
        ctx.home,
        [
            "--model",
            ctx.settings.model,
            "--workers",
            str(ctx.workers),
            "--threads",
            "1",
            "--log-level",
            "warning",
            "--idle-release",
            "0",
        ],
        env={"BYOA_SKILLS_MAX_UPLOAD_MB": "200"},
        log_name="longmemory.log",
    )
    ctx.cleanups.append(engine.stop)
    try:
        engine.wait_ready()
        pid = engine.process.pid
        ready_mib = rss_mib(pid)
        ctx.reporter.step("a first 60 s recording (imports the decoders and the VAD)")
        first = _measure(engine, pid, [warm])
        ctx.reporter.advance()
        figures: dict[str, Any] = {}
        for kind, count in steps:
            ctx.reporter.step(f"{kind}, {count} at once")
            figures[f"{kind}_x{count}"] = _measure(engine, pid, [files[kind]] * count)
            ctx.reporter.advance()
        ctx.reporter.step(f"{BURST} uploads at once, each client gone after {BURST_STAYS:g} s")
        burst = burst_of(engine, burst_file)
        ctx.reporter.advance()
    finally:
        engine.stop()
    return {
        "model": ctx.settings.model,
        "workers": ctx.workers,
        "silent_s": silent_s,
        "speech_s": speech_s,
        "file_mib": {kind: round(path.stat().st_size / 2**20, 2) for kind, path in files.items()},
        "ready_rss_mib": round(ready_mib, 1),
        "first_recording": first,
        "steps": figures,
        "burst": burst,
        "goal_mib": {"one": GOAL_ONE_MIB, "three": GOAL_THREE_MIB},
    }


def burst_of(
    engine: EngineProcess,
    path: Path,
    count: int = BURST,
    stays: float = BURST_STAYS,
    after: float = AFTER_SECONDS,
) -> dict[str, Any]:
    """Send ``count`` copies of ``path`` at once, each client gone ``stays`` seconds later
    unless answered: the front process's peak growth meanwhile (MiB), the answers by status
    and code (``left`` for the clients that left), the CPU seconds ``serve`` used in the
    ``after`` seconds after the last client left, and the seconds from then until its
    ``byoa_recordings_working`` gauge read 0, and until the end of the first second in which
    it used less than 0.1 s of CPU (each None when it did not within ``after``; the first
    also when the engine has no such gauge)."""
    pid = engine.process.pid
    before = rss_mib(pid)
    reset = _reset_high_water(pid)
    sampler = _Sampler(pid)
    sampler.start()
    try:
        outcomes = asyncio.run(_leave_all(engine, path.read_bytes(), path.name, count, stays))
    finally:
        sampler.stop()
    left_at, cpu_then = time.monotonic(), cpu_seconds(pid)
    idle_after: float | None = None
    quiet_after: float | None = None  # the end of the first second it used < 0.1 s of CPU
    second, cpu_second = left_at, cpu_then
    while time.monotonic() - left_at < after:
        if idle_after is None and _working(engine) == 0:
            idle_after = time.monotonic() - left_at
        time.sleep(0.1)
        if time.monotonic() - second >= 1.0:
            used, cpu_second, second = (
                cpu_seconds(pid) - cpu_second,
                cpu_seconds(pid),
                time.monotonic(),
            )
            if quiet_after is None and used < 0.1:
                quiet_after = second - left_at
    peak = max(sampler.peak, (peak_rss_mib(pid) or 0.0) if reset else 0.0)
    counted: dict[str, int] = {}
    for outcome in outcomes:
        counted[outcome] = counted.get(outcome, 0) + 1
    return {
        "uploads": count,
        "file_mib": round(path.stat().st_size / 2**20, 2),
        "stays_s": stays,
        "rss_before_mib": round(before, 1),
        "peak_growth_mib": round(peak - before, 1),
        "peak_from": "high-water mark" if reset else "sampled every 20 ms",
        "outcomes": counted,
        "cpu_after_s": round(cpu_seconds(pid) - cpu_then, 2),
        "after_s": after,
        "working_zero_after_s": None if idle_after is None else round(idle_after, 2),
        "quiet_after_s": None if quiet_after is None else round(quiet_after, 1),
    }


def cpu_seconds(pid: int) -> float:
    """The CPU time ``pid`` has used so far, its threads together (its children apart)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _working(engine: EngineProcess) -> float | None:
    """The engine's ``byoa_recordings_working`` gauge; None when it has none."""
    request = urllib.request.Request(engine.url + "/metrics")
    request.add_header("Authorization", f"Bearer {engine.token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            text = response.read().decode()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("byoa_recordings_working "):
            return float(line.split()[1])
    return None


async def _leave_all(
    engine: EngineProcess, data: bytes, name: str, count: int, stays: float
) -> list[str]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600)) as session:
        return list(
            await asyncio.gather(*(_stay(session, engine, data, name, stays) for _ in range(count)))
        )


async def _stay(
    session: aiohttp.ClientSession, engine: EngineProcess, data: bytes, name: str, stays: float
) -> str:
    """One upload: ``STATUS CODE`` when answered within ``stays`` seconds, else ``left``."""
    job = asyncio.ensure_future(post_transcription(session, engine, data, name, "audio/mpeg"))
    done, _ = await asyncio.wait({job}, timeout=stays)
    if not done:
        job.cancel()
        await asyncio.gather(job, return_exceptions=True)
        return "left"
    try:
        status, body = job.result()
    except (aiohttp.ClientError, OSError) as error:
        return f"failed {type(error).__name__}"
    code = body.get("error", {}).get("code", "") if isinstance(body, dict) else ""
    return f"{status} {code}".strip()


def _measure(engine: EngineProcess, pid: int, paths: list[Path]) -> dict[str, Any]:
    """Send every file at once; the front process's memory around it (MiB) and the answers."""
    before = rss_mib(pid)
    reset = _reset_high_water(pid)
    sampler = _Sampler(pid)
    sampler.start()
    began = time.perf_counter()
    try:
        answers = asyncio.run(_send_all(engine, paths))
    finally:
        sampler.stop()
    seconds = time.perf_counter() - began
    time.sleep(1.0)  # what the answers' last buffers leave
    after = rss_mib(pid)
    peak = max(sampler.peak, (peak_rss_mib(pid) or 0.0) if reset else 0.0)
    return {
        "rss_before_mib": round(before, 1),
        "peak_growth_mib": round(peak - before, 1),
        "kept_growth_mib": round(after - before, 1),
        "peak_from": "high-water mark" if reset else "sampled every 20 ms",
        "seconds": round(seconds, 1),
        "answers": answers,
    }


async def _send_all(engine: EngineProcess, paths: list[Path]) -> list[dict[str, Any]]:
    timeout = aiohttp.ClientTimeout(total=3600)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        return list(await asyncio.gather(*(_send(session, engine, path) for path in paths)))


async def _send(
    session: aiohttp.ClientSession, engine: EngineProcess, path: Path
) -> dict[str, Any]:
    status, body = await post_transcription(
        session, engine, path.read_bytes(), path.name, "audio/flac"
    )
    if status != 200:
        return {"status": status, "code": body.get("error", {}).get("code")}
    return {
        "status": 200,
        "words": len(str(body.get("text", "")).split()),
        "seconds": body.get("usage", {}).get("seconds"),
    }


def _reset_high_water(pid: int) -> bool:
    """Reset the process's peak resident memory (``VmHWM``); False where it cannot be."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    except OSError:
        return False
    return True


class _Sampler:
    """The highest resident memory of a process, read every 20 ms in a thread."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = 0.0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._done.set()
        self._thread.join()

    def _watch(self) -> None:
        while not self._done.is_set():
            self.peak = max(self.peak, rss_mib(self.pid))
            self._done.wait(0.02)
