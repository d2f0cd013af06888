"""`python -m gsplat_lpt ...` is the `gsplat-lpt` command line."""

import sys

from .tools.cli import main

sys.exit(main())
