#!/usr/bin/env bash
# Several GPUs of one host: gsplat-lpt render, gsplat-lpt bench and the OmniRe example, each run once on
# one GPU and once with torchrun over two, small sizes; the outputs must exist and agree
# (tests/device/compare_runs.py), then the two-GPU pytest file (gsplat's distributed=True, both backends).
#
# From the repository root on a machine with at least 2 GPUs, the package installed
# (README, "Developing on a GPU machine"):
#   bash tests/device/multi_gpu.sh [OUT]        # logs and outputs in OUT (default: out/multi_gpu)
set -uo pipefail
OUT=${1:-out/multi_gpu}
mkdir -p "$OUT"
gpus=$(python3 -c "import torch; print(torch.cuda.device_count())")
if [ "$gpus" -lt 2 ]; then
  echo "needs 2 GPUs of one host, found $gpus"
  exit 2
fi
one() { CUDA_VISIBLE_DEVICES=0 python3 "$@"; }
two() { torchrun --standalone --nproc-per-node 2 "$@"; }
status=0
step() {  # step NAME COMMAND...: run, keep the log, report
  local name=$1
  shift
  if "$@" > "$OUT/$name.log" 2>&1; then
    echo "ok   $name"
  else
    echo "FAIL $name (exit $?; log: $OUT/$name.log)"
    tail -20 "$OUT/$name.log"
    status=1
  fi
}

# render: LPT-only mode is gsplat's output bit for bit, so the frames must be identical
render=(render --scene street --width 640 --height 360 --scale 0.2 --frames 6 --mode lpt)
step render_1gpu one -m gsplat_lpt "${render[@]}" --out "$OUT/render_1gpu"
step render_2gpu two -m gsplat_lpt "${render[@]}" --out "$OUT/render_2gpu"
step render_compare python3 tests/device/compare_runs.py render "$OUT/render_1gpu" "$OUT/render_2gpu"

# bench: the same frames, workloads and schedules; every frame timed on one of the GPUs
bench=(bench --scene moderate street --width 640 --height 360 --scale 0.2 --frames 3)
step bench_1gpu one -m gsplat_lpt "${bench[@]}" --out "$OUT/bench_1gpu"
step bench_2gpu two -m gsplat_lpt "${bench[@]}" --out "$OUT/bench_2gpu"
step bench_compare python3 tests/device/compare_runs.py bench "$OUT/bench_1gpu" "$OUT/bench_2gpu"

# the OmniRe example on its SYNTHETIC street (written once, read by every process)
omnire=(examples/omnire_driving.py --frames 4 --density 0.1 --repeats 5 --warmup 1 --mode lpt --no-video
        --synthetic-dir "$OUT/omnire_synthetic")
step omnire_1gpu one "${omnire[@]}" --out "$OUT/omnire_1gpu"
step omnire_2gpu two "${omnire[@]}" --out "$OUT/omnire_2gpu"
step omnire_compare python3 tests/device/compare_runs.py omnire "$OUT/omnire_1gpu" "$OUT/omnire_2gpu"

# gsplat's own distributed=True with backend="cuda" and backend="lpt"
step pytest_distributed python3 -m pytest -q -p no:cacheprovider tests/test_gpu_distributed.py

if [ "$status" -eq 0 ]; then echo "multi-GPU checks passed"; else echo "multi-GPU checks FAILED"; fi
exit "$status"
