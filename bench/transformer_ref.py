"""PyTorch side of bench/bench_transformer.c: TransformerEncoderLayer
inference through torch's fast path (nn.TransformerEncoder with
enable_nested_tensor, batch_first, eval mode, no_grad): with padding, the
nested-tensor path packs the padded tokens away.

    python3 bench/transformer_ref.py <d> <heads> <ff> <B> <L> <pad:0|1> <threads> <reps> <warmup>

pad 1: sequence i has round(L (i+1) / (B+1)) real tokens at the front (50%
padding in all), as the C side.  Prints "ok <ms> <ms> ..." and the path torch
took.  Run with the pyenv python3 (torch 2.x from PyPI).

reps 0 is the interleaved mode the C side uses: after the warm-ups it prints
"ready packed=<0|1>", then times one step per line "r" read on stdin and
answers "<ms>"; "q" or end of input ends it.
"""
import sys
import time
import warnings

import torch
import torch.nn as nn

from ref_serve import serve


def main():
    d, H, ff, B, L, pad, threads, reps, warm = (int(x) for x in sys.argv[1:10])
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    warnings.simplefilter("ignore")
    layer = nn.TransformerEncoderLayer(d, H, ff, 0.1, "relu", 1e-5, batch_first=True)
    enc = nn.TransformerEncoder(layer, 1, enable_nested_tensor=True).eval()
    x = torch.randn(B, L, d)
    kpm = None
    if pad:
        kpm = torch.zeros(B, L, dtype=torch.bool)
        for i in range(B):
            kpm[i, int(round(L * (i + 1) / (B + 1))):] = True

    def step():
        with torch.inference_mode():
            return enc(x, src_key_padding_mask=kpm)

    for _ in range(warm):
        out = step()
    if reps == 0:
        packed = bool(pad) and bool((out[B - 1 if B > 1 else 0, -1] == 0).all()) if pad else False
        serve(step, "packed=%d" % packed)
        return
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        out = step()
        times.append((time.perf_counter() - t0) * 1e3)
    packed = bool(pad) and bool((out[B - 1 if B > 1 else 0, -1] == 0).all()) if pad else False
    print("ok " + " ".join("%.4f" % t for t in times) + " packed=%d" % packed)


if __name__ == "__main__":
    main()
