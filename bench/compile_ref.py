#!/usr/bin/env python3
"""compile_ref.py -- the PyTorch side of bench/bench_compile.c: torch eager
and torch.compile (inductor, default mode) on the same cases, and
torch.compile's compile time, cold and warm.

A long-lived child of build/bench_compile, talking over stdin/stdout, like
bench/suite_ref.py for bench_suite:

    version                  -> "ok torch <version> <path of torch> cpu <capability>"
                                or "err <why torch.compile cannot be used>"
    open <case> <threads> <warmup> <cache dir>
                             -> "ok <first compiled call ms> <first eager call ms>"
                                or "ok nan <first eager ms> <why the compile failed>"
                                or "err <message>"
        forks a fresh process for the case (this driver imports torch but
        never computes, so no OpenMP pool and no compiled code exist at fork
        time).  It sets TORCHINDUCTOR_CACHE_DIR=<cache dir> (an empty folder:
        a cold compile), torch._dynamo.reset(), torch.set_num_threads, builds
        the case (one model, one optimizer: the eager step calls the module,
        the compiled step calls torch.compile(module), so both share the
        parameters), times the first compiled call (trace + inductor +
        the C++ build + one step), then the first eager call, then <warmup>
        more untimed calls of each.
    step c | step e          -> "ok <ms>": one timed step, compiled / eager
    close                    -> "ok <peak MB>": the case's process ends
    warm <case> <threads> <cache dir>
                             -> "ok <first compiled call ms>": a fresh process
        (forked as above) with the cache that `open` populated: set up, one
        eager step (untimed: the process's first touch of a step's memory is
        not the warm start's), the first compiled call timed, exit.
        torch.compile's warm start: dynamo traces again, inductor's FX-graph
        / AOTAutograd caches hit.
    quit

The first call includes one step's compute, and first-touch costs that the
later steps do not have; the C side prints "first call - median step" as
the compile time, for both sides alike.

The case definitions are those of bench/suite_ref.py (imported) and must
match bench_compile.c.  Run alone for a check:
    printf 'open softmax 2 1 /tmp/x\\nstep c\\nstep e\\nclose\\nquit\\n' | python3 bench/compile_ref.py
"""
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import suite_ref  # noqa: E402  (the models: ResNet-50, BERT, the encoder layer)


# ---- the cases: each builder returns (eager step, compiled step) ----------

def _pair(fn, *args):
    cfn = torch.compile(fn)
    return (lambda: fn(*args)), (lambda: cfn(*args))


def _gelu_sum(x, a, b):
    return F.gelu(x * a + b).sum(-1)


def case_gelu_sum():
    x, a, b = torch.randn(4096, 1024), torch.randn(1024), torch.randn(1024)
    return _pair(_gelu_sum, x, a, b)


def _softmax(x):
    return torch.softmax(x, -1)


def case_softmax():
    return _pair(_softmax, torch.randn(4096, 1024))


def _layer_norm(x, w, b):
    return F.layer_norm(x, (1024,), w, b, 1e-5)


def case_layer_norm():
    return _pair(_layer_norm, torch.randn(4096, 1024), torch.randn(1024), torch.randn(1024))


def _train(model, opt, x, y, loss_fn):
    cmodel = torch.compile(model)

    def mk(m):
        def step():
            opt.zero_grad(set_to_none=True)
            loss_fn(m(x), y).backward()
            opt.step()
        return step
    return mk(model), mk(cmodel)


def _infer(model, x):
    model.eval()
    cmodel = torch.compile(model)

    def mk(m):
        def step():
            with torch.inference_mode():
                m(x)
        return step
    return mk(model), mk(cmodel)


