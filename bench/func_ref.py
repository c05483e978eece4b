"""func_ref.py -- the PyTorch side of bench/bench_func.c: torch.func's
transforms on the cases of issue 20, timed one step per "r" line in the
interleaved mode of ref_serve.py (the C side alternates its own steps).

    python3 bench/func_ref.py <case> <threads>

cases (the C side builds the same shapes and the same math):
  psg_cnn      per-sample gradients of the FashionMNIST demo CNN (conv 1->32,
               relu, maxpool 2, conv 32->64, relu, maxpool 2, linear
               3136->128, relu, linear 128->10; no dropout), batch 64,
               cross-entropy: vmap(grad(loss), in_dims=(None, 0, 0)) over
               functional_call
  psg_loop     the same gradients by a loop of 64 single-sample backward
               passes (torch eager)
  hessian_mlp  Hessian of an MLP's MSE loss over a batch of 32 w.r.t. its
               100 parameters (7 -> 11 tanh -> 1; flat parameter vector):
               jacfwd(jacrev(loss))
  jvp_encoder  jvp of a TransformerEncoderLayer(256, 4, 1024, dropout 0,
               relu, batch_first, train mode math) at x [16, 128, 256] along
               a random tangent: torch.func.jvp (torch's CPU flash attention
               has no forward-mode rule: the math attention, as torch must)
  fwd_encoder  the same layer's forward alone (no grad)
"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import functional_call, grad, hessian, jvp, vmap

from ref_serve import serve


def cnn():
    return nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))


def case_psg(loop):
    model = cnn()
    params = {k: v.detach() for k, v in model.named_parameters()}
    x = torch.randn(64, 1, 28, 28)
    y = torch.randint(0, 10, (64,))

    def loss(p, xi, yi):
        out = functional_call(model, p, (xi.unsqueeze(0),))
        return F.cross_entropy(out, yi.unsqueeze(0))

    if not loop:
        f = vmap(grad(loss), in_dims=(None, 0, 0))
        return lambda: f(params, x, y)
    ps = list(model.parameters())

    def step():
        gs = []
        for i in range(x.shape[0]):
            li = F.cross_entropy(model(x[i:i + 1]), y[i:i + 1])
            gs.append(torch.autograd.grad(li, ps))
        return gs
    return step


def case_hessian():
    n_in, n_h = 7, 11
    sizes = [(n_h, n_in), (n_h,), (1, n_h), (1,)]
    numel = sum(torch.Size(s).numel() for s in sizes)
    assert numel == 100
    flat = torch.randn(numel) * 0.3
    x = torch.randn(32, n_in)
    t = torch.randn(32, 1)

    def loss(w):
        parts, o = [], 0
        for s in sizes:
            n = torch.Size(s).numel()
            parts.append(w[o:o + n].view(s))
            o += n
        h = torch.tanh(F.linear(x, parts[0], parts[1]))
        return F.mse_loss(F.linear(h, parts[2], parts[3]), t)
    f = hessian(loss)
    return lambda: f(flat)


def encoder():
    layer = nn.TransformerEncoderLayer(256, 4, 1024, 0.0, "relu", 1e-5, batch_first=True)
    return layer, torch.randn(16, 128, 256), torch.randn(16, 128, 256)


def case_jvp():
    # torch has no forward-mode rule for its CPU flash attention kernel
    # ("Trying to use forward AD with _scaled_dot_product_flash_attention_for_cpu
    # that does not support it"): its jvp runs the math attention
    from torch.nn.attention import SDPBackend, sdpa_kernel
    layer, x, t = encoder()

    def step():
        with sdpa_kernel(SDPBackend.MATH):
            return jvp(lambda a: layer(a), (x,), (t,))
    return step


def case_fwd():
    layer, x, _ = encoder()

    def step():
        with torch.no_grad():
            return layer(x)
    return step


def main():
    case, threads = sys.argv[1], int(sys.argv[2])
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    build = {"psg_cnn": lambda: case_psg(False), "psg_loop": lambda: case_psg(True),
             "hessian_mlp": case_hessian, "jvp_encoder": case_jvp, "fwd_encoder": case_fwd}
    if case not in build:
        print("err unknown case %s" % case, flush=True)
        return 1
    step = build[case]()
    for _ in range(2):
        step()
    serve(step)
    return 0


if __name__ == "__main__":
    sys.exit(main())
