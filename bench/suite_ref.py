#!/usr/bin/env python3
"""suite_ref.py -- the PyTorch side of bench/bench_suite.c.

A long-lived child of build/bench_suite, talking over stdin/stdout:

    version                        -> "ok torch <version> <path of torch> cpu <capability>"
    run <case> <threads> <reps> <warmup> [<limit>]
                                   -> "ok <peak_mb> <ms> <ms> ..." or "err <message>"
    open <case> <threads> <warmup> <limit>
                                   -> "ok" (the case is set up and warmed up) or "err ..."
    step                           -> "ok <ms>": one timed repetition of the open case
    close                          -> "ok <peak_mb>": the open case's process ends
    quit

open/step/close is what bench_suite uses: it alternates single repetitions
of the two sides, so both meet the same machine (the host's load here
changes from minute to minute).

Each "run" forks a fresh process for the case: this driver imports torch but
never computes, so no OpenMP pool exists at fork time; the child sets
torch.set_num_threads(threads), builds the case, runs <warmup> untimed
repetitions and <reps> timed ones, and writes its times back through a pipe.
The peak memory is the child's ru_maxrss from wait4 (MB): the peak resident
set of the process that ran the case, torch's own baseline included -- the
same method the C side uses.  <limit> (fashion_epoch only) caps the number of
batches of the epoch (0: the whole epoch).

The shapes are fixed here and must match bench_suite.c.  Run alone for a
check:  printf 'run matmul_1024 1 3 1\\nquit\\n' | python3 bench/suite_ref.py
"""
import contextlib
import gzip
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

FASHION_DIR = os.environ.get("CT_FASHION_DIR", "/usr/share/datasets/fashion-mnist")


def _sync():
    pass  # CPU: ops are synchronous


# ---- the cases: each builder returns a function that runs one repetition ----

def case_matmul_1024():
    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    return lambda: torch.matmul(a, b)


def case_matmul_4096x64():
    # [4096, 4096] @ [4096, 64]
    a, b = torch.randn(4096, 4096), torch.randn(4096, 64)
    return lambda: torch.matmul(a, b)


def _mm_half(m, k, n, dt):
    a, b = torch.randn(m, k).to(dt), torch.randn(k, n).to(dt)
    return lambda: torch.matmul(a, b)


def case_matmul_bf16_1024(): return _mm_half(1024, 1024, 1024, torch.bfloat16)
def case_matmul_f16_1024(): return _mm_half(1024, 1024, 1024, torch.float16)
def case_matmul_bf16_4096x64(): return _mm_half(4096, 4096, 64, torch.bfloat16)
def case_matmul_f16_4096x64(): return _mm_half(4096, 4096, 64, torch.float16)


def case_conv_bf16_r50():
    # ResNet-50 layer3's 3x3 conv, 256 -> 256 channels at 14x14, batch 4
    x = torch.randn(4, 256, 14, 14).to(torch.bfloat16)
    w = (torch.randn(256, 256, 3, 3) * 0.03).to(torch.bfloat16)
    return lambda: F.conv2d(x, w, None, 1, 1)


def case_matmul_1024_medium():
    # each case runs in a process of its own: the setting stays there
    torch.set_float32_matmul_precision("medium")
    return case_matmul_1024()


def case_bmm():
    a, b = torch.randn(64, 128, 64), torch.randn(64, 64, 128)
    return lambda: torch.bmm(a, b)


def case_gelu_chain():
    x = torch.randn(16 << 20)
    return lambda: F.gelu(x * 1.5 + 0.25)


def case_softmax():
    x = torch.randn(4096, 1024)
    return lambda: torch.softmax(x, -1)


def case_layer_norm():
    x = torch.randn(4096, 1024)
    w, b = torch.randn(1024), torch.randn(1024)
    return lambda: F.layer_norm(x, (1024,), w, b, 1e-5)


def _reduce(fn, dim):
    x = torch.randn(4096, 4096)
    return lambda: fn(x, dim)


def case_sum_dim0(): return _reduce(torch.sum, 0)
def case_sum_dim1(): return _reduce(torch.sum, 1)
def case_argmax_dim0(): return _reduce(torch.argmax, 0)
def case_argmax_dim1(): return _reduce(torch.argmax, 1)


