"""``memory``: resident memory of each worker (pids from ``/ready``) and of the front process."""

from __future__ import annotations

from typing import Any

from byoa_skills.bench.context import Context
from byoa_skills.bench.scenarios import enginerun
from byoa_skills.bench.server import rss_mib

NAME = "memory"
TITLE = "Memory"


def run(ctx: Context) -> dict[str, Any]:
    """VmRSS in MiB, read after the engine has answered calls (when a scenario ran them)."""
    ctx.reporter.start(NAME, 1)
    engine = enginerun.running(ctx, "cpu")
    workers = {str(pid): round(rss_mib(pid), 1) for pid in engine.workers()}
    front = round(rss_mib(engine.process.pid), 1)
    ctx.reporter.advance()
    values = list(workers.values())
    return {
        "worker_rss_mib": workers,
        "worker_rss_max_mib": max(values) if values else None,
        "front_rss_mib": front,
        "total_rss_mib": round(front + sum(values), 1),
    }
