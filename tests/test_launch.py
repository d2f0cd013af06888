"""gsplat_lpt/launch.py: scripts run as `python script.py` runs them, with gsplat hooked."""

import os
import subprocess
import sys

import pytest

from gsplat_lpt import launch
from helpers import ROOT


def write_script_with_a_module_beside_it(folder):
    """A script that imports a package beside it, as gsplat's simple_trainer.py imports datasets/."""
    (folder / "datasets").mkdir(parents=True)
    (folder / "datasets" / "__init__.py").write_text("")
    (folder / "datasets" / "colmap.py").write_text("NAME = 'beside the script'\n")
    script = folder / "trainer.py"
    script.write_text(
        "import sys\n"
        "import gsplat\n"
        "from datasets.colmap import NAME\n"
        "print(NAME, sys.argv[1:], gsplat.rasterization.__gsplat_lpt_wrapper__)\n"
        "sys.exit(int(sys.argv[1]))\n"
    )
    return script


def test_script_imports_modules_beside_it(tmp_path):
    script = write_script_with_a_module_beside_it(tmp_path / "examples")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    environment = dict(os.environ, PYTHONPATH=str(ROOT), GSPLAT_LPT_BACKEND="lpt")
    result = subprocess.run([sys.executable, "-m", "gsplat_lpt.launch", str(script), "3", "--flag"],
                            capture_output=True, text=True, cwd=elsewhere, env=environment, timeout=300)
    assert result.stdout.strip() == "beside the script ['3', '--flag'] True", result.stderr
    assert result.returncode == 3  # the script's own exit status


def test_script_folder_comes_first_in_process(tmp_path, monkeypatch, capsys):
    script = write_script_with_a_module_beside_it(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    with pytest.raises(SystemExit) as exit_info:
        launch.main([str(script), "0"])
    assert exit_info.value.code == 0
    assert sys.path[0] == str(tmp_path)
    assert capsys.readouterr().out.startswith("beside the script ['0']")


@pytest.mark.parametrize("make,words", [
    (lambda tmp: tmp / "missing.py", "no such file"),
    (lambda tmp: tmp, "a folder without __main__.py"),
])
def test_missing_script_is_one_line_and_exit_2(tmp_path, capsys, make, words):
    with pytest.raises(SystemExit) as exit_info:
        launch.main([str(make(tmp_path))])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert error.startswith("error: cannot run") and words in error and error.strip().count("\n") == 0


def test_usage():
    with pytest.raises(SystemExit) as exit_info:
        launch.main([])
    assert exit_info.value.code == 2
    with pytest.raises(SystemExit) as exit_info:
        launch.main(["--help"])
    assert exit_info.value.code == 0