TINY_OPS = 10000  # adds per repetition, as in bench_suite.c


def _tiny_add(grad):
    a = torch.randn(1, requires_grad=grad)
    b = torch.randn(1, requires_grad=grad)

    def step():
        for _ in range(TINY_OPS):
            torch.add(a, b)
    return step


def case_tiny_add(): return _tiny_add(False)
def case_tiny_add_grad(): return _tiny_add(True)


def _train_step(model, opt, x, y, loss_fn, amp=None):
    """one training step; amp (a dtype): the forward and the loss under
    torch.autocast("cpu", amp), float32 master weights (step_train's s->amp
    on the C side)"""
    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=amp) if amp is not None else contextlib.nullcontext():
            loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
    return step


def case_mlp_train():
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                          nn.Linear(512, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(128, 784), torch.randint(0, 10, (128,))
    return _train_step(model, opt, x, y, F.cross_entropy)


def _cnn_setup():
    """the cnn_train cases' network, Adam and batch (setup_cnn_train on the C side)"""
    model = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(64 * 8 * 8, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    return model, opt, torch.randn(64, 3, 32, 32), torch.randint(0, 10, (64,))


def case_cnn_train():
    model, opt, x, y = _cnn_setup()
    return _train_step(model, opt, x, y, F.cross_entropy)


def case_cnn_train_amp_bf16():
    """case_cnn_train with the forward and the loss under torch.autocast("cpu", bfloat16)"""
    return _train_step(*_cnn_setup(), F.cross_entropy, amp=torch.bfloat16)


def _encoder_layer():
    return nn.TransformerEncoderLayer(d_model=256, nhead=4, dim_feedforward=1024, dropout=0.1,
                                      activation="relu", batch_first=True, norm_first=False)


def case_transformer_train():
    layer = _encoder_layer()
    opt = torch.optim.Adam(layer.parameters(), lr=1e-4)
    x, t = torch.randn(16, 128, 256), torch.randn(16, 128, 256)
    return _train_step(layer, opt, x, t, F.mse_loss)


def case_transformer_infer():
    layer = _encoder_layer().eval()
    x = torch.randn(16, 128, 256)

    def step():
        with torch.inference_mode():
            layer(x)
    return step


# ---- torchvision's ResNet-50 and VGG-16, written with torch.nn for a Python
# whose torch has no torchvision beside it (the PyPI torch here): the same
# layers, shapes and default init as torchvision.models.resnet50() / vgg16().

class _Bottleneck(nn.Module):
    def __init__(self, cin, width, stride, down):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, width * 4, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(width * 4)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = down

    def forward(self, x):
        idt = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        return self.relu(self.bn3(self.conv3(out)) + idt)


class _ResNet50(nn.Module):
    def __init__(self, num_classes=1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        cin, layers = 64, []
        for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
            down = nn.Sequential(nn.Conv2d(cin, width * 4, 1, stride, bias=False),
                                 nn.BatchNorm2d(width * 4))
            mods = [_Bottleneck(cin, width, stride, down)]
            cin = width * 4
            mods += [_Bottleneck(cin, width, 1, None) for _ in range(blocks - 1)]
            layers.append(nn.Sequential(*mods))
        self.layer1, self.layer2, self.layer3, self.layer4 = layers
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(2048, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def _vgg16_nn(num_classes=1000):
    feats, cin = [], 3
    for v in (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M",
              512, 512, 512, "M"):
        if v == "M":
            feats.append(nn.MaxPool2d(2, 2))
        else:
            feats += [nn.Conv2d(cin, v, 3, padding=1), nn.ReLU(inplace=True)]
            cin = v
    model = nn.Sequential()
    model.features = nn.Sequential(*feats)
    model.avgpool = nn.AdaptiveAvgPool2d((7, 7))
    model.flatten = nn.Flatten(1)
    model.classifier = nn.Sequential(nn.Linear(512 * 7 * 7, 4096), nn.ReLU(True), nn.Dropout(),
                                     nn.Linear(4096, 4096), nn.ReLU(True), nn.Dropout(),
                                     nn.Linear(4096, num_classes))
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            nn.init.constant_(m.bias, 0)
        elif isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, 0, 0.01)
            nn.init.constant_(m.bias, 0)
    return model


def _resnet50():
    try:
        import torchvision
        return torchvision.models.resnet50()
    except ImportError:
        return _ResNet50()


def _vgg16():
    try:
        import torchvision
        return torchvision.models.vgg16()
    except ImportError:
        return _vgg16_nn()


def _amp_full_size():
    """the autocast bf16 training cases' sizes (amp_full_size in bench_suite.c):
    the float32 cases' on a CPU with bf16 dot products (AVX512_BF16 or AMX),
    else small enough that one torch autocast repetition stays near 10 s
    (torch 2.15 on a Zen 3: 55 s for ResNet-50 at 4x3x224x224, 112 s for
    BERT-base at 1x128)"""
    try:
        with open("/proc/cpuinfo") as f:
            flags = f.read()
    except OSError:
        return False
    return " avx512_bf16" in flags or " amx_bf16" in flags


def _resnet50_setup(batch, hw=224):
    """the resnet50_train cases' network, SGD and batch (setup_resnet50_train_b on the C side)"""
    model = _resnet50()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    return model, opt, torch.randn(batch, 3, hw, hw), torch.randint(0, 1000, (batch,))


def case_resnet50_train():
    return _train_step(*_resnet50_setup(8), F.cross_entropy)


def case_resnet50_train_amp_bf16():
    """ResNet-50's step under torch.autocast("cpu", bfloat16): 8x3x224x224 (2x3x112x112)"""
    size = (8, 224) if _amp_full_size() else (2, 112)
    return _train_step(*_resnet50_setup(*size), F.cross_entropy, amp=torch.bfloat16)


def case_resnet50_infer1():
    model = _resnet50().eval()
    x = torch.randn(1, 3, 224, 224)

    def step():
        with torch.inference_mode():
            model(x)
    return step


def case_vgg16_train():
    model = _vgg16()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = torch.randn(4, 3, 224, 224), torch.randint(0, 1000, (4,))
    return _train_step(model, opt, x, y, F.cross_entropy)


class BertForSequenceClassification(nn.Module):
    """transformers.BertForSequenceClassification with bert-base's shapes,
    written with torch.nn (transformers is not installed): embeddings (word
    30522 with padding_idx 0, position 512, token type 2) + LayerNorm (eps
    1e-12) + dropout 0.1, 12 post-norm encoder layers (d 768, 12 heads, ff
    3072, exact GELU, dropout 0.1), pooler tanh(dense(h[:, 0])), dropout,
    classifier -> num_labels.  No attention mask (every token attends), as on
    the C side (ct_bert_for_sequence_classification_new)."""

    def __init__(self, vocab=30522, d=768, layers=12, heads=12, ff=3072, max_pos=512,
                 num_labels=2):
        super().__init__()
        self.word = nn.Embedding(vocab, d, padding_idx=0)
        self.pos = nn.Embedding(max_pos, d)
        self.token_type = nn.Embedding(2, d)
        self.ln = nn.LayerNorm(d, eps=1e-12)
        self.drop = nn.Dropout(0.1)
        layer = nn.TransformerEncoderLayer(d, heads, ff, 0.1, activation="gelu",
                                           layer_norm_eps=1e-12, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.pooler = nn.Linear(d, d)
        self.classifier = nn.Linear(d, num_labels)

    def forward(self, ids):
        pos = torch.arange(ids.shape[1], device=ids.device)
        h = self.word(ids) + self.pos(pos)[None] + self.token_type(torch.zeros_like(ids))
        h = self.encoder(self.drop(self.ln(h)))
        pooled = torch.tanh(self.pooler(h[:, 0]))
        return self.classifier(self.drop(pooled))


def _bert_setup(batch, seq=128):
    """the bert_train cases' network, AdamW and batch x seq tokens (setup_bert_train_b on the C side)"""
    model = BertForSequenceClassification()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    return model, opt, torch.randint(0, 30522, (batch, seq)), torch.randint(0, 2, (batch,))


def case_bert_train():
    return _train_step(*_bert_setup(8), F.cross_entropy)


def case_bert_train_amp_bf16():
    """BERT-base's step under torch.autocast("cpu", bfloat16): 8x128 (1x16)"""
    size = (8, 128) if _amp_full_size() else (1, 16)
    return _train_step(*_bert_setup(*size), F.cross_entropy, amp=torch.bfloat16)


# ---- GPT-2 small (124M), transformers' GPT2LMHeadModel written with torch.nn
# (no transformers package needed): learned position embeddings, pre-norm
# blocks, one fused qkv projection, causal SDPA, GELU tanh, final LayerNorm, an
# lm_head tied to the token embedding; dropout 0; the vocabulary padded to
# 50304 as on the C side (setup_gpt2_train). AdamW fused where this torch has
# the fused CPU kernel (torch >= 2.4), else foreach: torch at its best.
class _GPT2Block(nn.Module):
    def __init__(self, C, H):
        super().__init__()
        self.H = H
        self.ln_1, self.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.c_attn, self.c_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.c_fc, self.mlp_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.H, C // self.H).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.c_proj(y.transpose(1, 2).reshape(B, T, C))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT2LMHead(nn.Module):
    def __init__(self, V=50304, P=1024, C=768, L=12, H=12):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(P, C)
        self.h = nn.ModuleList(_GPT2Block(C, H) for _ in range(L))
        self.ln_f = nn.LayerNorm(C)
        self.lm_head = nn.Linear(C, V, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, ids):
        x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1]))[None]
        for b in self.h:
            x = b(x)
        return self.lm_head(self.ln_f(x))


def _gpt2_train(T, B=4, amp=None):
    """amp (a dtype): the forward and the loss under torch.autocast("cpu",
    amp), float32 master weights (step_gpt2_train's s->amp on the C side)"""
    model = GPT2LMHead()
    try:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    except (RuntimeError, TypeError, ValueError):
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
    ids = torch.randint(0, 50257, (B, T))
    tgt = torch.randint(0, 50257, (B, T))

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=amp) if amp is not None else contextlib.nullcontext():
            logits = model(ids)
            loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), tgt.view(-1))
        loss.backward()
        opt.step()
    return step


