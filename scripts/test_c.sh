#!/bin/sh
# `make test-c`: the C runtime's tests with no Python and no torch, from the checked-in fixtures
# (runtime_c/tests/fixtures/*.oab, written by gen_fixtures.py and kept current by make test):
#   1. gcc (-Werror), Release: the C unit tests (ctest: loader, method, fixtures' bundled tests with
#      the chosen and the reference kernels, thread pool, allocator) and oa_conformance on the CPU
#   2. the same tests built with AddressSanitizer + UndefinedBehaviorSanitizer (clang, else gcc)
#   3. a fuzz smoke run: libFuzzer (clang) over the loader and executor for FUZZ_SECONDS (30),
#      seeded with the fixtures; any crash, sanitizer report, leak or time-out fails
# Builds go to build/test-c/ (OA_TEST_C_BUILD). Needs cmake and a C compiler (clang for step 3:
# scripts/setup.sh installs the Debian packages).
set -eu
cd "$(dirname "$0")/.."
ROOT=$(pwd)
OUT=${OA_TEST_C_BUILD:-$ROOT/build/test-c}
JOBS=${JOBS:-2}
FUZZ_SECONDS=${FUZZ_SECONDS:-30}
FIXTURES=$ROOT/runtime_c/tests/fixtures
GEN=""
if command -v ninja >/dev/null 2>&1; then GEN="-G Ninja"; fi
command -v cmake >/dev/null 2>&1 || { echo "test-c: cmake not found (scripts/setup.sh installs it)" >&2; exit 1; }
if command -v clang >/dev/null 2>&1; then CLANG=clang; else CLANG=""; fi
start=$(date +%s)

step() { printf '\n== test-c: %s (%ss)\n' "$1" "$(($(date +%s) - start))"; }

configure() { # dir, cmake options...
  dir=$1
  shift
  # shellcheck disable=SC2086
  cmake -S "$ROOT/runtime_c" -B "$dir" $GEN -DOA_BUILD_TESTS=ON -DOA_BUILD_SHARED=OFF "$@" >"$dir.configure.log" 2>&1 \
    || { cat "$dir.configure.log" >&2; exit 1; }
  cmake --build "$dir" -j "$JOBS" >"$dir.build.log" 2>&1 || { tail -n 60 "$dir.build.log" >&2; exit 1; }
}

mkdir -p "$OUT"
step "gcc -Werror build, C tests"
CC=${CC:-gcc} configure "$OUT/gcc" -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER="${CC:-gcc}"
ctest --test-dir "$OUT/gcc" --output-on-failure --timeout 600
"$OUT/gcc/oa_conformance" >"$OUT/conformance.log" 2>&1 || { tail -n 40 "$OUT/conformance.log" >&2; exit 1; }
tail -n 1 "$OUT/conformance.log"

step "ASan + UBSan build (${CLANG:-gcc}), C tests"
configure "$OUT/sanitize" -DCMAKE_BUILD_TYPE=Debug -DOA_SANITIZE=ON -DOA_BUILD_TOOLS=OFF \
  -DCMAKE_C_COMPILER="${CLANG:-gcc}"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir "$OUT/sanitize" --output-on-failure --timeout 900

step "fuzz smoke run, ${FUZZ_SECONDS} s"
[ -n "$CLANG" ] || { echo "test-c: the fuzz smoke run needs clang (libFuzzer): scripts/setup.sh installs it" >&2; exit 1; }
configure "$OUT/fuzz" -DCMAKE_BUILD_TYPE=Debug -DOA_BUILD_FUZZ=ON -DOA_BUILD_TOOLS=OFF -DOA_BUILD_TESTS=OFF \
  -DCMAKE_C_COMPILER="$CLANG"
rm -rf "$OUT/fuzz-corpus" "$OUT/fuzz-artifacts"
mkdir -p "$OUT/fuzz-corpus" "$OUT/fuzz-artifacts"
cp "$FIXTURES"/*.oab "$OUT/fuzz-corpus/"
if ! (cd "$OUT" && "$OUT/fuzz/fuzz_program" -max_total_time="$FUZZ_SECONDS" -timeout=20 -rss_limit_mb=2048 \
    -max_len=4194304 -print_final_stats=1 -artifact_prefix="$OUT/fuzz-artifacts/" "$OUT/fuzz-corpus" \
    >"$OUT/fuzz.log" 2>&1); then
  tail -n 60 "$OUT/fuzz.log" >&2
  echo "test-c: the fuzzer found a failure (inputs in $OUT/fuzz-artifacts)" >&2
  exit 1
fi
if [ -n "$(ls -A "$OUT/fuzz-artifacts")" ]; then
  echo "test-c: fuzz artifacts were written: $(ls "$OUT/fuzz-artifacts")" >&2
  exit 1
fi
grep -E "stat::number_of_executed_units|stat::average_exec_per_sec|stat::new_units_added" "$OUT/fuzz.log" | tr '\n' ' '
echo
step "passed"
