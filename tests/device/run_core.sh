#!/bin/bash
# One device call for the core: GPU tests, sanitizers, and the core benchmark of this checkout and (when a
# copy of an earlier checkout is in .baseline/) of that one, side by side. From the project root, after the
# GPU machine's set-up (tests/device/README.md):  bash tests/device/run_core.sh [stages]
set -u
OUT=${OUT:-out}
mkdir -p "$OUT"
export GSPLAT_LPT_DATA=${GSPLAT_LPT_DATA:-$PWD/.data}
stages=${*:-tests sanitize bench baseline}
summary=()
for stage in $stages; do
  start=$(date +%s)
  case $stage in
    tests)
      timeout 330 python3 -m pytest -q -m gpu tests -p no:cacheprovider --timeout 150 > "$OUT/pytest_gpu.log" 2>&1
      summary+=("gpu tests: $(tail -1 "$OUT/pytest_gpu.log")")
      grep -E "^(FAILED|ERROR)" "$OUT/pytest_gpu.log" | head -30
      ;;
    sanitize)
      for tool in memcheck racecheck; do
        timeout 150 compute-sanitizer --tool $tool --print-limit 20 python3 tests/device/sanitize_frame.py > "$OUT/$tool.log" 2>&1
        summary+=("$tool: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/$tool.log" | tail -1)")
      done
      ;;
    bench)
      timeout 200 python3 tests/device/bench_core.py --out "$OUT" ${BENCH_ARGS:-} > "$OUT/bench_new.log" 2>&1
      grep "^\[new\]" "$OUT/bench_new.log" || tail -5 "$OUT/bench_new.log"
      ;;
    baseline)
      PYTHONPATH=$PWD/.baseline:${PYTHONPATH:-} timeout 150 python3 tests/device/bench_core.py --out "$OUT" --tag baseline \
        > "$OUT/bench_baseline.log" 2>&1
      grep "^\[baseline\]" "$OUT/bench_baseline.log" || tail -5 "$OUT/bench_baseline.log"
      ;;
    *) echo "unknown stage $stage" ;;
  esac
  summary+=("  ($stage took $(( $(date +%s) - start )) s)")
done
printf '%s\n' "${summary[@]}"