def case_gpt2_train_t64(): return _gpt2_train(64)
def case_gpt2_train_t256(): return _gpt2_train(256)


def case_gpt2_train_amp_bf16():
    """GPT-2's step under torch.autocast("cpu", bfloat16): 4x64 tokens (1x16)"""
    B, T = (4, 64) if _amp_full_size() else (1, 16)
    return _gpt2_train(T, B, amp=torch.bfloat16)


def _read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
    t = torch.frombuffer(bytearray(data[4 + 4 * ndim:]), dtype=torch.uint8)
    return t.reshape(dims)


def _fashion_data():
    try:
        x = _read_idx(os.path.join(FASHION_DIR, "train-images-idx3-ubyte.gz"))
        y = _read_idx(os.path.join(FASHION_DIR, "train-labels-idx1-ubyte.gz"))
        return x.reshape(-1, 1, 28, 28).float().div_(255), y.long()
    except OSError:  # no dataset: random images of the same shape
        g = torch.Generator().manual_seed(0)
        return torch.rand(60000, 1, 28, 28, generator=g), torch.randint(0, 10, (60000,), generator=g)


def case_fashion_epoch(limit=0):
    """One epoch of the FashionMNIST demo (examples/fashion_mnist.c): the same
    CNN, batch 128, shuffled, Adam, images held in memory."""
    model = nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Dropout(0.25),
                          nn.Linear(128, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x, y = _fashion_data()
    n = x.shape[0]
    nb = (n + 127) // 128
    if limit > 0:
        nb = min(nb, limit)

    def epoch():
        perm = torch.randperm(n)
        for i in range(nb):
            idx = perm[i * 128:(i + 1) * 128]
            xb = (x.index_select(0, idx) - 0.2860) / 0.3530
            opt.zero_grad(set_to_none=True)
            F.cross_entropy(model(xb), y.index_select(0, idx)).backward()
            opt.step()
    return epoch


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}


