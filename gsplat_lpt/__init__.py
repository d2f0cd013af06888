"""gsplat-lpt: LPT tile scheduling and depth-wise chunking for gsplat 1.5.x alpha blending.

    import gsplat, gsplat_lpt
    colors, alphas, meta = gsplat.rasterization(..., backend="lpt")   # meta["lpt"]: the schedule

Also: `with gsplat_lpt.use_backend("lpt"): ...`, the environment variable GSPLAT_LPT_BACKEND=lpt
(with `python -m gsplat_lpt.launch script.py` for scripts that cannot be edited), and
`gsplat_lpt.rasterize_to_pixels(...)` / `gsplat_lpt.rasterize_to_pixels_2dgs(...)` with gsplat's signatures
plus `config=`. For repeated frames of one size, `gsplat_lpt.rasterizer_for(...)` gives the plan/run object
behind these.
"""

from .config import MODES, LPTConfig
from .errors import LPTInputError, LPTRuntimeError
from .hook import BACKENDS, ENV_BACKEND, ENV_MODE, install, uninstall, use_backend
from .runtime import Rasterizer, rasterizer_for
from .variants import VARIANTS
from .variants.gaussian3d import rasterize_to_pixels
from .variants.surfel2d import rasterize_to_pixels_2dgs

__version__ = "0.2.0"

install()

__all__ = [
    "BACKENDS",
    "ENV_BACKEND",
    "ENV_MODE",
    "LPTConfig",
    "LPTInputError",
    "LPTRuntimeError",
    "MODES",
    "Rasterizer",
    "VARIANTS",
    "install",
    "rasterize_to_pixels",
    "rasterize_to_pixels_2dgs",
    "rasterizer_for",
    "uninstall",
    "use_backend",
]
