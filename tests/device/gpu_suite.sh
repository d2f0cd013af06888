#!/bin/bash
# The GPU checks in one go: GPU tests, sanitizers, benchmarks, calibration, the OmniRe example.
# From the repository root of a prepared GPU machine (tests/device/setup_gpu_machine.sh; README,
# "Developing on a GPU machine"):
#   bash tests/device/gpu_suite.sh [tests] [sanitize] [bench] [bench-2dgs] [bench-3dgut] [camera-cycle] [small-frames] [probes] [bench-plan] [host] [bench-grid] [baseline] [calibrate] [cli-bench] [cli-bench-variants] [omnire] [omnire-variants] [multi-gpu] [sm-activity] [sm-activity-ranges] [sm-activity-graphs] [trace] [whole-call-trace] [pack]
# (no stage named: tests sanitize bench). Logs go to $OUT (default ./out); a short summary is printed last.
# Test data (README, "Test data"): $GSPLAT_LPT_DATA, default .data/ in the repository.
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
      python3 -m pytest -q -m gpu tests -p no:cacheprovider ${PYTEST_ARGS:-} > "$OUT/pytest_gpu.log" 2>&1
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
      python3 tests/device/bench_core.py --out "$OUT" ${BENCH_ARGS:-} > "$OUT/bench_core.log" 2>&1
      grep "^\[new\]" "$OUT/bench_core.log" || tail -5 "$OUT/bench_core.log"
      ;;
    bench-3dgut)
      # (BENCH_3DGUT_ARGS, default: also the ladder's veil and fog scenes, whose heaviest tile decides the frame)
      python3 tests/device/bench_3dgut.py --out "$OUT" ${BENCH_3DGUT_ARGS:---ladder veil fog} > "$OUT/bench_3dgut.log" 2>&1
      tail -10 "$OUT/bench_3dgut.log"
      ;;
    camera-cycle)
      # ladder frames rendered in turn on one stream (a rig's views); against an earlier checkout where
      # .baseline/gsplat_lpt_before holds one (cp -r .baseline/gsplat_lpt .baseline/gsplat_lpt_before)
      baseline=$([ -d .baseline/gsplat_lpt_before ] && echo --baseline-module gsplat_lpt_before)
      for cycle in "veil balanced balanced" "balanced street"; do
        PYTHONPATH=${PYTHONPATH:-}:$PWD/.baseline python3 tests/device/camera_cycle.py --cycle $cycle $baseline \
          --out "$OUT" >> "$OUT/camera_cycle.log" 2>&1
      done
      grep -A6 "^cycle" "$OUT/camera_cycle.log"
      ;;
    bench-2dgs)
      python3 tests/device/bench_2dgs.py --out "$OUT" > "$OUT/bench_2dgs.log" 2>&1
      tail -7 "$OUT/bench_2dgs.log"
      ;;
    host)
      # host time of a call: call kinds interleaved round by round in one process (an earlier checkout too, where
      # .baseline/gsplat_lpt_before holds one: cp -r .baseline/gsplat_lpt .baseline/gsplat_lpt_before), then the
      # pieces of a call; and cProfile of one (tests/device/profile_host.py)
      baseline=$([ -d .baseline/gsplat_lpt_before ] && echo --baseline-module gsplat_lpt_before)
      PYTHONPATH=${PYTHONPATH:-}:$PWD/.baseline python3 tests/device/host_pieces.py $baseline > "$OUT/host_pieces.log" 2>&1
      python3 tests/device/profile_host.py > "$OUT/profile_host.log" 2>&1
      # a host-bound loop of whole rasterization calls: each step's host time, and whether our GPU work is exposed
      python3 tests/device/whole_call_timeline.py > "$OUT/whole_call_timeline.log" 2>&1
      head -40 "$OUT/host_pieces.log"
      tail -5 "$OUT/whole_call_timeline.log"
      ;;
    whole-call-trace)
      # whole render calls of the real scenes' frames timed as `gsplat-lpt bench` times them (the GPU idle at each
      # call's start), then traced (torch.profiler): when the blend is launched and how long the GPU waits for it
      for frame in ${TRACE_GARDEN_FRAMES:-0 1 2}; do
        python3 tests/device/whole_call_trace.py --scene "$GSPLAT_LPT_DATA/test_garden.npz" --frame $frame
      done > "$OUT/whole_call_trace.log" 2>&1
      for frame in ${TRACE_BONSAI_FRAMES:-0 1}; do
        python3 tests/device/whole_call_trace.py --scene "$GSPLAT_LPT_DATA/bonsai-7k-mini.splat" --frame $frame
      done >> "$OUT/whole_call_trace.log" 2>&1
      grep -A4 "^== .*frame" "$OUT/whole_call_trace.log" | grep -v -e "^--" -e "Warning\|_warn_once"
      ;;
    probes)
      # the probe scenes (frames built unlike the ladder): every mode, lpt at one and two pixels, a fixed grid
      python3 tests/device/unseen_frames.py --out "$OUT" ${PROBES_ARGS:-} > "$OUT/unseen_frames.log" 2>&1
      sed -n '/^frame /,$p' "$OUT/unseen_frames.log"
      ;;
    small-frames)
      # which frames go to gsplat's own kernel (Variant.small_frame_intersections): every variant back to back
      python3 tests/device/small_frames.py --out "$OUT" > "$OUT/small_frames.log" 2>&1
      grep "slower back" "$OUT/small_frames.log" || tail -5 "$OUT/small_frames.log"
      ;;
    bench-plan)
      python3 tests/device/bench_plan.py > "$OUT/bench_plan.log" 2>&1
      tail -20 "$OUT/bench_plan.log"
      ;;
    bench-grid)
      python3 tests/device/bench_core.py --out "$OUT" --fixed-grid ${BENCH_ARGS:-} > "$OUT/bench_core.log" 2>&1
      grep "^\[new\]" "$OUT/bench_core.log" || tail -5 "$OUT/bench_core.log"
      ;;
    baseline)
      # the same benchmark on an earlier checkout copied into .baseline/ (git archive REV gsplat_lpt kernels |
      # tar -x -C .baseline), side by side with this one
      PYTHONPATH=$PWD/.baseline:${PYTHONPATH:-} python3 tests/device/bench_core.py --out "$OUT" --tag baseline \
        ${BENCH_ARGS:-} > "$OUT/bench_baseline.log" 2>&1
      grep "^\[baseline\]" "$OUT/bench_baseline.log" || tail -5 "$OUT/bench_baseline.log"
      ;;
    calibrate)
      python3 -m gsplat_lpt calibrate --scene ladder --frames 1 --out "$OUT/calibration" > "$OUT/calibrate.log" 2>&1
      tail -10 "$OUT/calibrate.log"
      ;;
    cli-bench)
      # with the calibrated constants when a calibration ran in this call
      extra=$(python3 tests/device/calibrated_args.py "$OUT/calibration/calibration.json")
      python3 -m gsplat_lpt bench --scene ladder --fixed-grid --out "$OUT/bench" $extra > "$OUT/cli_bench.log" 2>&1
      tail -45 "$OUT/cli_bench.log"
      ;;
    cli-bench-variants)
      # gsplat-lpt bench for 2DGS and 3DGUT (pinhole and fisheye) on the ladder, one frame per scene
      for run in "2dgs pinhole" "3dgut pinhole" "3dgut fisheye"; do
        read -r variant camera <<< "$run"
        python3 -m gsplat_lpt bench --variant "$variant" --camera-model "$camera" --scene ladder --frames 1 \
          --out "$OUT/bench_${variant}_$camera" > "$OUT/cli_bench_${variant}_$camera.log" 2>&1
        summary+=("bench --variant $variant --camera-model $camera: exit $?")
        tail -14 "$OUT/cli_bench_${variant}_$camera.log"
      done
      ;;
    omnire)
      work="$OUT/omnire_work"  # frames and the generated checkpoint (~280 MB) stay out of the packed results
      python3 examples/omnire_driving.py --frames 12 --out "$work/front" --synthetic-dir "$work/synthetic" --no-video > "$OUT/omnire.log" 2>&1
      python3 examples/omnire_driving.py --frames 4 --cameras 0 1 2 --out "$work/rig" --synthetic-dir "$work/synthetic" --no-video > "$OUT/omnire_rig.log" 2>&1
      mkdir -p "$OUT/omnire"; cp "$work"/front/results.* "$work"/rig/results.json "$OUT/omnire/" 2>/dev/null
      tail -25 "$OUT/omnire.log"; tail -12 "$OUT/omnire_rig.log"
      ;;
    omnire-variants)
      # the OmniRe example with 3DGUT (pinhole and fisheye) and with 2DGS (a SYNTHETIC street of surfels)
      work="$OUT/omnire_work"
      for run in "3dgut pinhole" "3dgut fisheye" "2dgs pinhole"; do
        read -r variant camera <<< "$run"
        python3 examples/omnire_driving.py --variant "$variant" --camera-model "$camera" --frames 6 \
          --out "$work/${variant}_$camera" --synthetic-dir "$work/synthetic_$variant" --no-video \
          > "$OUT/omnire_${variant}_$camera.log" 2>&1
        summary+=("omnire --variant $variant --camera-model $camera: exit $?")
        mkdir -p "$OUT/omnire"; cp "$work/${variant}_$camera/results.json" "$OUT/omnire/results_${variant}_$camera.json" 2>/dev/null
        tail -12 "$OUT/omnire_${variant}_$camera.log"
      done
      ;;
    multi-gpu)
      bash tests/device/multi_gpu.sh "$OUT/multi_gpu" > "$OUT/multi_gpu.log" 2>&1
      summary+=("multi-gpu: $(tail -1 "$OUT/multi_gpu.log")")
      grep -E "^(ok|FAIL) " "$OUT/multi_gpu.log" | head -40
      ;;
    sm-activity)
      # SM activity of gsplat's kernel and ours per frame (Nsight Compute, clocks left alone)
      ncu --clock-control none --profile-from-start off --csv --page raw \
        --metrics sm__cycles_active.avg,sm__cycles_elapsed.avg,gpu__time_duration.sum \
        python3 tests/device/sm_activity.py ${SM_FRAMES:+--frames $SM_FRAMES} > "$OUT/ncu.csv" 2> "$OUT/ncu_windows.txt"
      python3 tests/device/sm_activity.py --summarize "$OUT/ncu.csv" "$OUT/ncu_windows.txt" | tee "$OUT/sm_activity.txt"
      ;;
    trace)
      # per-unit timeline of auto on imbalanced frames, calls enqueued behind a sleep kernel (host ahead of
      # the GPU) and on an idle GPU: the blending kernels' span per call, launch order, SM activity
      for when in busy idle; do
        python3 tests/device/trace_units.py --frames ${TRACE_FRAMES:-mild moderate severe extreme} --calls 12 \
          --configs auto $([ $when = busy ] && echo --busy) --out "$OUT/trace_$when" > "$OUT/trace_$when.log" 2>&1
        grep "^\[spans\]" "$OUT/trace_$when.log" | sed "s/^/$when /"
      done
      ;;
    sm-activity-ranges)
      # the same over ranges of RANGE_CALLS consecutive replays of each call captured in a CUDA graph (application
      # range replay: the program runs as it is, one row per range; one launch per call keeps the host ahead). On
      # the H200 the profiler still ran our two kernels one after the other (JOURNAL.md, "Nsight Compute over
      # ranges of calls"); tests/device/graph_replay.py shows the graphs keep them co-executing without it
      calls=${RANGE_CALLS:-40}
      ncu --replay-mode app-range --clock-control none --csv --page raw \
        --metrics sm__cycles_active.avg,sm__cycles_elapsed.avg,gpu__time_duration.sum \
        python3 tests/device/sm_activity.py --graphs --calls "$calls" ${SM_FRAMES:+--frames $SM_FRAMES} > "$OUT/ncu_ranges.csv" 2> "$OUT/ncu_ranges_windows.txt"
      python3 tests/device/sm_activity.py --graphs --calls "$calls" --summarize "$OUT/ncu_ranges.csv" "$OUT/ncu_ranges_windows.txt" | tee "$OUT/sm_activity_ranges.txt"
      ;;
    sm-activity-graphs)
      # the same with each call captured in a CUDA graph and profiled as one workload (the graph's own launch
      # gaps count as idle; on the H200 the profiler ran the chunk kernel and the LPT kernel one after the other)
      ncu --clock-control none --profile-from-start off --graph-profiling graph --csv --page raw \
        --metrics sm__cycles_active.avg,sm__cycles_elapsed.avg,gpu__time_duration.sum \
        python3 tests/device/sm_activity.py --graphs ${SM_FRAMES:+--frames $SM_FRAMES} > "$OUT/ncu_graphs.csv" 2> "$OUT/ncu_graphs_windows.txt"
      python3 tests/device/sm_activity.py --graphs --summarize "$OUT/ncu_graphs.csv" "$OUT/ncu_graphs_windows.txt" | tee "$OUT/sm_activity_graphs.txt"
      ;;
    pack)
      # everything under $OUT but the OmniRe work folder in one archive (the device tool brings back only a few
      # files), the originals removed
      (cd "$OUT" && files=$(ls -A | grep -v -e '^results.tgz$' -e '^omnire_work$') && [ -n "$files" ] \
        && tar czf results.tgz --remove-files $files; ls -la)
      ;;
    *)
      echo "unknown stage $stage"
      ;;
  esac
  summary+=("  ($stage took $(( $(date +%s) - start )) s)")
done
printf '%s\n' "${summary[@]}"
