#!/bin/sh
# gpu-check.sh -- the CUDA device on a machine with an NVIDIA GPU, in under
# 10 minutes:
#   1. builds ctorch with the CUDA device (-DCT_CUDA=ON; needs the CUDA
#      toolkit's headers, /usr/local/cuda/include or $CUDA_HOME/include) in
#      $BUILD (default build-gpu);
#   2. test_op_table: how the opencl and cuda devices serve every op (own
#      kernel, cuBLAS, OpenCL kernel text through NVRTC, cpu fallback), the
#      summary lines, and every OpenCL text the CUDA backend runs compiled by
#      NVRTC (seconds; no GPU needed);
#   3. test_cuda: copies, fill, mm/bmm/matmul against the cpu, streams,
#      events, pinned memory, the caching allocator, out-of-memory;
#   4. the cross-backend test (test_backend_ops) on cuda:0: every op of the
#      op fixtures against the cpu (ops without a CUDA kernel run the cpu
#      fallback and are counted as such), then its NVRTC check of every
#      generated kernel;
#   5. make bench's GPU cases (build/bench_gpu --device cuda:0): mm/bmm,
#      host-to-device copies, SDPA forward+backward [8,12,1024,64] f32 and
#      bf16, a ResNet-50 training step (8x3x224x224, SGD momentum) and a
#      BERT-base training step (8x128, AdamW), each beside torch on the same
#      GPU (bench/gpu_ref.py under $CT_TORCH_PYTHON, default python3; a
#      torch without CUDA is reported and skipped), with the ratio and the
#      device's name; exit status 1 when a case fails or a loss is not finite.
# Budget (an estimate for an H100-class machine with 16 cores; no GPU run
# has been made yet): build 2-4 min, test_op_table + test_cuda < 30 s,
# test_backend_ops on cuda ~2-3 min (NVRTC compiles each kernel on first
# use), bench_gpu ~2 min (the model steps take 1 warm-up + 3 reps;
# convolutions run im2col + cuBLAS, batch norm and SDPA composites of device
# ops, and the ops test_op_table's cuda column lists as "fallback" -- var/
# std, avg_pool, interpolate, ... -- the cpu fallback, so a figure that
# involves them measures that, not a GPU kernel) + torch's side < 1 min.
# Each step gets what is left of the 600 s (timeout).
# Without a GPU (no nvidia-smi device, or no libcuda.so.1) it says so, builds,
# runs test_op_table, test_cuda's no-device checks, the NVRTC compile check
# (which needs no GPU: every kernel the OpenCL device generates, as CUDA for
# sm_80 and sm_90) and, where an OpenCL device is (PoCL), bench_gpu's cases
# at tiny shapes on it (every case end to end, finite losses), and exits 0:
# the GPU figures then wait for a GPU machine.
#
#   sh scripts/gpu-check.sh            (from anywhere; BUILD=dir, JOBS=n)
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-gpu}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
T0=$(date +%s)
left() { echo $((600 - ($(date +%s) - T0))); }
step() { echo "== gpu-check: $* ($(left) s of 600 left)"; }

why=""
if ! command -v nvidia-smi >/dev/null 2>&1; then
    why="nvidia-smi is not installed"
elif ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    why="nvidia-smi lists no GPU"
elif ! ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1'; then
    why="the CUDA driver library libcuda.so.1 is not installed"
fi

step "configure and build ($BUILD, CT_CUDA=ON)"
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DCT_CUDA=ON -DCT_BUILD_BENCH=ON -DCT_BUILD_EXAMPLES=OFF \
    ${CMAKE_C_COMPILER_LAUNCHER:+-DCMAKE_C_COMPILER_LAUNCHER=$CMAKE_C_COMPILER_LAUNCHER} >"$BUILD.cmake.log" 2>&1 ||
    { cat "$BUILD.cmake.log"; exit 1; }
if ! grep -q "CUDA device: on" "$BUILD.cmake.log"; then
    grep "CUDA device" "$BUILD.cmake.log" || true
    echo "gpu-check: the CUDA toolkit's headers (cuda.h, nvrtc.h, cublas_v2.h) were not found: set CUDA_HOME" >&2
    exit 1
fi
cmake --build "$BUILD" -j"$JOBS" --target test_op_table test_cuda test_backend_ops bench_gpu >"$BUILD.build.log" 2>&1 ||
    { tail -40 "$BUILD.build.log"; exit 1; }
step "test_op_table (the opencl and cuda columns; NVRTC of the CUDA backend's OpenCL texts)"
rc=0
timeout "$(left)" "$BUILD/test_op_table" >"$BUILD/op_table.log" 2>&1 || rc=$?
grep -E "^(opencl|cuda)|PASSED|FAILED|\^" "$BUILD/op_table.log" | cut -c1-300
[ "$rc" -eq 0 ] || { echo "gpu-check: test_op_table failed (exit $rc; $BUILD/op_table.log)" >&2; exit "$rc"; }

if [ -n "$why" ]; then
    echo "gpu-check: NO NVIDIA GPU on this machine ($why): the CUDA runs and the GPU benchmarks wait for a GPU machine."
    step "test_cuda (the no-device errors)"
    timeout "$(left)" "$BUILD/test_cuda"
    step "NVRTC: every generated kernel compiled as CUDA for sm_80 and sm_90 (test_backend_ops on OpenCL)"
    rc=0
    timeout "$(left)" "$BUILD/test_backend_ops" >"$BUILD/backend_ops.log" 2>&1 || rc=$?
    grep -E "^(opencl|nvrtc|test_backend_ops|NVRTC)|PASSED|FAILED" "$BUILD/backend_ops.log" | cut -c1-300
    [ "$rc" -eq 0 ] || { echo "gpu-check: test_backend_ops failed (exit $rc; $BUILD/backend_ops.log)" >&2; exit "$rc"; }
    step "bench_gpu's cases at tiny shapes on opencl:0 (PoCL: correctness, not speed)"
    timeout "$(left)" "$BUILD/bench_gpu" --device opencl:0 --tiny --reps 3
    echo "gpu-check: done without a GPU (exit 0)"
    exit 0
fi

nvidia-smi -L
step "test_cuda"
timeout "$(left)" "$BUILD/test_cuda"
step "test_backend_ops on cuda:0"
rc=0
CT_BACKEND_OPS_DEVICE=cuda:0 timeout "$(left)" "$BUILD/test_backend_ops" >"$BUILD/backend_ops.log" 2>&1 || rc=$?
grep -vE '^\[ +(RUN|OK) +\]' "$BUILD/backend_ops.log" | tail -40 | cut -c1-2000
[ "$rc" -eq 0 ] || { echo "gpu-check: test_backend_ops on cuda:0 failed (exit $rc; $BUILD/backend_ops.log)" >&2; exit "$rc"; }
step "make bench's GPU cases (bench_gpu --device cuda:0), beside torch on the same GPU"
CT_TORCH_PYTHON=${CT_TORCH_PYTHON:-python3} timeout "$(left)" "$BUILD/bench_gpu" "$BUILD/bench_gpu.json" \
    --device cuda:0 --reps 5
step "done"
