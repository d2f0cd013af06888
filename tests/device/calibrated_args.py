"""Prints `--overhead-lambda X --imbalance-beta Y` from a calibration.json (nothing if it is missing)."""
import json
import sys
from pathlib import Path

path = Path(sys.argv[1])
if path.is_file():
    fit = json.loads(path.read_text())["fit"]
    print(f"--overhead-lambda {fit['overhead_lambda']} --imbalance-beta {fit['imbalance_beta']}")
