"""Writing results: the output folder is checked before any work, and every file is written whole.

`prepare_output` runs before a command starts its work: it creates the folder (or accepts an existing
one), proves it can take a file, and refuses names that exist as folders, each with one line naming
the flag (`OutputError`). `replacing` writes a file under a temporary name in the same folder and
renames it over the target only once it is complete (`os.replace`), so a failure leaves the old file or
none, never half of one. Folders this run created are removed again if the work fails before writing.
"""

from __future__ import annotations

import contextlib
import csv
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence


class OutputError(ValueError):
    """The output place cannot take the results (one line: what and why)."""


def _reason(error: OSError) -> str:
    return error.strerror or type(error).__name__


def _first_existing(path: Path) -> Path:
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return Path(".")


class OutputFolder:
    """A checked output folder; `created` lists the folders this run made (deepest last)."""

    def __init__(self, path: Path, flag: str, created: List[Path]):
        self.path = path
        self.flag = flag
        self.created = created

    def __truediv__(self, name: str) -> Path:
        return self.path / name

    def check_names(self, names: Iterable[str]) -> None:
        """Refuse names that exist as something a file cannot replace (a folder, a socket, ...)."""
        for name in names:
            target = self.path / name
            if target.is_dir():
                raise OutputError(f"{self.flag} {self.path}: {target} is a folder, where a file is to be written; "
                                  "move it away or choose another place")
            if target.exists() and not target.is_file():
                raise OutputError(f"{self.flag} {self.path}: {target} exists and is not a regular file")

    def discard_if_unused(self) -> None:
        """Remove the folders this run created, if they are still empty."""
        for folder in reversed(self.created):
            try:
                folder.rmdir()
            except OSError:
                return

    @contextlib.contextmanager
    def cleanup_on_error(self) -> Iterator["OutputFolder"]:
        try:
            yield self
        except BaseException:
            self.discard_if_unused()
            raise


def prepare_output(path, names: Sequence[str] = (), flag: str = "--out", label: Optional[str] = None) -> OutputFolder:
    """Make sure `path` is (or becomes) a folder this process can write `names` into; OutputError otherwise.

    Messages start with `label` (default: the flag and the path)."""
    path = Path(path)
    label = label or f"{flag} {path}"
    existing = _first_existing(path)
    if not existing.is_dir():
        where = "is a file" if existing == path else f"is under {existing}, which is a file"
        raise OutputError(f"{label}: {where}, not a folder")
    created = [folder for folder in reversed([path, *path.parents]) if not folder.exists()]
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise OutputError(f"{label}: cannot create the folder {path} ({_reason(error)})") from None
    folder = OutputFolder(path, flag, created)
    try:
        handle, probe = tempfile.mkstemp(dir=path, prefix=".gsplat-lpt-probe-")
        os.close(handle)
        os.unlink(probe)
    except OSError as error:
        folder.discard_if_unused()
        raise OutputError(f"{label}: cannot write in {path} ({_reason(error)})") from None
    try:
        folder.check_names(names)
    except OutputError:
        folder.discard_if_unused()
        raise
    return folder


def check_output_file(path, flag: str) -> OutputFolder:
    """A single output file (e.g. --video): its folder must take it, and the name must not be a folder."""
    path = Path(path)
    return prepare_output(path.parent, [path.name], flag=flag, label=f"{flag} {path}")


@contextlib.contextmanager
def replacing(path) -> Iterator[Path]:
    """Yields a temporary path beside `path` (same suffix); renamed over `path` once the block succeeds."""
    path = Path(path)
    try:
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=f".tmp{path.suffix}")
        os.close(handle)
    except OSError as error:
        raise OutputError(f"cannot write {path} ({_reason(error)})") from None
    temporary = Path(temporary)
    try:
        yield temporary
        os.replace(temporary, path)
    except OSError as error:
        raise OutputError(f"cannot write {path} ({_reason(error)})") from None
    finally:
        if temporary.exists():
            temporary.unlink()


def write_text(path, text: str) -> str:
    with replacing(path) as temporary:
        temporary.write_text(text)
    return str(path)


def plain_json(value: Any) -> Any:
    """A copy that strict JSON can hold: NaN and infinities become the strings "nan", "inf", "-inf"."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {key: plain_json(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain_json(item) for item in value]
    return value


def write_json(path, data: Any) -> str:
    """Strict, indented JSON (non-finite floats written as strings, see `plain_json`)."""
    return write_text(path, json.dumps(plain_json(data), indent=2, allow_nan=False) + "\n")


def write_csv(path, rows: Sequence[Dict[str, Any]], columns: Optional[Sequence[str]] = None) -> str:
    """One row per dict; `columns` default to every key in order of first appearance."""
    if columns is None:
        columns = []
        for row in rows:
            columns += [key for key in row if key not in columns]
    with replacing(path) as temporary:
        with open(temporary, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(columns), extrasaction="ignore")
            writer.writeheader()
            writer.writerows(rows)
    return str(path)
