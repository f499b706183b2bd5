#!/bin/sh
# bench/python/run.sh: every figure of the Python package in one run (bench/README.md, "Python package").
#   1. the baselines really check: test_checkers.py (pytest)
#   2. check_batch vs a pure-Python and a numpy checker, and the binding's share: test_bench_check.py
#      (pytest-benchmark, CPU time: --benchmark-timer=time.process_time)
#   3. packoracle.fuzz in-process vs packoracle fuzz --exec, same packer, same cases: test_bench_fuzz.py (wall
#      clock; CPU time in extra_info)
#   4. the guard's overhead on an 8 x 8192 batch: test_bench_guard.py (CPU time)
#   5. report.py: the tables of times and ratios
# It builds nothing: PYTHON must import packoracle (installed with pip install ., or a source tree on PYTHONPATH).
# Environment: PYTHON (an interpreter with numpy, torch, pytest, pytest-benchmark; default python3), OUT (JSON output directory, default /tmp/packoracle-bench-python),
# BENCH_FUZZ_CASES (2000), BENCH_FUZZ_SEED, BENCH_FUZZ_ROUNDS (5), BENCH_FUZZ_DECODER (off|on|both), PACKORACLE_CLI.
# Extra arguments go to both pytest-benchmark runs (e.g. --benchmark-max-time=2).
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -c 'import numpy, pytest_benchmark' 2>/dev/null; then
  echo "bench/python/run.sh: $PYTHON lacks numpy or pytest-benchmark: set PYTHON to an interpreter with the" >&2
  echo "  package's [test,bench] extras and torch==2.13.0 (for example build-venv/bin/python after ./scripts/python_tests.sh)" >&2
  exit 2
fi
OUT=${OUT:-/tmp/packoracle-bench-python}
mkdir -p "$OUT"
cd "$HERE"

echo "== machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'); load $(uptime | sed 's/.*load average: //')"
echo "== python: $PYTHON ($("$PYTHON" -c 'import sys, numpy; t = "no torch"
try:
    import torch; t = "torch " + torch.__version__
except ImportError: pass
print(sys.version.split()[0], "numpy", numpy.__version__, t)'))"
echo "== packoracle: $("$PYTHON" -c 'import packoracle; print(packoracle.__file__)')"
echo

echo "== 1. the baselines reject a corrupted batch"
"$PYTHON" -m pytest -q -p no:cacheprovider -p no:benchmark test_checkers.py
echo

echo "== 2. check_batch and the binding"
"$PYTHON" -m pytest -q -p no:cacheprovider test_bench_check.py --benchmark-timer=time.process_time \
  --benchmark-json="$OUT/check.json" --benchmark-storage="file://$OUT/storage" --benchmark-columns=min,median,rounds --benchmark-sort=name "$@"
echo

echo "== 3. fuzz in-process vs exec"
"$PYTHON" -m pytest -q -p no:cacheprovider test_bench_fuzz.py --benchmark-json="$OUT/fuzz.json" --benchmark-storage="file://$OUT/storage" \
  --benchmark-columns=min,median,rounds --benchmark-sort=name "$@"
echo

echo "== 4. the guard's overhead (needs transformers: the adapters extra)"
"$PYTHON" -m pytest -q -p no:cacheprovider test_bench_guard.py --benchmark-timer=time.process_time \
  --benchmark-json="$OUT/guard.json" --benchmark-storage="file://$OUT/storage" --benchmark-columns=min,median,rounds "$@"
echo

echo "== 5. figures (load average at the end: $(uptime | sed 's/.*load average: //'))"
"$PYTHON" report.py "$OUT/check.json" "$OUT/fuzz.json" "$OUT/guard.json"
