"""The engine's Prometheus metrics, in a registry of its own."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info, generate_latest

from byoa_skills.pool import WorkerPool
from byoa_skills.recordings import RecordingService

LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10, 30, 60, 120)


class EngineMetrics:
    """Calls by skill and outcome, latency, audio seconds, queue depth, worker restarts, warm
    workers, the pool's layout, and the recordings' work and waiting uploads."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.calls = Counter(
            "byoa_calls",
            "Skill calls answered, by skill and outcome code",
            ["skill", "outcome"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "byoa_call_seconds",
            "Time from a call's arrival to its answer",
            ["skill"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.audio_seconds = Counter(
            "byoa_audio_seconds", "Seconds of audio transcribed", registry=self.registry
        )
        self.queue_depth = Gauge(
            "byoa_queue_depth", "Calls waiting for a worker", registry=self.registry
        )
        self.busy_workers = Gauge(
            "byoa_busy_workers", "Workers running a call", registry=self.registry
        )
        self.worker_restarts = Counter(
            "byoa_worker_restarts",
            "Workers replaced, by reason",
            ["reason"],
            registry=self.registry,
        )
        self.warm_workers = Gauge(
            "byoa_warm_workers",
            "Workers warm now (0 while let go after the idle time)",
            registry=self.registry,
        )
        self.layout = Info(
            "byoa_pool_layout", "How the speech pool is laid out", registry=self.registry
        )
        self.recordings_working = Gauge(
            "byoa_recordings_working",
            "Decoding, measuring or cutting jobs of recordings running now (0 once every "
            "recording has stopped)",
            registry=self.registry,
        )
        self.recordings_in_turn = Gauge(
            "byoa_recordings_in_turn",
            "Recordings in their turn (decoded, cut, their pieces run)",
            registry=self.registry,
        )
        self.uploads_waiting = Gauge(
            "byoa_uploads_waiting",
            "Uploads being received or waiting for their turn",
            registry=self.registry,
        )
        self.uploads_waiting_bytes = Gauge(
            "byoa_uploads_waiting_bytes",
            "Bytes the uploads waiting for their turn hold",
            registry=self.registry,
        )

    def watch_pool(self, pool: WorkerPool) -> None:
        """Read the queue depth and busy workers from ``pool`` at each scrape."""
        self.queue_depth.set_function(lambda: pool.queue_depth)
        self.busy_workers.set_function(lambda: pool.busy_workers)
        self.warm_workers.set_function(lambda: pool.warm_workers)
        config = pool.config
        self.layout.info(
            {
                "workers": str(config.workers),
                "threads": str(config.threads_per_worker),
                "batch": str(config.max_batch),
                "encoder_seconds": f"{config.encoder_window or 30.0:g}",
                "idle_release_seconds": f"{config.idle_release:g}",
                "source": config.layout_source,
            }
        )

    def watch_recordings(self, recordings: RecordingService) -> None:
        """Read the recordings' work, turns and waiting uploads from ``recordings`` at each
        scrape."""
        self.recordings_working.set_function(lambda: recordings.work.running)
        self.recordings_in_turn.set_function(lambda: recordings.gate.decoding)
        self.uploads_waiting.set_function(lambda: recordings.line.held)
        self.uploads_waiting_bytes.set_function(lambda: recordings.line.bytes)

    def on_pool_event(self, kind: str, value: str | float) -> None:
        """The pool's event hook: counts worker restarts by reason."""
        if kind == "worker-restart":
            self.worker_restarts.labels(reason=str(value)).inc()

    def record_call(self, skill: str, outcome: str, seconds: float, audio_seconds: float) -> None:
        """Count one answered call, and the seconds of audio it carried (what its skill
        measures as audio; see :data:`~byoa_skills.skills.CallHook`)."""
        self.calls.labels(skill=skill, outcome=outcome).inc()
        self.latency.labels(skill=skill).observe(seconds)
        if audio_seconds:
            self.audio_seconds.inc(audio_seconds)

    def exposition(self) -> bytes:
        """The metrics in Prometheus' text format."""
        return generate_latest(self.registry)
