"""PNG plots of a run (matplotlib, imported only here: ``pip install 'byoa-skills[bench]'``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def available() -> bool:
    """Whether matplotlib can be imported."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _sweeps(results: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    scenarios = results["scenarios"]
    found = {}
    for name, label in (
        ("engine", "engine"),
        ("peer", "peer (wyoming-faster-whisper)"),
        ("gpu", "engine, CUDA"),
    ):
        entry = scenarios.get(name)
        if entry and entry.get("status") == "ok":
            found[label] = entry["sweep"]
    return found


def write(results: dict[str, Any], out: Path) -> list[Path]:
    """Write ``concurrency.png`` (throughput and p95 latency against concurrency: engine,
    direct best, peer) and ``latency-by-clip.png``; the paths written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    sweeps = _sweeps(results)
    scenarios = results["scenarios"]
    direct = scenarios.get("direct", {})
    if sweeps:
        figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
        for label, sweep in sweeps.items():
            levels = [lv["concurrency"] for lv in sweep]
            left.plot(levels, [lv["throughput"] for lv in sweep], marker="o", label=label)
            right.plot(levels, [lv["latency_s"]["p95"] for lv in sweep], marker="o", label=label)
        if direct.get("status") == "ok":
            left.axhline(
                direct["best_throughput"],
                color="grey",
                linestyle="--",
                label=f"direct best ({direct['best']})",
            )
        left.set(xlabel="calls in flight", ylabel="clips/s", title="Throughput", ylim=(0, None))
        right.set(xlabel="calls in flight", ylabel="s", title="p95 latency", ylim=(0, None))
        for axes in (left, right):
            axes.grid(alpha=0.3)
            axes.legend(fontsize=8)
        figure.suptitle(f"{results['settings']['model']}, {results['machine']['cores']} cores")
        figure.tight_layout()
        path = out / "concurrency.png"
        figure.savefig(path, dpi=110)
        plt.close(figure)
        written.append(path)
    series = {}
    for name, label in (("engine", "engine"), ("peer", "peer"), ("gpu", "engine, CUDA")):
        entry = scenarios.get(name)
        if entry and entry.get("status") == "ok":
            series[label] = entry["latency_s"]
    if series:
        figure, axes = plt.subplots(figsize=(6.5, 4.2))
        labels = list(next(iter(series.values())))
        width = 0.8 / len(series)
        for index, (label, latency) in enumerate(series.items()):
            xs = [i + index * width for i in range(len(labels))]
            p50 = [latency[c]["p50"] for c in labels]
            p95 = [latency[c]["p95"] for c in labels]
            axes.bar(xs, p50, width, label=f"{label} p50")
            axes.errorbar(
                xs,
                p50,
                yerr=[[0] * len(p50), [b - a for a, b in zip(p50, p95, strict=True)]],
                fmt="none",
                ecolor="black",
                capsize=3,
            )
        axes.set_xticks([i + width * (len(series) - 1) / 2 for i in range(len(labels))], labels)
        axes.set(
            xlabel="clip length", ylabel="s", title="Latency by clip length (bar p50, whisker p95)"
        )
        axes.grid(axis="y", alpha=0.3)
        axes.legend(fontsize=8)
        figure.tight_layout()
        path = out / "latency-by-clip.png"
        figure.savefig(path, dpi=110)
        plt.close(figure)
        written.append(path)
    return written
