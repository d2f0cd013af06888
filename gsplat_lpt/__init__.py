"""gsplat-lpt: LPT tile scheduling and depth-wise chunking for gsplat 1.5.x alpha blending.

    import gsplat, gsplat_lpt
    colors, alphas, meta = gsplat.rasterization(..., backend="lpt")   # meta["lpt"]: the schedule

Also: `with gsplat_lpt.use_backend("lpt"): ...`, the environment variable GSPLAT_LPT_BACKEND=lpt
(with `python -m gsplat_lpt.launch script.py` for scripts that cannot be edited), and
`gsplat_lpt.rasterize_to_pixels(...)` with gsplat's signature plus `config=`.
"""

from .config import MODES, LPTConfig
from .hook import BACKENDS, ENV_BACKEND, ENV_MODE, install, uninstall, use_backend
from .rasterize import rasterize_to_pixels

__version__ = "0.1.0"

install()

__all__ = [
    "BACKENDS",
    "ENV_BACKEND",
    "ENV_MODE",
    "LPTConfig",
    "MODES",
    "install",
    "rasterize_to_pixels",
    "uninstall",
    "use_backend",
]
