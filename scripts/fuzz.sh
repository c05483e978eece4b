#!/bin/sh
# fuzz.sh -- builds the libFuzzer targets (tests/fuzz/fuzz_*.c) with clang,
# ASan and UBSan (cmake -DCT_FUZZ=ON, in build-fuzz/) and runs each one, or
# the ones named as arguments (json or fuzz_json), for CT_FUZZ_SECONDS
# (default 600) seconds, one after the other.
#
#   sh scripts/fuzz.sh                    # every target, 10 minutes each
#   CT_FUZZ_SECONDS=20 sh scripts/fuzz.sh json csv
#
# Each target runs on a copy of its seed corpus (tests/fuzz/corpus_<name>/)
# in a scratch folder (CT_FUZZ_WORK, default a new folder under /tmp), so the
# repository's corpora are never written; new inputs, logs and the crashing
# input stay in that folder.  One line per target: executions, coverage,
# seconds, result.  Exit status: 0 when no target found anything, 1 when one
# found a crash, leak, UB, timeout or out-of-memory (its input is kept and
# its path printed), 2 when clang or libFuzzer is missing (it installs
# nothing), 3 when the build fails or a named target does not exist.
#
# Other settings: CT_FUZZ_BUILD (build folder, default build-fuzz),
# CT_FUZZ_ARGS (more libFuzzer flags, e.g. -max_len=65536),
# OMP_NUM_THREADS (default 1 here).
set -u

cd "$(dirname "$0")/.." || exit 3
ROOT=$(pwd)
SECONDS_EACH=${CT_FUZZ_SECONDS:-600}
BUILD=${CT_FUZZ_BUILD:-build-fuzz}
CC_FUZZ=${CT_FUZZ_CC:-clang}

case $SECONDS_EACH in '' | *[!0-9]*) echo "fuzz.sh: CT_FUZZ_SECONDS must be a whole number of seconds" >&2; exit 3 ;; esac

# ---- toolchain: clang with libFuzzer and the sanitizer runtimes ----
if ! command -v "$CC_FUZZ" >/dev/null 2>&1; then
    echo "fuzz.sh: $CC_FUZZ not found; install it: apt-get install clang" >&2
    exit 2
fi
probe=$(mktemp -d "${TMPDIR:-/tmp}/ctorch-fuzz-probe.XXXXXX") || exit 3
printf '#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { return 0; }\n' \
    >"$probe/p.c"
if ! "$CC_FUZZ" -fsanitize=fuzzer,address,undefined "$probe/p.c" -o "$probe/p" >"$probe/log" 2>&1; then
    sed 's/^/  /' "$probe/log" | head -5 >&2
    echo "fuzz.sh: $CC_FUZZ cannot link libFuzzer with ASan + UBSan; install clang and its runtime:" >&2
    echo "  apt-get install clang    (on Debian/Ubuntu the libFuzzer and sanitizer runtimes are in" >&2
    echo "  libclang-rt-dev / libclang-rt-<version>-dev; clang -fopenmp also needs libomp-dev)" >&2
    rm -rf "$probe"
    exit 2
fi
rm -rf "$probe"

# ---- build (logs in the scratch folder) ----
if [ -n "${CT_FUZZ_WORK:-}" ]; then
    WORK=$CT_FUZZ_WORK
    mkdir -p "$WORK" || exit 3
else
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/ctorch-fuzz.XXXXXX") || exit 3
fi
WORK=$(cd "$WORK" && pwd)
launcher=
command -v ccache >/dev/null 2>&1 && launcher=-DCMAKE_C_COMPILER_LAUNCHER=ccache
jobs=$(nproc 2>/dev/null || echo 2)
# shellcheck disable=SC2086 # $launcher is one word or none
if ! cmake -S . -B "$BUILD" -DCMAKE_C_COMPILER="$CC_FUZZ" -DCMAKE_BUILD_TYPE=Debug -DCT_FUZZ=ON \
    -DCT_BUILD_BENCH=OFF -DCT_BUILD_EXAMPLES=OFF $launcher >"$WORK/cmake.log" 2>&1; then
    cat "$WORK/cmake.log" >&2
    echo "fuzz.sh: cmake configure of $BUILD failed" >&2
    exit 3
fi
if ! cmake --build "$BUILD" -j "$jobs" >"$WORK/build.log" 2>&1; then
    grep -E 'error|Error' "$WORK/build.log" | head -20 >&2
    echo "fuzz.sh: build of $BUILD failed (log: $WORK/build.log)" >&2
    exit 3
