"""PNG plots of benchmark and analysis results (matplotlib, no display needed).

- `plot_speedup_vs_imbalance`: speedup over gsplat's blend per frame against the frame's imbalance,
  one marker per mode (the paper's Fig. 12 layout).
- `plot_frame_times`: per-frame blend time of every mode as grouped bars.
- `plot_workload_histogram`: tile workload histogram per frame (from `analyze`).
- `plot_simulated_speedups`: simulated LPT / chunked speedups against imbalance (from `analyze`).

Each has a `*_figure` twin that returns the matplotlib Figure instead of writing it. Axes carry plain
tick labels (12, 13.5, 20; never 1.29 x 10^1), and legends sit outside the axes, so no point is hidden.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Optional, Sequence

from .output import replacing

MODE_STYLE = {  # colour, marker
    "lpt": ("tab:blue", "o"),
    "chunk": ("tab:orange", "s"),
    "auto": ("tab:green", "^"),
    "best fixed": ("tab:purple", "x"),
    "rasterization (auto)": ("tab:gray", "d"),
}
IMBALANCE_LABEL = "imbalance  (max tile / (N_total / K))"


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _plain(value: float, _position=None) -> str:
    """Tick label as a plain number: 0.2, 13.5, 1000."""
    return f"{value:g}"


def _value_axis(axis, values: Sequence[float], base: float = 10.0) -> None:
    """A log axis with plain labels over wide ranges; linear (plain labels) when the values span less than 4x.

    matplotlib's log axis labels minor ticks in scientific notation (1.29 x 10^1) when a range holds no
    decade; here every label is a plain number and a narrow range gets evenly spaced linear ticks."""
    from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter

    positive = [v for v in values if v > 0 and math.isfinite(v)]
    low, high = (min(positive), max(positive)) if positive else (1.0, 1.0)
    if high / low < 4.0:
        axis.set_major_locator(MaxNLocator(nbins=6))
        axis.set_major_formatter(FuncFormatter(_plain))
        return
    set_scale = axis.axes.set_xscale if axis is axis.axes.xaxis else axis.axes.set_yscale
    set_scale("log", base=base)
    axis.set_major_locator(LogLocator(base=base))
    axis.set_major_formatter(FuncFormatter(_plain))
    if base == 10.0 and high / low < 1000.0:  # a few decades: label 2 and 5 between them too
        axis.set_minor_locator(LogLocator(base=base, subs=(2.0, 5.0)))
        axis.set_minor_formatter(FuncFormatter(_plain))
    else:
        axis.set_minor_formatter(NullFormatter())


def _legend_outside(ax) -> None:
    """The legend right of the axes: it can never cover a point."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)


def _speedup_axes(ax, imbalances: Sequence[float], ylabel: str, title: str) -> None:
    """Speedup against imbalance: the 1x line, plain imbalance ticks, labels, grid, legend outside."""
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    _value_axis(ax.xaxis, imbalances)
    ax.set_xlabel(IMBALANCE_LABEL)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    _legend_outside(ax)


def _finish(fig, path, note: Optional[str]) -> str:
    if note:
        fig.text(0.01, 0.005, note, fontsize=7, color="dimgray", ha="left", va="bottom")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with replacing(path) as temporary:  # a failed save leaves no half-written PNG
            fig.savefig(temporary, format="png", dpi=130, bbox_inches="tight")
    finally:
        _pyplot().close(fig)
    return str(path)


