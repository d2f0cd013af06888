"""gsplat_lpt/tools/plots.py: PNGs of bench and analyze results (fake, labelled numbers)."""

from gsplat_lpt.tools.plots import plot_frame_times, plot_speedup_vs_imbalance
from helpers import FAKE, fake_bench_results


def test_plots_write_pngs(tmp_path):
    results = fake_bench_results()
    for path in (plot_speedup_vs_imbalance(results, tmp_path / "speedup.png", note=FAKE),
                 plot_frame_times(results, tmp_path / "times.png", note=FAKE)):
        assert open(path, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
