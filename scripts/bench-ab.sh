#!/bin/sh
# bench-ab.sh -- the suite's ctorch side against an older ctorch, case by
# case, alternating (bench/ab_suite.py): how issue 17's "no slowdown" line
# is measured on a shared host whose load moves torch's own times by more
# than the 5% asked (the suite's ratio is ours / torch and torch is the same
# program for both builds, so ratio_new / ratio_base = ours_new / ours_base).
#   sh scripts/bench-ab.sh [BASE_REV [ab_suite.py options]]
# BASE_REV defaults to f986202 (before the op-table sessions of issue 17).
set -eu
base=${1:-f986202}
[ $# -gt 0 ] && shift
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-build}
dir=$(mktemp -d /tmp/ct_bench_ab_XXXXXX)
trap 'git -C "$root" worktree remove --force "$dir/src" >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
git -C "$root" worktree add --detach "$dir/src" "$base" >/dev/null
cmake -S "$dir/src" -B "$dir/build" -DCMAKE_BUILD_TYPE=Release -DCT_BUILD_TESTS=OFF \
      -DCT_BUILD_EXAMPLES=OFF >/dev/null
cmake --build "$dir/build" -j "$(nproc)" --target bench_suite >/dev/null
cmake --build "$root/$build" -j "$(nproc)" --target bench_suite >/dev/null
cp "$dir/build/bench_suite" "$dir/base_suite"
cp "$root/$build/bench_suite" "$dir/new_suite"
python3 "$root/bench/ab_suite.py" "$dir/base_suite" "$dir/new_suite" "$@"