def speedup_figure(results: Sequence, title: str = "Alpha-blending speedup over gsplat 1.5.3"):
    """Speedup (vanilla ms / mode ms) per frame vs imbalance, with the 1x line."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.0, 4.2))
    series = {
        "lpt": [(r.imbalance, r.speedup("lpt")) for r in results],
        "chunk": [(r.imbalance, r.speedup("chunk")) for r in results],
        "auto": [(r.imbalance, r.speedup("auto")) for r in results],
        "best fixed": [(r.imbalance, r.speedup(r.best_fixed)) for r in results if r.best_fixed],
        "rasterization (auto)": [(r.imbalance, r.end_to_end_speedup) for r in results if r.end_to_end_ms],
    }
    xs = []
    for name, points in series.items():
        points = [(x, y) for x, y in points if x > 0 and not math.isnan(y)]
        if not points:
            continue
        colour, marker = MODE_STYLE[name]
        ax.scatter([x for x, _ in points], [y for _, y in points], label=name, color=colour, marker=marker,
                   s=28, alpha=0.85)
        xs += [x for x, _ in points]
    _speedup_axes(ax, xs, "speedup over vanilla blend (x)", title)
    return fig


def plot_speedup_vs_imbalance(results: Sequence, path, title: str = "Alpha-blending speedup over gsplat 1.5.3",
                              note: Optional[str] = None) -> str:
    return _finish(speedup_figure(results, title), path, note)


def frame_times_figure(results: Sequence, modes: Sequence[str] = ("vanilla", "lpt", "chunk", "auto"),
                       title: str = "Alpha-blending time per frame"):
    """Grouped bars: one group per frame (scene:frame, imbalance), one bar per mode."""
    plt = _pyplot()
    labels = [f"{r.scene}:{r.frame}\n{r.imbalance:.1f}" for r in results]
    width = 0.8 / max(len(modes), 1)
    fig, ax = plt.subplots(figsize=(max(6.0, 0.55 * len(results) * len(modes) / 2 + 2), 4.2))
    colours = {"vanilla": "tab:red", "lpt": "tab:blue", "chunk": "tab:orange", "auto": "tab:green"}
    for index, mode in enumerate(modes):
        values = [r.blend_ms.get(mode, float("nan")) for r in results]
        positions = [i + (index - (len(modes) - 1) / 2) * width for i in range(len(results))]
        ax.bar(positions, values, width=width, label=mode, color=colours.get(mode))
    ax.set_xticks(range(len(results)))
    ax.set_xticklabels(labels, fontsize=7)
    ax.set_ylabel("median ms")
    ax.set_xlabel("scene:frame / imbalance")
    ax.set_title(title)
    ax.grid(True, axis="y", alpha=0.3)
    _legend_outside(ax)
    return fig


def plot_frame_times(results: Sequence, path, modes: Sequence[str] = ("vanilla", "lpt", "chunk", "auto"),
                     title: str = "Alpha-blending time per frame", note: Optional[str] = None) -> str:
    return _finish(frame_times_figure(results, modes, title), path, note)


def histogram_figure(stats: Sequence, title: str = "Tile workload histogram"):
    """Non-empty tiles per power-of-two workload bin, one line per frame (log-log)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.0, 4.2))
    centres_all = []
    for s in stats:
        if not s.histogram_counts:
            continue
        centres = [math.sqrt(low * 2 * low) for low in s.histogram_edges[:-1]]
        centres_all += centres
        ax.step(centres, s.histogram_counts, where="mid",
                label=f"frame {s.frame} (imbalance {s.imbalance:.2f}, max {s.max_workload:,})")
        ax.axvline(s.total_workload / s.concurrent_ctas, color="gray", linewidth=0.6, linestyle=":")
    _value_axis(ax.xaxis, centres_all or [1.0, 1024.0], base=2.0)
    _value_axis(ax.yaxis, [count for s in stats for count in s.histogram_counts if count > 0] or [1.0, 10.0])
    ax.set_xlabel("Gaussians per tile (dotted: N_total / K)")
    ax.set_ylabel("tiles")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    _legend_outside(ax)
    return fig


def plot_workload_histogram(stats: Sequence, path, title: str = "Tile workload histogram",
                            note: Optional[str] = None) -> str:
    return _finish(histogram_figure(stats, title), path, note)


def simulated_figure(stats: Sequence, title: str = "Simulated makespan speedup over tile order"):
    """analyze's simulated LPT and chunked speedups per frame vs imbalance."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.0, 4.2))
    points = [(s.imbalance, s.speedup_lpt, s.speedup_chunked) for s in stats if s.imbalance > 0]
    if points:
        ax.scatter([p[0] for p in points], [p[1] for p in points], label="LPT (simulated)", color="tab:blue", marker="o")
        ax.scatter([p[0] for p in points], [p[2] for p in points], label="policy's chunking (simulated)",
                   color="tab:green", marker="^")
    _speedup_axes(ax, [p[0] for p in points], "vanilla makespan / schedule makespan", title)
    return fig


def plot_simulated_speedups(stats: Sequence, path, title: str = "Simulated makespan speedup over tile order",
                            note: Optional[str] = None) -> str:
    return _finish(simulated_figure(stats, title), path, note)
