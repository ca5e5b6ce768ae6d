#!/usr/bin/env bash
# The array API standard's own test suite (data-apis/array-api-tests) against flfun.numpy, at API version 2024.12
# with 20 hypothesis examples per test: once with every dtype, once with the complex dtypes skipped by the
# suite's ARRAY_API_TESTS_SKIP_DTYPES switch. Run by hand (CI cannot fetch the suite):
#
#   AAT=/tmp/aat bash benchmarks/array_api_conformance.sh [extra pytest args]
#
# $AAT is a checkout of https://github.com/data-apis/array-api-tests with its array-api spec submodule
# (`git clone --recurse-submodules`); it needs `pip install ndindex pytest-json-report`. Prints the pass counts;
# the failures of each run are listed in $OUT/<run>.txt (default OUT=/tmp/aat-results).
set -u
AAT=${AAT:-/tmp/aat}
OUT=${OUT:-/tmp/aat-results}
REPO=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$OUT"
run() {   # run <name> <skipped dtypes>
    ( cd "$AAT" && PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}" ARRAY_API_TESTS_MODULE=flfun.numpy \
      ARRAY_API_TESTS_VERSION=2024.12 ARRAY_API_TESTS_SKIP_DTYPES="$2" \
      python -m pytest array_api_tests -q -p no:cacheprovider --max-examples 20 --hypothesis-seed 0 -rfs \
      -o addopts="" "${@:3}" ) > "$OUT/$1.txt" 2>&1
    local summary
    summary=$(grep -E "^[0-9]+ (passed|failed)|^=+ .*(passed|failed)" "$OUT/$1.txt" | tail -1)
    echo "$1: $summary"
}
run all "" "$@"
run no-complex128 "complex128" "$@"   # (skipping both complex dtypes crashes the suite's own set-up: max() of no complex dtypes)
