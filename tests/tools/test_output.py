"""gsplat_lpt/tools/output.py and unwritable --out on every command: checked before any work, one line,
exit 1, nothing half-written."""

import json
import os

import pytest
import torch

from gsplat_lpt.tools import output
from gsplat_lpt.tools.cli import EXIT_BAD_INPUT, main
from gsplat_lpt.tools.output import OutputError, check_output_file, prepare_output, replacing

SMALL = ["--width", "320", "--height", "180", "--scale", "0.02", "--frames", "1"]


def unwritable_places(tmp_path):
    """(label, --out value, expected words) for the places no command can write into."""
    a_file = tmp_path / "a_file.txt"
    a_file.write_text("keep me")
    return [
        ("under /proc", "/proc/gsplat-lpt-test/out", "cannot create the folder"),
        ("under a file", str(a_file / "out"), "which is a file, not a folder"),
        ("an existing file", str(a_file), "is a file, not a folder"),
    ]


def test_prepare_output_creates_and_accepts_folders(tmp_path):
    place = prepare_output(tmp_path / "a" / "b", ["x.csv"])
    assert place.path.is_dir() and place.created == [tmp_path / "a", tmp_path / "a" / "b"]
    assert list(place.path.iterdir()) == []  # the write probe leaves nothing behind
    place.discard_if_unused()
    assert not (tmp_path / "a").exists()
    again = prepare_output(tmp_path)  # an existing folder: nothing created, nothing to discard
    assert again.created == []


@pytest.mark.parametrize("case", range(3))
def test_prepare_output_refuses_unwritable_places(tmp_path, case):
    _, place, words = unwritable_places(tmp_path)[case]
    with pytest.raises(OutputError, match=words) as error:
        prepare_output(place)
    assert str(error.value).startswith(f"--out {place}") and "\n" not in str(error.value)
    assert (tmp_path / "a_file.txt").read_text() == "keep me"


def test_names_that_are_folders_are_refused(tmp_path):
    (tmp_path / "analyze.json").mkdir()
    with pytest.raises(OutputError, match="analyze.json is a folder"):
        prepare_output(tmp_path, ["analyze.csv", "analyze.json"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["analyze.json"]
    with pytest.raises(OutputError, match="--video .*cannot create the folder"):
        check_output_file("/proc/gsplat-lpt-test/v.gif", "--video")


def test_replacing_writes_whole_files_or_nothing(tmp_path):
    target = tmp_path / "results.json"
    output.write_json(target, {"a": 1.5, "b": float("inf"), "c": [float("nan")]})
    assert json.loads(target.read_text()) == {"a": 1.5, "b": "inf", "c": ["nan"]}  # strict JSON
    with pytest.raises(RuntimeError, match="disk full"):
        with replacing(target) as temporary:
            temporary.write_text('{"half": ')
            raise RuntimeError("disk full")
    assert json.loads(target.read_text())["a"] == 1.5  # the old file is untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.json"]  # no temporary left
    output.write_csv(tmp_path / "t.csv", [{"x": 1}, {"x": 2, "y": 3}])
    assert (tmp_path / "t.csv").read_text().splitlines() == ["x,y", "1,", "2,3"]


# ------------------------------------------------------------------------------------- the commands


def assert_one_line_error(capsys, *words):
    captured = capsys.readouterr()
    assert captured.err.startswith("error: ") and captured.err.strip().count("\n") == 0, captured.err
    for word in words:
        assert word in captured.err, captured.err
    return captured


@pytest.mark.parametrize("case", range(3))
def test_analyze_checks_out_before_any_work(tmp_path, capsys, monkeypatch, case):
    import gsplat_lpt.tools.analyze as analyze_module

    _, place, words = unwritable_places(tmp_path)[case]
    monkeypatch.setattr(analyze_module, "analyze_scene", lambda *a, **k: pytest.fail("work started"))
    assert main(["analyze", "--scene", "balanced", *SMALL, "--out", place]) == EXIT_BAD_INPUT
    captured = assert_one_line_error(capsys, "--out", words)
    assert captured.out == ""  # no table: nothing was analysed


def test_analyze_json_being_a_folder_leaves_nothing_half_written(tmp_path, capsys):
    out = tmp_path / "out"
    (out / "analyze.json").mkdir(parents=True)
    assert main(["analyze", "--scene", "balanced", *SMALL, "--out", str(out)]) == EXIT_BAD_INPUT
    assert_one_line_error(capsys, "analyze.json is a folder")
    assert sorted(p.name for p in out.iterdir()) == ["analyze.json"]  # no analyze.csv, no temporaries


def test_histogram_name_taken_by_a_folder_is_found_before_the_analysis(tmp_path, capsys, monkeypatch):
    import gsplat_lpt.tools.analyze as analyze_module

    (tmp_path / "balanced_histogram.png").mkdir()
    monkeypatch.setattr(analyze_module, "analyze_scene", lambda *a, **k: pytest.fail("work started"))
    assert main(["analyze", "--scene", "balanced", *SMALL, "--out", str(tmp_path)]) == EXIT_BAD_INPUT
    assert_one_line_error(capsys, "balanced_histogram.png is a folder")


def test_a_failed_write_leaves_no_partial_file(tmp_path, capsys, monkeypatch):
    import gsplat_lpt.tools.plots as plots_module

    def failing_plot(stats, path, **kwargs):
        with replacing(path) as temporary:
            temporary.write_bytes(b"\x89PNG half")
            raise OSError(28, "No space left on device")

    monkeypatch.setattr(plots_module, "plot_simulated_speedups", failing_plot)
    out = tmp_path / "out"
    assert main(["analyze", "--scene", "balanced", *SMALL, "--out", str(out)]) == EXIT_BAD_INPUT
    assert_one_line_error(capsys, "cannot write", "simulated_speedups.png", "No space left on device")
    assert not (out / "simulated_speedups.png").exists()
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no temporaries


@pytest.fixture()
def pretend_gpu(monkeypatch):
    """Commands that need a GPU get past their GPU check; the work itself must never start."""
    import gsplat_lpt.tools.bench as bench_module
    import gsplat_lpt.tools.render as render_module

    monkeypatch.setattr(bench_module, "require_cuda", lambda *args: None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(bench_module, "bench_scene", lambda *a, **k: pytest.fail("work started"))
    monkeypatch.setattr(render_module, "render_scene", lambda *a, **k: pytest.fail("work started"))


@pytest.mark.parametrize("command", ["bench", "render", "calibrate"])
@pytest.mark.parametrize("case", range(3))
def test_gpu_commands_check_out_before_any_work(tmp_path, capsys, pretend_gpu, command, case):
    _, place, words = unwritable_places(tmp_path)[case]
    assert main([command, "--scene", "balanced", *SMALL, "--out", place]) == EXIT_BAD_INPUT
    assert_one_line_error(capsys, "--out", words)


def test_render_checks_video_and_frame_names(tmp_path, capsys, pretend_gpu):
    out = tmp_path / "frames"
    assert main(["render", "--scene", "balanced", *SMALL, "--out", str(out),
                 "--video", "/proc/gsplat-lpt-test/v.gif"]) == EXIT_BAD_INPUT
    assert_one_line_error(capsys, "--video /proc/gsplat-lpt-test/v.gif", "cannot create the folder")
    assert not out.exists()  # the folder made for the frames is removed again
    (out / "frame_0000.png").mkdir(parents=True)
    assert main(["render", "--scene", "balanced", *SMALL, "--out", str(out)]) == EXIT_BAD_INPUT
    assert_one_line_error(capsys, "frame_0000.png is a folder")
    assert os.listdir(out) == ["frame_0000.png"]
