#!/bin/bash
# One device call for the GPU evidence: GPU tests, sanitizers, parity and the core benchmark.
# On the H200 host, from the project root:
#   source .gpu/setup.sh && bash tests/device/gpu_suite.sh [tests] [sanitize] [bench] [bench-grid] [cli]
# Logs go to $OUT (or ./out); a short summary is printed last.
set -u
OUT=${OUT:-out}
mkdir -p "$OUT"
export GSPLAT_LPT_DATA=${GSPLAT_LPT_DATA:-$PWD/.data}
stages=${*:-tests sanitize bench}
summary=()
for stage in $stages; do
  start=$(date +%s)
  case $stage in
    tests)
      python3 -m pytest -q -m gpu tests -p no:cacheprovider > "$OUT/pytest_gpu.log" 2>&1
      summary+=("gpu tests: $(tail -1 "$OUT/pytest_gpu.log")")
      grep -E "^(FAILED|ERROR)" "$OUT/pytest_gpu.log" | head -20
      ;;
    sanitize)
      for tool in memcheck racecheck; do
        compute-sanitizer --tool $tool --print-limit 20 python3 tests/device/sanitize_frame.py > "$OUT/$tool.log" 2>&1
        summary+=("$tool: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/$tool.log" | tail -1)")
      done
      ;;
    bench)
      python3 tests/device/bench_core.py --out "$OUT" > "$OUT/bench_core.log" 2>&1
      tail -9 "$OUT/bench_core.log"
      ;;
    bench-grid)
      python3 tests/device/bench_core.py --out "$OUT" --fixed-grid > "$OUT/bench_core.log" 2>&1
      tail -9 "$OUT/bench_core.log"
      ;;
    *)
      echo "unknown stage $stage"
      ;;
  esac
  summary+=("  ($stage took $(( $(date +%s) - start )) s)")
done
printf '%s\n' "${summary[@]}"