fi

# ---- targets ----
if [ $# -eq 0 ]; then
    set --
    for src in tests/fuzz/fuzz_*.c; do
        n=${src##*/fuzz_}
        set -- "$@" "${n%.c}"
    done
fi
for t in "$@"; do
    n=${t#fuzz_}
    if [ ! -f "tests/fuzz/fuzz_$n.c" ] || [ ! -x "$BUILD/fuzz_$n" ]; then
        echo "fuzz.sh: no fuzz target '$t' (tests/fuzz/fuzz_$n.c, $BUILD/fuzz_$n)" >&2
        exit 3
    fi
done

echo "fuzz.sh: $# target(s), $SECONDS_EACH s each; scratch folder $WORK"

sym=$(command -v llvm-symbolizer 2>/dev/null || true)
[ -n "$sym" ] && export ASAN_SYMBOLIZER_PATH="$sym"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"

found=0
for t in "$@"; do
    n=${t#fuzz_}
    dir="$WORK/$n"
    rm -rf "$dir"
    mkdir -p "$dir/corpus" "$dir/artifacts"
    [ -d "tests/fuzz/corpus_$n" ] && cp -R "tests/fuzz/corpus_$n/." "$dir/corpus/"
    start=$(date +%s)
    # the outer timeout is only a guard against a wedged process
    # shellcheck disable=SC2086 # CT_FUZZ_ARGS is a list of flags
    timeout -k 10 $((SECONDS_EACH + 120)) "$ROOT/$BUILD/fuzz_$n" -max_total_time="$SECONDS_EACH" \
        -rss_limit_mb=4096 -timeout=10 -print_final_stats=1 -artifact_prefix="$dir/artifacts/" \
        ${CT_FUZZ_ARGS:-} "$dir/corpus" >"$dir/log" 2>&1
    rc=$?
    secs=$(($(date +%s) - start))
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log" | tail -n 1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$dir/log" | tail -n 1)
    rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$dir/log" | tail -n 1)
    cov=$(sed -n 's/.* cov: \([0-9]*\) ft: \([0-9]*\) corp: \([0-9]*\).*/cov \1, ft \2, corpus \3/p' "$dir/log" | tail -n 1)
    [ -n "$execs" ] || execs=$(sed -n 's/^#\([0-9]*\).*/\1/p' "$dir/log" | tail -n 1)
    art=$(find "$dir/artifacts" -type f 2>/dev/null | head -n 1)
    if [ "$rc" -eq 0 ] && [ -z "$art" ]; then
        result=ok
    else
        found=1
        if grep -q 'ERROR: LeakSanitizer' "$dir/log"; then result=LEAK
        elif grep -q 'runtime error:' "$dir/log"; then result=UB
        elif grep -q 'ERROR: AddressSanitizer' "$dir/log"; then result=ASAN
        elif grep -q 'ALARM: libFuzzer: timeout' "$dir/log"; then result=TIMEOUT
        elif grep -q -E 'out-of-memory|malloc limit|exceeds limit' "$dir/log"; then result=OOM
        elif grep -q 'deadly signal' "$dir/log"; then result=CRASH
        elif [ "$rc" -ge 124 ]; then result="HUNG (rc $rc)"
        else result="FAILED (rc $rc)"
        fi
    fi
    printf 'fuzz_%-18s %-8s %10s execs (%s/s)  %s  %ss  peak rss %s MB\n' "$n" "$result" "${execs:-?}" \
        "${rate:-?}" "${cov:-cov ?}" "$secs" "${rss:-?}"
    if [ "$result" != ok ]; then
        echo "  input: ${art:-(none written)}"
        echo "  log:   $dir/log"
        grep -n -m 1 -E 'ERROR: |runtime error:|ALARM:|out-of-memory|deadly signal|check failed' "$dir/log" |
            sed 's/^/  /'
        grep -E '^ *#[0-9]+ 0x' "$dir/log" | head -n 12 | sed 's/^/  /'
        echo "  reproduce: $BUILD/fuzz_$n $art"
    fi
done
if [ "$found" -ne 0 ]; then
    echo "fuzz.sh: findings kept under $WORK"
    exit 1
fi
echo "fuzz.sh: nothing found (new corpus entries under $WORK/<target>/corpus)"
exit 0
