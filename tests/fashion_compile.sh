#!/bin/sh
# fashion_compile.sh -- issue 18's test line: training the FashionMNIST CNN
# (examples/fashion_mnist.c, the `make demo` network) for one epoch compiled
# (--compile: the joint forward + backward graph, a compiled evaluation)
# reaches eager's test accuracy.  Same seed, same shuffling, same dropout
# draws on both sides; the float rounding of fused kernels differs, so the
# accuracies may differ slightly: they must agree within 0.01, and the
# compiled run must not have fallen back to eager (CT_COMPILE_PROBE=0: the
# compiled-against-eager timing, which a loaded machine can tip either way,
# does not run, so an eager call here is a real fallback).
#   sh tests/fashion_compile.sh path/to/fashion_mnist [data dir]
set -eu
bin=$1
data=${2:-/usr/share/datasets/fashion-mnist}
if [ ! -f "$data/train-images-idx3-ubyte.gz" ]; then
    echo "fashion_compile: no FashionMNIST in $data (apt-get install dataset-fashion-mnist)" >&2
    exit 1
fi
tmp=$(mktemp -d /tmp/ct_fashion_compile_XXXXXX)
trap 'rm -rf "$tmp"' EXIT
CT_CACHE_DIR="$tmp/cache" "$bin" --data "$data" --epochs 1 --checkpoint "$tmp/e.safetensors" > "$tmp/eager.txt"
CT_COMPILE_PROBE=0 CT_CACHE_DIR="$tmp/cache" "$bin" --data "$data" --epochs 1 --checkpoint "$tmp/c.safetensors" --compile > "$tmp/compiled.txt"
ae=$(sed -n 's/^test accuracy: //p' "$tmp/eager.txt")
ac=$(sed -n 's/^test accuracy: //p' "$tmp/compiled.txt")
stats=$(grep '^ct_compile:' "$tmp/compiled.txt" || true)
echo "eager test accuracy $ae, compiled $ac"
echo "$stats"
[ -n "$ae" ] && [ -n "$ac" ] || { echo "fashion_compile: a run printed no accuracy" >&2; exit 1; }
case "$stats" in
*" 0 eager calls"*) ;;
*) echo "fashion_compile: the compiled run fell back to eager: $stats" >&2; exit 1 ;;
esac
awk -v a="$ae" -v b="$ac" 'BEGIN { d = a - b; if (d < 0) d = -d; if (d > 0.01 || b < 0.8) { printf "fashion_compile: accuracies %s vs %s\n", a, b; exit 1 } }'
