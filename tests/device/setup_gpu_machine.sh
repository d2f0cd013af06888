#!/usr/bin/env bash
# Prepares a GPU machine that has Python 3, PyTorch with CUDA and nvcc, but no way to reach a package index:
#   1. installs the wheels of a local folder into a target folder (no dependency resolution: bring a wheel
#      for every package the machine lacks; README, "Developing on a GPU machine", lists them);
#   2. puts that folder and this checkout on PYTHONPATH (nothing is installed into the system Python);
#   3. builds gsplat's CUDA extension once, for this GPU only (minutes; torch keeps it in its extension
#      cache, so tests, benchmarks and every torchrun process afterwards start at once).
#
# From the repository root:
#   source tests/device/setup_gpu_machine.sh WHEELS_DIR [TARGET_DIR]   # PYTHONPATH stays set in this shell
#   bash tests/device/setup_gpu_machine.sh WHEELS_DIR [TARGET_DIR]     # the same, then prints the export line
# TARGET_DIR defaults to ${TMPDIR:-/tmp}/gsplat-lpt-site. TORCH_CUDA_ARCH_LIST and MAX_JOBS are honoured.

_gsplat_lpt_setup() {
  local wheels=${1:-} target=${2:-${TMPDIR:-/tmp}/gsplat-lpt-site} repo
  repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  if [ -z "$wheels" ] || [ ! -d "$wheels" ]; then
    echo "usage: source tests/device/setup_gpu_machine.sh WHEELS_DIR [TARGET_DIR]  (WHEELS_DIR: a folder of .whl files)"
    return 2
  fi
  local files=()
  local file
  for file in "$wheels"/*.whl; do
    [ -e "$file" ] && files+=("$file")
  done
  if [ ${#files[@]} -eq 0 ]; then
    echo "no .whl files in $wheels"
    return 2
  fi
  echo "installing ${#files[@]} wheel(s) from $wheels into $target"
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target "$target" "${files[@]}" || return 1
  export PYTHONPATH="$target:$repo${PYTHONPATH:+:$PYTHONPATH}"

  python3 - <<'EOF' || return 1
import importlib.util
import sys

if importlib.util.find_spec("torch") is None:
    sys.exit("this Python has no PyTorch: use the machine's Python with a CUDA build of torch")
import torch

needed = ["gsplat", "tyro", "docstring_parser", "typeguard", "jaxtyping", "rich", "plyfile", "imageio", "matplotlib",
          "numpy", "cupy", "pytest"]
missing = [name for name in needed if importlib.util.find_spec(name) is None]
if missing:
    sys.exit("missing Python packages (add their wheels to the folder): " + " ".join(missing))
if not torch.cuda.is_available():
    sys.exit(f"PyTorch {torch.__version__} sees no CUDA device")
print(f"torch {torch.__version__}, {torch.cuda.device_count()} x {torch.cuda.get_device_name(0)}")
EOF

  if [ -z "${TORCH_CUDA_ARCH_LIST:-}" ]; then  # only this GPU's architecture: a much shorter build
    TORCH_CUDA_ARCH_LIST=$(python3 -c "import torch; print('%d.%d' % torch.cuda.get_device_capability(0))")
    export TORCH_CUDA_ARCH_LIST
  fi
  export MAX_JOBS=${MAX_JOBS:-$(nproc)}
  echo "building gsplat's CUDA extension for compute capability $TORCH_CUDA_ARCH_LIST with $MAX_JOBS jobs" \
       "(minutes, once) ..."
  local started=$SECONDS
  python3 -c "
from gsplat.cuda._backend import _C
assert _C is not None, 'gsplat could not build its CUDA extension: is nvcc (CUDA_HOME) there?'
" || return 1
  echo "gsplat's CUDA extension ready ($((SECONDS - started)) s)"
  python3 -c "
import cupy, gsplat, gsplat_lpt
print('ready: gsplat', gsplat.__version__, '| gsplat-lpt', gsplat_lpt.__version__, '| cupy', cupy.__version__)
" || return 1
  echo "export PYTHONPATH=$PYTHONPATH"
}

if (return 0 2>/dev/null); then  # sourced: keep the exports in the caller's shell
  _gsplat_lpt_setup "$@"
else
  _gsplat_lpt_setup "$@"
  exit $?
fi
