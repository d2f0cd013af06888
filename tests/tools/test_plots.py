"""gsplat_lpt/tools/plots.py: PNGs of bench and analyze results (fake, labelled numbers), plain tick
labels, legends that cover no point."""

import dataclasses

import pytest

from gsplat_lpt.tools import plots
from gsplat_lpt.tools.plots import plot_frame_times, plot_speedup_vs_imbalance
from helpers import FAKE, fake_bench_results


def test_plots_write_pngs(tmp_path):
    results = fake_bench_results()
    for path in (plot_speedup_vs_imbalance(results, tmp_path / "speedup.png", note=FAKE),
                 plot_frame_times(results, tmp_path / "times.png", note=FAKE)):
        assert open(path, "rb").read(8) == b"\x89PNG\r\n\x1a\n"


def with_imbalances(values):
    """The fake results, one per imbalance value (speedups as in the fake heavy frame)."""
    heavy = fake_bench_results()[0]
    return [dataclasses.replace(heavy, frame=i, imbalance=value) for i, value in enumerate(values)]


def visible_tick_labels(fig):
    ax = fig.axes[0]
    fig.canvas.draw()
    low, high = sorted(ax.get_xlim())
    labels = []
    for minor in (False, True):
        for tick, label in zip(ax.xaxis.get_ticklocs(minor=minor), ax.xaxis.get_ticklabels(minor=minor)):
            if low <= tick <= high and label.get_text():
                labels.append(label.get_text())
    return labels


@pytest.mark.parametrize("imbalances", [[12.9, 13.1, 13.5], [0.2, 1.6, 3.4, 13.0, 52.0], [0.17, 0.18]])
def test_speedup_axis_has_plain_labels_and_the_legend_covers_nothing(imbalances):
    fig = plots.speedup_figure(with_imbalances(imbalances))
    labels = visible_tick_labels(fig)
    assert len(labels) >= 2, labels
    for text in labels:  # plain numbers: no 1.29 x 10^1
        assert "10^" not in text and "times" not in text and "\u00d7" not in text, labels
        float(text.replace("\u2212", "-"))
    ax = fig.axes[0]
    legend = ax.get_legend().get_window_extent()
    axes_box = ax.get_window_extent()
    assert legend.x0 >= axes_box.x1  # right of the plotting area: it cannot hide a point
    plots._pyplot().close(fig)


def test_analyze_plots_have_plain_labels(tmp_path):
    from gsplat_lpt.scenes import make_scene
    from gsplat_lpt.tools.analyze import analyze_scene

    stats, _ = analyze_scene(make_scene("street", width=320, height=180, scale=0.02, frames=2), 792)
    for figure in (plots.histogram_figure(stats), plots.simulated_figure(stats)):
        labels = visible_tick_labels(figure)
        assert labels and all("^" not in text and "times" not in text for text in labels), labels
        plots._pyplot().close(figure)
