source .gpu/setup.sh > $OUT/setup.log 2>&1
export GSPLAT_LPT_DATA=$PWD/.data
L=$OUT/logs; mkdir -p $L
timeout 130 python3 -m pytest -q -m gpu tests -p no:cacheprovider -rf > $L/pytest_gpu.log 2>&1; echo "pytest rc $?"
timeout 60 python3 tests/device/bench_3dgut.py --out $L > $L/bench_3dgut.log 2>&1; echo "3dgut rc $?"
timeout 90 python3 -m gsplat_lpt calibrate --scene ladder --frames 1 --out $L/calibration > $L/calibrate.log 2>&1; echo "calibrate rc $?"
BENCH_PLAN_HEAD=1 timeout 150 python3 tests/device/bench_core.py --out $L --fixed-grid --real --calibration $L/calibration/calibration.json > $L/bench_core.log 2>&1; echo "bench rc $?"
tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $L; tar xzf $OUT/logs.tgz -C /tmp && L=/tmp/logs
grep -E "^FAILED" $L/pytest_gpu.log | sed -E 's/ - .*//; s/^FAILED tests\///' | tr '\n' ' ' | head -c 3000; echo
tail -1 $L/pytest_gpu.log
tail -5 $L/bench_3dgut.log; tail -6 $L/calibrate.log
grep "^\[new\]" $L/bench_core.log | head -11 || tail -5 $L/bench_core.log
