"""gpu_ref.py -- torch's figures for bench_gpu.c's CUDA cases, on the same GPU.

   python3 bench/gpu_ref.py [reps] [cuda device index]

Prints "#device<TAB>name" (torch.cuda.get_device_name), then "case<TAB>median
ms" per case (the names bench_gpu.c looks up); "#skip<TAB>reason" and nothing
else when torch or a CUDA device in torch is missing.  Each rep is ended by
torch.cuda.synchronize(), as bench_gpu.c's by ct_dev_synchronize; one
warm-up first; the model steps take at most 3 reps, as bench_gpu.c's.

The cases and shapes are bench_gpu.c's full-size ones: mm/bmm, host to device
copies, scaled_dot_product_attention forward + backward (f32, bf16), and the
ResNet-50 and BERT-base training steps of bench/suite_ref.py (the same models
bench_suite compares on the CPU), moved to the GPU.  FP32 math throughout
(TF32 off for matmul and cuDNN convolutions: ctorch computes them in FP32);
the optimizers fused where this torch has it, as ctorch's (bench_models.h)."""
import os
import sys
import time

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print("#skip\tthe Python running bench/gpu_ref.py has no torch (set CT_TORCH_PYTHON)")
    sys.exit(0)
if not torch.cuda.is_available():
    print(f"#skip\ttorch {torch.__version__} sees no CUDA device (a CPU-only torch, or no driver)")
    sys.exit(0)
reps = int(sys.argv[1]) if len(sys.argv) > 1 else 10
dev = torch.device(f"cuda:{int(sys.argv[2]) if len(sys.argv) > 2 else 0}")
torch.backends.cuda.matmul.allow_tf32 = False  # ctorch's cuBLAS calls use FP32 math
torch.backends.cudnn.allow_tf32 = False
print(f"#device\t{torch.cuda.get_device_name(dev)} (torch {torch.__version__})", flush=True)


def median_ms(fn, n=None):
    n = n or reps
    fn()
    torch.cuda.synchronize(dev)
    v = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize(dev)
        v.append((time.perf_counter() - t0) * 1e3)
    v.sort()
    k = len(v)
    return v[k // 2] if k % 2 else 0.5 * (v[k // 2 - 1] + v[k // 2])


def out(name, ms):
    print(f"{name}\t{ms:.4f}", flush=True)


for name, m, n, k, b in [("gpu mm f32 1024^3", 1024, 1024, 1024, 0),
                         ("gpu mm f32 4096^3", 4096, 4096, 4096, 0),
                         ("gpu bmm f32 64x[128,64]@[64,128]", 128, 128, 64, 64)]:
    if b:
        x, y = torch.randn(b, m, k, device=dev), torch.randn(b, k, n, device=dev)
        out(name, median_ms(lambda: torch.bmm(x, y)))
    else:
        x, y = torch.randn(m, k, device=dev), torch.randn(k, n, device=dev)
        out(name, median_ms(lambda: torch.mm(x, y)))
src = torch.rand(16 << 20)
out("gpu h2d 64MiB pageable", median_ms(lambda: src.to(dev)))
pinned = src.pin_memory()
out("gpu h2d 64MiB pinned", median_ms(lambda: pinned.to(dev, non_blocking=True)))

# scaled_dot_product_attention forward + backward from ones, then the output's
# and dq's sums read back (bench_gpu.c's rep_sdpa)
B, H, L, E = 8, 12, 1024, 64
for tag, dt in (("f32", torch.float32), ("bf16", torch.bfloat16)):
    q, k, v = (torch.randn(B, H, L, E, device=dev).to(dt).requires_grad_() for _ in range(3))
    go = torch.ones(B, H, L, E, device=dev, dtype=dt)

    def sdpa_step():
        q.grad = k.grad = v.grad = None
        o = F.scaled_dot_product_attention(q, k, v)
        o.backward(go)
        (o.float().sum() + q.grad.float().sum()).item()
    out(f"gpu sdpa fwd+bwd {tag} [{B},{H},{L},{E}]", median_ms(sdpa_step))
    del q, k, v, go

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import suite_ref  # noqa: E402  (the CPU suite's ResNet-50 and BERT-base)


def optim(kind, params, lr):
    params = list(params)  # a second try must see them again
    cls = torch.optim.SGD if kind == "sgdm" else torch.optim.AdamW
    kw = dict(lr=lr, momentum=0.9) if kind == "sgdm" else dict(lr=lr, weight_decay=1e-2)
    try:
        return cls(params, fused=True, **kw)
    except (RuntimeError, TypeError, ValueError):
        return cls(params, **kw)


def train_ms(model, kind, lr, x, y):
    model = model.to(dev)
    opt = optim(kind, model.parameters(), lr)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        loss.item()
    return median_ms(step, min(reps, 3))


torch.manual_seed(2)
out("gpu resnet50 train step 8x3x224x224",
    train_ms(suite_ref._resnet50(), "sgdm", 0.01, torch.randn(8, 3, 224, 224, device=dev),
             torch.randint(0, 1000, (8,), device=dev)))
torch.manual_seed(3)
out("gpu bert-base train step 8x128",
    train_ms(suite_ref.BertForSequenceClassification(), "adamw", 1e-4,
             torch.randint(0, 30522, (8, 128), device=dev), torch.randint(0, 2, (8,), device=dev)))
