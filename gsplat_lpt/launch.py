"""Run an unmodified script with gsplat hooked: `GSPLAT_LPT_BACKEND=lpt python -m gsplat_lpt.launch script.py [args]`."""

from __future__ import annotations

import runpy
import sys


def main(argv=None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        raise SystemExit(0 if argv else 2)
    import gsplat_lpt  # noqa: F401  (installs the hook; the environment variable picks the backend)

    sys.argv = argv
    runpy.run_path(argv[0], run_name="__main__")


if __name__ == "__main__":
    main()
