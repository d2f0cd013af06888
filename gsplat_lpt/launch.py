"""Run an unmodified script with gsplat hooked: `GSPLAT_LPT_BACKEND=lpt python -m gsplat_lpt.launch script.py [args]`.

The script runs as `python script.py [args]` would run it: as __main__, with sys.argv = [script, args...]
and the script's folder first on sys.path, so that it imports the modules beside it (gsplat's
examples/simple_trainer.py imports its datasets/ package that way). Exit status 2 if the script is missing.
"""

from __future__ import annotations

import os
import runpy
import sys

EXIT_USAGE = 2


def main(argv=None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        raise SystemExit(0 if argv else EXIT_USAGE)
    script = argv[0]
    if not os.path.exists(script):
        print(f"error: cannot run {script}: no such file", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)
    if os.path.isdir(script) and not os.path.isfile(os.path.join(script, "__main__.py")):
        print(f"error: cannot run {script}: a folder without __main__.py", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)
    import gsplat_lpt  # noqa: F401  (installs the hook; the environment variable picks the backend)

    sys.argv = argv
    # `python script.py` puts the script's folder first on sys.path (in place of this launcher's entry);
    # for a folder with __main__.py, run_path inserts the folder itself.
    folder = os.path.dirname(os.path.abspath(script))
    if os.path.isfile(script):
        if sys.path and sys.path[0] in ("", os.getcwd()):
            sys.path[0] = folder
        else:
            sys.path.insert(0, folder)
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
