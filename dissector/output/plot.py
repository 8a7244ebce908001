"""Plots of a capture (matplotlib): latency over time per request type (errors marked apart), a latency
histogram with log-spaced bins, and throughput per direction; times from the timeline's origin."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from .text import safe


def _label(text: str, limit: int = 120) -> str:
    """Text for a plot: escaped as everywhere (``safe``), and every ``$`` literal (matplotlib reads a text
    between two ``$`` as TeX math, and raises on what it cannot parse: a capture named ``$\\x$.pcap``)."""
    return safe(text, limit).replace("$", r"\$")


def plot_latency(samples: list[tuple[float, str, float, bool]], path: str | Path, title: str = "", *,
                 origin: float | None = None, throughput: dict[int, list[int]] | None = None,
                 width: float = 1.0) -> Path:
    """Write a PNG or SVG (by extension). ``samples``: (epoch time, request type, ms, error); ``origin``: time 0
    (the capture's first record, as on the timeline); ``throughput``: time bucket of ``width`` seconds ->
    [msgs →, bytes →, msgs ←, bytes ←]."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    t0 = origin if origin is not None else min((s[0] for s in samples), default=0.0)
    by_type: dict[str, list[tuple[float, float]]] = defaultdict(list)
    errors: list[tuple[float, float]] = []
    for t, kind, ms, error in samples:
        (errors if error else by_type[kind]).append((t - t0, ms))
    fig, (ax_time, ax_hist, ax_rate) = plt.subplots(3, 1, figsize=(11, 11), constrained_layout=True)
    kinds = sorted(by_type, key=lambda k: -len(by_type[k]))
    palette = plt.get_cmap("tab10").colors
    colors = {kind: palette[i % len(palette)] for i, kind in enumerate(kinds)}  # same colour in every panel
    for kind in kinds:
        xs, ys = zip(*by_type[kind])
        ax_time.scatter(xs, ys, s=6, label=_label(f"{kind} ({len(xs)})"), alpha=0.7, color=colors[kind])
    if errors:
        xs, ys = zip(*errors)
        ax_time.scatter(xs, ys, s=40, marker="x", color="red", label=f"answered by ERROR / SEND_ERROR ({len(xs)})")
    ax_time.set_xlabel("seconds since the start of the capture")
    ax_time.set_ylabel("latency (ms)")
    positive = [s[2] for s in samples if s[2] > 0]
    if positive:
        ax_time.set_yscale("log")
    ax_time.set_title(_label(title or "Request latency over time", 200))
    if samples:
        ax_time.legend(fontsize="small", markerscale=2, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    else:
        ax_time.text(0.5, 0.5, "no request/response pairs in this capture", ha="center", transform=ax_time.transAxes)
    if positive:
        # log-spaced bins: a control request at 0.05 ms and a SEND at 40 ms are both visible
        low, high = min(positive), max(positive)
        if high <= low:
            high = low * 10
        bins = [low * (high / low) ** (i / 40) for i in range(41)]
        values = [[ms for _, ms in by_type[kind] if ms > 0] for kind in kinds]
        ax_hist.hist(values, bins=bins, stacked=True, label=[_label(k) for k in kinds], color=[colors[k] for k in kinds])
        ax_hist.set_xscale("log")
        ax_hist.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax_hist.set_xlabel("latency (ms, log scale)")
    ax_hist.set_ylabel("responses")
    ax_hist.set_title("Latency histogram")
    _throughput(ax_rate, throughput or {}, t0, width)
    if samples:
        right = max(ax_time.get_xlim()[1], ax_rate.get_xlim()[1])
        for ax in (ax_time, ax_rate):
            ax.set_xlim(min(0, ax.get_xlim()[0]), right)  # one time axis for both panels
    fig.savefig(path)
    plt.close(fig)
    return path


def _throughput(ax, throughput: dict[int, list[int]], t0: float, width: float) -> None:
    ax.set_title(f"Throughput per {_duration(width)} (bars: messages per second; lines: bytes per second)")
    ax.set_xlabel("seconds since the start of the capture")
    if not throughput:
        ax.text(0.5, 0.5, "no messages in this capture", ha="center", transform=ax.transAxes)
        return
    slots = list(range(min(throughput), max(throughput) + 1))  # empty buckets are zero, not interpolated
    throughput = {s: throughput.get(s, (0, 0, 0, 0)) for s in slots}
    xs = [slot * width - t0 for slot in slots]
    half = width * 0.45
    ax.bar(xs, [throughput[s][0] / width for s in slots], width=half, align="edge", label="messages to the broker")
    ax.bar([x + half for x in xs], [throughput[s][2] / width for s in slots], width=half, align="edge",
           label="messages to the clients")
    ax.set_ylabel("messages/s")
    twin = ax.twinx()
    centres = [x + width / 2 for x in xs]
    twin.plot(centres, [throughput[s][1] / width for s in slots], color="tab:blue", alpha=0.6,
              label="bytes to the broker")
    twin.plot(centres, [throughput[s][3] / width for s in slots], color="tab:orange", alpha=0.6,
              label="bytes to the clients")
    twin.set_ylabel("bytes/s")
    twin.set_ylim(bottom=0)
    lines, labels = ax.get_legend_handles_labels()
    more, more_labels = twin.get_legend_handles_labels()
    ax.legend(lines + more, labels + more_labels, fontsize="small", loc="upper left", bbox_to_anchor=(1.08, 1.0))


def _duration(seconds: float) -> str:
    return f"{seconds * 1000:g} ms" if seconds < 1 else f"{seconds:g} s"
