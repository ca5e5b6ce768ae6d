#!/usr/bin/env bash
# GPU checks in one command: the cupy test subset (tests/test_cupy.py -m gpu: every op-table primitive forward on
# cupy, transforms, jit, fusion vs unfused, graph replay, precision, DLPack; plus tests/test_fusion.py), then the
# GPU benchmarks (benchmarks/gpu_bench.py): flfun one process per workload, each peer one process for all.
# Every process runs under its own time limit, and nothing new starts after DEADLINE seconds. Logs, the results
# (JSON lines) and the markdown table go to $OUT (default benchmarks/gpu_out). Without cupy or a GPU it says so
# and stops. Knobs: STAGES="tests bench", WORKLOADS, FRAMEWORKS, T_TESTS, DEADLINE; GPU_BENCH_DRY=1 runs the
# benchmark logic on the CPU with tiny sizes (a dry run of this script).
set -o pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-benchmarks/gpu_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
export CUPY_CACHE_DIR=${CUPY_CACHE_DIR:-/tmp/flfun_cupy_cache}
PY=${PY:-python3}
STAGES=${STAGES:-"tests bench"}
WORKLOADS=${WORKLOADS:-"w3s w1 w6s w3b w6b"}
FRAMEWORKS=${FRAMEWORKS:-"flfun jax cupy torch"}
T_TESTS=${T_TESTS:-80}
DEADLINE=${DEADLINE:-280}
RES=$OUT/results.jsonl
LOG=$OUT/log.txt

# time limit of one benchmark process (seconds), never past the deadline
limit() {
  local t
  case "$1:$2" in
    flfun:w6b) t=70 ;; flfun:w3b|flfun:w6s) t=45 ;; flfun:*) t=35 ;;
    jax:*) t=110 ;; torch:*) t=70 ;; *) t=30 ;;
  esac
  local left=$((DEADLINE - SECONDS))
  echo $(( t < left ? t : left ))
}

bench() {   # framework workloads
  local t; t=$(limit "$1" "${2%%,*}")
  if (( t < 5 )); then echo "-- $1 $2: skipped (deadline)"; return; fi
  echo "-- $1 $2 (limit ${t}s)"
  if [[ $1 == flfun ]]; then
    FLFUN_BACKEND=cupy timeout "$t" $PY -m benchmarks.gpu_bench run "$1" "$2" "$RES" 2>&1 | tail -n 30
  else
    timeout "$t" $PY -m benchmarks.gpu_bench run "$1" "$2" "$RES" 2>&1 | tail -n 30
  fi
  echo "   exit status: $?"
}

main() {
  echo "== $(date -u +%FT%TZ) flfun GPU checks"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -2
  if [[ $GPU_BENCH_DRY != 1 ]] && ! timeout 60 $PY -c "from flfun.backends import cupy_backend as c; import sys; sys.exit(0 if c.is_available() else 1)"; then
    echo "no cupy GPU here: skipping the GPU checks"
    return 0
  fi
  $PY -c "import cupy, numpy; print('cupy', cupy.__version__, 'numpy', numpy.__version__)" 2>&1 | tail -1
  if [[ " $STAGES " == *" tests "* ]]; then
    echo "== tests (limit ${T_TESTS}s)"
    XDIST=""; $PY -c "import xdist" 2>/dev/null && XDIST="-n 8"
    TMO=""; $PY -c "import pytest_timeout" 2>/dev/null && TMO="--timeout 60"
    HYPOTHESIS_PROFILE=gpu timeout "$T_TESTS" $PY -m pytest tests/test_cupy.py tests/test_fusion.py -q \
      -p no:warnings -p no:cacheprovider $XDIST $TMO -rfE 2>&1 | cut -c1-400 | tail -n 80
    echo "tests exit status: $?"
  fi
  if [[ " $STAGES " == *" bench "* ]]; then
    echo "== benchmarks (t=${SECONDS}s)"
    local peers="" csv
    csv=$(echo $WORKLOADS | tr ' ' ',')
    for f in $FRAMEWORKS; do
      if [[ $f == flfun ]]; then
        for w in $WORKLOADS; do bench flfun "$w"; done
      else
        bench "$f" "$csv"
      fi
    done
    $PY -m benchmarks.gpu_bench table "$RES" > "$OUT/gpu_table.md" 2>&1
    echo "== table (t=${SECONDS}s)"
    cat "$OUT/gpu_table.md"
  fi
}

main 2>&1 | tee "$LOG"