def _setup_case(name, threads, warmup, limit):
    """Builds case <name> with <threads> threads and runs its warm-ups;
    returns the function that runs one repetition."""
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    if name not in CASES:
        raise KeyError(f"unknown case {name}")
    fn = CASES[name](limit) if name == "fashion_epoch" else CASES[name]()
    for _ in range(warmup):
        fn()
    return fn


def run_case(name, threads, reps, warmup, limit, wfd):
    fn = _setup_case(name, threads, warmup, limit)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    os.write(wfd, ("ok " + " ".join(f"{t:.6f}" for t in times)).encode())


def cmd_run(name, threads, reps, warmup, limit):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        code = 0
        try:
            run_case(name, threads, reps, warmup, limit, w)
        except BaseException as e:  # report, never hang the C side
            os.write(w, f"err {type(e).__name__}: {e}".replace("\n", " ").encode())
            code = 1
        os.close(w)
        os._exit(code)
    os.close(w)
    chunks = []
    while True:
        b = os.read(r, 65536)
        if not b:
            break
        chunks.append(b)
    os.close(r)
    _, status, ru = os.wait4(pid, 0)
    msg = b"".join(chunks).decode()
    if not msg.startswith("ok"):
        return msg or f"err child exited with status {status}"
    return f"ok {ru.ru_maxrss / 1024.0:.1f}{msg[2:]}"


