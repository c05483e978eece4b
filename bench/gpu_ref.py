"""gpu_ref.py -- torch's figures for bench_gpu.c's CUDA cases, on the same GPU.

   python3 bench/gpu_ref.py [reps]

Prints "case<TAB>median ms" per case (the names bench_gpu.c looks up);
nothing when torch or a CUDA device is missing.  Each rep is ended by
torch.cuda.synchronize(), as bench_gpu.c's by ct_cuda_synchronize."""
import sys
import time

try:
    import torch
except ImportError:
    sys.exit(0)
if not torch.cuda.is_available():
    sys.exit(0)
reps = int(sys.argv[1]) if len(sys.argv) > 1 else 10
torch.backends.cuda.matmul.allow_tf32 = False  # ctorch's cuBLAS calls use FP32 math
dev = torch.device("cuda:0")


def median_ms(fn):
    fn()
    torch.cuda.synchronize()
    v = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        v.append((time.perf_counter() - t0) * 1e3)
    v.sort()
    n = len(v)
    return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])


for name, m, n, k, b in [("gpu mm f32 1024^3", 1024, 1024, 1024, 0),
                         ("gpu mm f32 4096^3", 4096, 4096, 4096, 0),
                         ("gpu bmm f32 64x[128,64]@[64,128]", 128, 128, 64, 64)]:
    if b:
        x, y = torch.randn(b, m, k, device=dev), torch.randn(b, k, n, device=dev)
        print(f"{name}\t{median_ms(lambda: torch.bmm(x, y)):.4f}")
    else:
        x, y = torch.randn(m, k, device=dev), torch.randn(k, n, device=dev)
        print(f"{name}\t{median_ms(lambda: torch.mm(x, y)):.4f}")
src = torch.rand(16 << 20)
print(f"gpu h2d 64MiB pageable\t{median_ms(lambda: src.to(dev)):.4f}")
pinned = src.pin_memory()
print(f"gpu h2d 64MiB pinned\t{median_ms(lambda: pinned.to(dev, non_blocking=True)):.4f}")
