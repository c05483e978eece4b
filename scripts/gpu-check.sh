#!/bin/sh
# gpu-check.sh -- the CUDA device on a machine with an NVIDIA GPU, in under
# 10 minutes:
#   1. builds ctorch with the CUDA device (-DCT_CUDA=ON; needs the CUDA
#      toolkit's headers, /usr/local/cuda/include or $CUDA_HOME/include) in
#      $BUILD (default build-gpu);
#   2. test_cuda: copies, fill, mm/bmm/matmul against the cpu, streams,
#      events, pinned memory, the caching allocator, out-of-memory;
#   3. the cross-backend test (test_backend_ops) on cuda:0: every op of the
#      op fixtures against the cpu (ops without a CUDA kernel are counted as
#      such, not failed), then its NVRTC check of every generated kernel;
#   4. make bench's GPU cases (build/bench_gpu), beside torch on the same GPU
#      where bench/gpu_ref.py finds torch with CUDA ($CT_TORCH_PYTHON).
# Without a GPU (no nvidia-smi device, or no libcuda.so.1) it says so, builds,
# runs test_cuda's no-device checks and the NVRTC compile check (which needs
# no GPU: every kernel the OpenCL device generates, as CUDA for sm_80 and
# sm_90), and exits 0: the GPU figures then wait for a GPU machine.
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
cmake --build "$BUILD" -j"$JOBS" --target test_cuda test_backend_ops bench_gpu >"$BUILD.build.log" 2>&1 ||
    { tail -40 "$BUILD.build.log"; exit 1; }

if [ -n "$why" ]; then
    echo "gpu-check: NO NVIDIA GPU on this machine ($why): the CUDA runs and the GPU benchmarks wait for a GPU machine."
    step "test_cuda (the no-device errors)"
    timeout "$(left)" "$BUILD/test_cuda"
    step "NVRTC: every generated kernel compiled as CUDA for sm_80 and sm_90 (test_backend_ops on OpenCL)"
    rc=0
    timeout "$(left)" "$BUILD/test_backend_ops" >"$BUILD/backend_ops.log" 2>&1 || rc=$?
    grep -E "^(opencl|nvrtc|test_backend_ops|NVRTC)|PASSED|FAILED" "$BUILD/backend_ops.log" | cut -c1-300
    [ "$rc" -eq 0 ] || { echo "gpu-check: test_backend_ops failed (exit $rc; $BUILD/backend_ops.log)" >&2; exit "$rc"; }
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
step "make bench's GPU cases (bench_gpu)"
CT_TORCH_PYTHON=${CT_TORCH_PYTHON:-python3} timeout "$(left)" "$BUILD/bench_gpu" "$BUILD/bench_gpu.json"
step "done"