# ---- interleaved mode: a case lives in a forked child between commands, so
# the C side can alternate single repetitions of both sides ----------------
_open = {}


def _serve_case(name, threads, warmup, limit, rfd, wfd):
    fin, fout = os.fdopen(rfd, "r"), os.fdopen(wfd, "w")
    try:
        fn = _setup_case(name, threads, warmup, limit)
    except BaseException as e:  # report, never hang the C side
        fout.write(f"err {type(e).__name__}: {e}".replace("\n", " ") + "\n")
        fout.flush()
        return 1
    fout.write("ready\n")
    fout.flush()
    for line in fin:
        if line.strip() != "r":
            break
        t0 = time.perf_counter()
        fn()
        fout.write(f"{(time.perf_counter() - t0) * 1e3:.6f}\n")
        fout.flush()
    return 0


def cmd_open(name, threads, warmup, limit):
    """open: forks the child, which sets the case up and warms it up."""
    cmd_close()
    r1, w1 = os.pipe()  # parent -> child
    r2, w2 = os.pipe()  # child -> parent
    pid = os.fork()
    if pid == 0:
        os.close(w1)
        os.close(r2)
        code = 1
        try:
            code = _serve_case(name, threads, warmup, limit, r1, w2)
        finally:
            os._exit(code)
    os.close(r1)
    os.close(w2)
    to, frm = os.fdopen(w1, "w"), os.fdopen(r2, "r")
    _open.update(pid=pid, to=to, frm=frm)
    line = frm.readline().strip()
    if line != "ready":
        cmd_close()
        return line or "err the case's process died"
    return "ok"


def cmd_step():
    if not _open:
        return "err no open case"
    try:
        _open["to"].write("r\n")
        _open["to"].flush()
        line = _open["frm"].readline().strip()
    except OSError as e:
        return f"err {e}"
    return f"ok {line}" if line else "err the case's process died"


def cmd_close():
    """close: ends the child; replies with its peak resident set (MB)."""
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


def main():
    for line in sys.stdin:
        a = line.split()
        if not a:
            continue
        if a[0] == "quit":
            break
        if a[0] == "version":
            cap = getattr(getattr(torch.backends, "cpu", None), "get_cpu_capability", None)
            out = (f"ok torch {torch.__version__} {os.path.dirname(torch.__file__)}"
                   f" cpu {cap() if cap else os.environ.get('ATEN_CPU_CAPABILITY', '?')}")
        elif a[0] == "open" and len(a) == 5:
            try:
                out = cmd_open(a[1], int(a[2]), int(a[3]), int(a[4]))
            except Exception as e:
                out = f"err {e}"
        elif a[0] == "step":
            out = cmd_step()
        elif a[0] == "close":
            out = cmd_close()
        elif a[0] == "run" and len(a) >= 5:
            try:
                out = cmd_run(a[1], int(a[2]), int(a[3]), int(a[4]), int(a[5]) if len(a) > 5 else 0)
            except Exception as e:
                out = f"err {e}"
        else:
            out = "err bad command: " + line.strip()
        sys.stdout.write(out + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
