"""PNG plots of benchmark and analysis results (matplotlib, no display needed).

- `plot_speedup_vs_imbalance`: speedup over gsplat's blend per frame against the frame's imbalance,
  one marker per mode (the paper's Fig. 12 layout).
- `plot_frame_times`: per-frame blend time of every mode as grouped bars.
- `plot_workload_histogram`: tile workload histogram per frame (from `analyze`).
- `plot_simulated_speedups`: simulated LPT / chunked speedups against imbalance (from `analyze`).
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


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


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


def plot_speedup_vs_imbalance(results: Sequence, path, title: str = "Alpha-blending speedup over gsplat 1.5.3",
                              note: Optional[str] = None) -> str:
    """Speedup (vanilla ms / mode ms) per frame vs imbalance, log-x, with the 1x line."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.0, 4.2))
    series = {
        "lpt": [(r.imbalance, r.speedup("lpt")) for r in results],
        "chunk": [(r.imbalance, r.speedup("chunk")) for r in results],
        "auto": [(r.imbalance, r.speedup("auto")) for r in results],
        "best fixed": [(r.imbalance, r.speedup(r.best_fixed)) for r in results if r.best_fixed],
        "rasterization (auto)": [(r.imbalance, r.end_to_end_speedup) for r in results if r.end_to_end_ms],
    }
    for name, points in series.items():
        points = [(x, y) for x, y in points if x > 0 and not math.isnan(y)]
        if not points:
            continue
        colour, marker = MODE_STYLE[name]
        ax.scatter([x for x, _ in points], [y for _, y in points], label=name, color=colour, marker=marker,
                   s=28, alpha=0.85)
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    ax.set_xscale("log")
    ax.set_xlabel("imbalance  (max tile / (N_total / K))")
    ax.set_ylabel("speedup over vanilla blend (x)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return _finish(fig, path, note)


def plot_frame_times(results: Sequence, path, modes: Sequence[str] = ("vanilla", "lpt", "chunk", "auto"),
                     title: str = "Alpha-blending time per frame", note: Optional[str] = None) -> str:
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
    ax.legend(fontsize=8)
    return _finish(fig, path, note)


def plot_workload_histogram(stats: Sequence, path, title: str = "Tile workload histogram",
                            note: Optional[str] = None) -> str:
    """Non-empty tiles per power-of-two workload bin, one line per frame (log-log)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.0, 4.2))
    for s in stats:
        if not s.histogram_counts:
            continue
        centres = [math.sqrt(low * 2 * low) for low in s.histogram_edges[:-1]]
        ax.step(centres, s.histogram_counts, where="mid",
                label=f"frame {s.frame} (imbalance {s.imbalance:.2f}, max {s.max_workload:,})")
        ax.axvline(s.total_workload / s.concurrent_ctas, color="gray", linewidth=0.6, linestyle=":")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("Gaussians per tile (dotted: N_total / K)")
    ax.set_ylabel("tiles")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    return _finish(fig, path, note)


def plot_simulated_speedups(stats: Sequence, path, title: str = "Simulated makespan speedup over tile order",
                            note: Optional[str] = None) -> str:
    """analyze's simulated LPT and chunked speedups per frame vs imbalance."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.0, 4.2))
    points = [(s.imbalance, s.speedup_lpt, s.speedup_chunked) for s in stats if s.imbalance > 0]
    if points:
        ax.scatter([p[0] for p in points], [p[1] for p in points], label="LPT (simulated)", color="tab:blue", marker="o")
        ax.scatter([p[0] for p in points], [p[2] for p in points], label="policy's chunking (simulated)",
                   color="tab:green", marker="^")
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    ax.set_xscale("log")
    ax.set_xlabel("imbalance  (max tile / (N_total / K))")
    ax.set_ylabel("vanilla makespan / schedule makespan")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return _finish(fig, path, note)
