"""PyTorch side of bench/bench_attention.c: one case per process (the C
driver forks/execs it and reads the peak RSS of the process from wait4).

    python3 bench/attention_ref.py <mode> <B> <H> <L> <E> <threads> <reps> <warmup>

mode: fwd (forward under no_grad), fwdbwd (forward + backward of sum(out * g)),
or none (imports torch and makes the inputs only: the baseline memory).
Prints "ok <ms> <ms> ..." (one time per repetition).  reps 0 is the
interleaved mode bench_attention uses: after the warm-ups it prints "ready",
then times one step per "r" line read on stdin and answers "<ms>" ("q" or
end of input ends it).  Needs torch >= 2.0
(F.scaled_dot_product_attention): run with the pyenv python3 (torch from PyPI).
"""
import sys
import time

import torch
import torch.nn.functional as F

from ref_serve import serve


def main():
    mode = sys.argv[1]
    B, H, L, E, threads, reps, warm = (int(x) for x in sys.argv[2:9])
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    q, k, v = (torch.randn(B, H, L, E) for _ in range(3))
    g = torch.randn(B, H, L, E)
    if mode == "none":
        print("ok")
        return
    if mode == "fwdbwd":
        for t in (q, k, v):
            t.requires_grad_()

    def step():
        if mode == "fwd":
            with torch.no_grad():
                F.scaled_dot_product_attention(q, k, v)
        else:
            o = F.scaled_dot_product_attention(q, k, v)
            o.backward(g)
            for t in (q, k, v):
                t.grad = None

    for _ in range(warm):
        step()
    if reps == 0:
        serve(step)
        return
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        step()
        times.append((time.perf_counter() - t0) * 1e3)
    print("ok " + " ".join("%.4f" % t for t in times))


if __name__ == "__main__":
    main()
