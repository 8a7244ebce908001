"""Latency plots (matplotlib): latency over time per request type, and a latency histogram."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path


def plot_latency(samples: list[tuple[float, str, float]], path: str | Path, title: str = "") -> Path:
    """Write a PNG or SVG (by extension) with two panels; ``samples`` are (epoch time, request type, ms)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    by_type: dict[str, list[tuple[float, float]]] = defaultdict(list)
    t0 = min((t for t, _, _ in samples), default=0.0)
    for t, kind, ms in samples:
        by_type[kind].append((t - t0, ms))
    fig, (ax_time, ax_hist) = plt.subplots(2, 1, figsize=(10, 8), constrained_layout=True)
    kinds = sorted(by_type, key=lambda k: -len(by_type[k]))
    palette = plt.get_cmap("tab10").colors
    colors = {kind: palette[i % len(palette)] for i, kind in enumerate(kinds)}  # same colour in both panels
    for kind in kinds:
        xs, ys = zip(*by_type[kind])
        ax_time.scatter(xs, ys, s=6, label=f"{kind} ({len(xs)})", alpha=0.7, color=colors[kind])
    ax_time.set_xlabel("seconds since first response")
    ax_time.set_ylabel("latency (ms)")
    if samples and max(ms for _, _, ms in samples) > 0:
        ax_time.set_yscale("log")
    ax_time.set_title(title or "Request latency over time")
    if by_type:
        ax_time.legend(fontsize="small", markerscale=2)
        values = [[ms for _, ms in by_type[kind]] for kind in kinds]
        ax_hist.hist(values, bins=50, stacked=True, label=kinds, color=[colors[k] for k in kinds])
        ax_hist.legend(fontsize="small")
    else:
        ax_time.text(0.5, 0.5, "no request/response pairs in this capture", ha="center",
                     transform=ax_time.transAxes)
    ax_hist.set_xlabel("latency (ms)")
    ax_hist.set_ylabel("responses")
    ax_hist.set_title("Latency histogram")
    fig.savefig(path)
    plt.close(fig)
    return path
