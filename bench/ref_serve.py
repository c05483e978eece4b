"""ref_serve.py -- the interleaved mode shared by the PyTorch sides of the C
benchmarks (attention_ref.py, transformer_ref.py): after its warm-ups the
script prints "ready[ extra]", then runs one timed step per "r" line read on
stdin and answers its time in ms; "q" or the end of input ends it.  The C
side alternates these single repetitions with its own, so both sides meet
the same machine load."""
import sys
import time


def serve(step, extra=""):
    print("ready" + (" " + extra if extra else ""), flush=True)
    for line in sys.stdin:
        if line.strip() != "r":
            break
        t0 = time.perf_counter()
        step()
        print("%.4f" % ((time.perf_counter() - t0) * 1e3), flush=True)
