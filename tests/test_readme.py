"""README.md: its commands parse (and the CPU ones run as written), it stands alone, and it agrees with
the code it describes (install order, outputs, test data, gsplat's build time)."""

import re
import shlex

import pytest

from helpers import EXAMPLES, ROOT

README = (ROOT / "README.md").read_text()


def shell_commands():
    """Every command line of README's bash blocks (continuations joined, comments dropped)."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", README, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" #")[0].strip()
            if line and not line.startswith("#"):
                commands.append(line)
    return commands


def tool_command_lines(program: str):
    """(words after the program) of README lines running `program` (gsplat-lpt, directly or via torchrun)."""
    found = []
    for line in shell_commands():
        words = shlex.split(line)
        if words[0] == "torchrun":
            words = words[words.index("-m") + 1:] if "-m" in words else words[next(
                i for i, w in enumerate(words) if w.endswith(".py")):]
            words = (["gsplat-lpt"] + words[1:]) if words[0] == "gsplat_lpt" else words
        if words[0] == program:
            found.append(words[1:])
    return found


def test_readme_command_lines_parse():
    from gsplat_lpt.tools.cli import parse

    lines = tool_command_lines("gsplat-lpt")
    assert {words[0] for words in lines} >= {"bench", "analyze", "render", "calibrate"}
    for words in lines:
        parse(words)  # exits (fails the test) on an unknown flag or a bad value


def test_readme_example_lines_parse():
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location("omnire_driving_readme", EXAMPLES / "omnire_driving.py")
    example = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = example
    try:
        spec.loader.exec_module(example)
        lines = tool_command_lines("examples/omnire_driving.py")
        lines += [shlex.split(line)[2:] for line in shell_commands() if line.startswith("python examples/omnire")]
        assert len(lines) >= 3
        for words in lines:
            example.validate(example.parse_args(words))
    finally:
        sys.modules.pop(spec.name, None)


def test_readme_cpu_analysis_runs_as_written(tmp_path, monkeypatch, capsys):
    from gsplat_lpt.tools.cli import main

    monkeypatch.chdir(tmp_path)
    line = "gsplat-lpt analyze --scene street extreme"
    assert line in README
    assert main(shlex.split(line)[1:]) == 0
    assert "street" in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []  # analyze writes nothing without --out, as README says


def test_install_gives_the_cpu_wheel_index_before_the_package():
    cpu = README.index("pip install torch --index-url https://download.pytorch.org/whl/cpu")
    package = README.index('pip install -e ".[test]"')
    assert cpu < package
    ci = (ROOT / ".ci" / "run").read_text()
    assert 'pip install -q -e ".[test]"' in ci and "python -m pytest -q" in ci and "python -m pytest -q" in README
    assert "download.pytorch.org/whl/cpu" in ci  # the comment says why CI differs


def test_readme_tells_where_results_go():
    from gsplat_lpt.tools.cli import Bench, Calibrate, Render

    for command in (Bench, Render, Calibrate):
        assert f"`{command().out}/`" in README
    assert "writes nothing" in README


def test_build_time_is_stated_alike():
    conftest = (ROOT / "tests" / "conftest.py").read_text()
    assert "minutes" in README and "minutes" in conftest
    for text in (README, conftest):
        assert "hour" not in text and "a minute or two" not in text


def test_test_data_and_k_are_documented():
    assert "GSPLAT_LPT_DATA" in README and "test_garden.npz" in README and "gradio-model3dgs==0.2.5" in README
    assert "occupancy API" in README and "792" in README and "concurrent_ctas" in README


def project_text_files():
    folders = [ROOT / "gsplat_lpt", ROOT / "examples", ROOT / "kernels", ROOT / "tests" / "device",
               ROOT / "tests" / "tools", ROOT / "tests" / "scenes", ROOT / "tests" / "examples", ROOT / ".ci"]
    files = [ROOT / "README.md", ROOT / "pyproject.toml", ROOT / "tests" / "conftest.py", ROOT / "tests" / "helpers.py"]
    for folder in folders:
        files += [p for p in folder.rglob("*") if p.is_file() and p.suffix in (".py", ".md", ".sh", ".cu", ".cuh", ".txt",
                                                                               ".csv", "") and "__pycache__" not in p.parts]
    return files


@pytest.mark.parametrize("pattern", [r"\bBRIEF\b", r"\.\./shared", r"\bin this session\b", r"\.gpu/setup\.sh",
                                     r"/root/", r"/home/\w+"])
def test_the_repository_stands_alone(pattern):
    offending = [str(path.relative_to(ROOT)) for path in project_text_files()
                 if re.search(pattern, path.read_text(errors="replace"))]
    assert offending == [], f"{pattern} in {offending}"