def case_mlp_train():
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                          nn.Linear(512, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    return _train(model, opt, torch.randn(128, 784), torch.randint(0, 10, (128,)), F.cross_entropy)


def case_cnn_train():
    model = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(64 * 8 * 8, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    return _train(model, opt, torch.randn(64, 3, 32, 32), torch.randint(0, 10, (64,)),
                  F.cross_entropy)


def case_transformer_train():
    layer = suite_ref._encoder_layer()
    opt = torch.optim.Adam(layer.parameters(), lr=1e-4)
    return _train(layer, opt, torch.randn(16, 128, 256), torch.randn(16, 128, 256), F.mse_loss)


def case_transformer_infer():
    return _infer(suite_ref._encoder_layer(), torch.randn(16, 128, 256))


def case_bert_train():
    model = suite_ref.BertForSequenceClassification()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    return _train(model, opt, torch.randint(0, 30522, (8, 128)), torch.randint(0, 2, (8,)),
                  F.cross_entropy)


def case_bert_infer1():
    return _infer(suite_ref.BertForSequenceClassification(), torch.randint(0, 30522, (1, 128)))


def case_resnet50_train():
    model = suite_ref._resnet50()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    return _train(model, opt, torch.randn(8, 3, 224, 224), torch.randint(0, 1000, (8,)),
                  F.cross_entropy)


def case_resnet50_infer1():
    return _infer(suite_ref._resnet50(), torch.randn(1, 3, 224, 224))


def case_adamw_step():
    # the optimizer step alone (bench_compile.c's adamw_step): two optimizers
    # over the same parameters, eager (torch's default for cpu tensors) and
    # torch.compile(opt.step)
    layer = nn.TransformerEncoderLayer(512, 8, 2048, 0.1, batch_first=True)
    for p in layer.parameters():
        p.grad = torch.randn_like(p)
    opt_e = torch.optim.AdamW(layer.parameters(), lr=1e-3)
    opt_c = torch.optim.AdamW(layer.parameters(), lr=1e-3)
    cstep = torch.compile(opt_c.step)
    return (lambda: opt_e.step()), (lambda: cstep())


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}


def _build(name, threads, cache_dir):
    """A fresh process's setup: the empty (or populated) inductor cache,
    no compiled state, the threads; returns (eager step, compiled step)."""
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache_dir
    torch._dynamo.reset()
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    if name not in CASES:
        raise KeyError(f"unknown case {name}")
    return CASES[name]()


def _timed(fn):
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3


def _msg(e):
    return f"{type(e).__name__}: {e}".replace("\n", " ")[:400]


def _serve_case(name, threads, warmup, cache_dir, rfd, wfd):
    fin, fout = os.fdopen(rfd, "r"), os.fdopen(wfd, "w")
    try:
        eager, compiled = _build(name, threads, cache_dir)
        why = ""
        try:
            first_c = _timed(compiled)
        except Exception as e:  # the compiled side fails alone
            first_c, why, compiled = math.nan, _msg(e), None
        first_e = _timed(eager)
        for _ in range(warmup):
            if compiled:
                compiled()
            eager()
    except BaseException as e:  # report, never hang the C side
        fout.write(f"err {_msg(e)}\n")
        fout.flush()
        return 1
    fout.write(f"ready {first_c:.3f} {first_e:.3f}{' ' + why if why else ''}\n")
    fout.flush()
    for line in fin:
        w = line.strip()
        if w not in ("c", "e"):
            break
        if w == "c" and not compiled:
            fout.write("err the compiled step failed at its first call\n")
        else:
            try:
                fout.write(f"{_timed(compiled if w == 'c' else eager):.6f}\n")
            except Exception as e:
                fout.write(f"err {_msg(e)}\n")
        fout.flush()
    return 0


_open = {}


def _fork(target, *args):
    """Forks a child running target(*args, rfd, wfd); returns (pid, to, frm)."""
    r1, w1 = os.pipe()  # parent -> child
    r2, w2 = os.pipe()  # child -> parent
    pid = os.fork()
    if pid == 0:
        os.close(w1)
        os.close(r2)
        code = 1
        try:
            code = target(*args, r1, w2)
        finally:
            os._exit(code)
    os.close(r1)
    os.close(w2)
    return pid, os.fdopen(w1, "w"), os.fdopen(r2, "r")


def cmd_open(name, threads, warmup, cache_dir):
    cmd_close()
    pid, to, frm = _fork(_serve_case, name, threads, warmup, cache_dir)
    _open.update(pid=pid, to=to, frm=frm)
    line = frm.readline().strip()
    if not line.startswith("ready"):
        cmd_close()
        return line or "err the case's process died"
    return "ok" + line[5:]


def cmd_step(which):
    if not _open:
        return "err no open case"
    try:
        _open["to"].write(which + "\n")
        _open["to"].flush()
        line = _open["frm"].readline().strip()
    except OSError as e:
        return f"err {e}"
    if not line:
        return "err the case's process died"
    return line if line.startswith("err") else f"ok {line}"


def cmd_close():
    if not _open:
        return "err no open case"
    try:
        _open["to"].write("q\n")
        _open["to"].close()
    except OSError:
        pass
    _open["frm"].close()
    _, status, ru = os.wait4(_open["pid"], 0)
    _open.clear()
    return f"ok {ru.ru_maxrss / 1024.0:.1f}"


def _serve_warm(name, threads, cache_dir, rfd, wfd):
    os.close(rfd)
    fout = os.fdopen(wfd, "w")
    try:
        eager, compiled = _build(name, threads, cache_dir)
        eager()
        fout.write(f"ok {_timed(compiled):.3f}\n")
    except BaseException as e:
        fout.write(f"err {_msg(e)}\n")
    fout.flush()
    return 0


def cmd_warm(name, threads, cache_dir):
    cmd_close()
    pid, to, frm = _fork(_serve_warm, name, threads, cache_dir)
    to.close()
    line = frm.readline().strip()
    frm.close()
    os.waitpid(pid, 0)
    return line or "err the warm-start process died"


def version():
    major = int(torch.__version__.split(".")[0])
    if major < 2 or not hasattr(torch, "compile"):
        return f"err torch {torch.__version__} has no torch.compile (torch >= 2 needed)"
    cap = getattr(getattr(torch.backends, "cpu", None), "get_cpu_capability", None)
    return (f"ok torch {torch.__version__} {os.path.dirname(torch.__file__)}"
            f" cpu {cap() if cap else os.environ.get('ATEN_CPU_CAPABILITY', '?')}")


def main():
    for line in sys.stdin:
        a = line.split()
        if not a:
            continue
        if a[0] == "quit":
            break
        try:
            if a[0] == "version":
                out = version()
            elif a[0] == "open" and len(a) == 5:
                out = cmd_open(a[1], int(a[2]), int(a[3]), a[4])
            elif a[0] == "step" and len(a) == 2 and a[1] in ("c", "e"):
                out = cmd_step(a[1])
            elif a[0] == "close":
                out = cmd_close()
            elif a[0] == "warm" and len(a) == 4:
                out = cmd_warm(a[1], int(a[2]), a[3])
            else:
                out = "err bad command: " + line.strip()
        except Exception as e:
            out = f"err {_msg(e)}"
        sys.stdout.write(out + "\n")
        sys.stdout.flush()
    cmd_close()


if __name__ == "__main__":
    main()
