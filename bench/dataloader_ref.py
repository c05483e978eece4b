"""Reference side of bench/bench_dataloader.c: torch's DataLoader over
FashionMNIST (Debian's dataset-fashion-mnist, /usr/share/datasets/fashion-mnist)
with RandomCrop(28, padding=4) + Normalize on tensors, batch 128, shuffled,
num_workers 0 and 2.  Prints one line per case:
    <case> <median_ms> <min_ms> <max_ms>
Usage: /usr/bin/python3 bench/dataloader_ref.py REPS [DATA_DIR]
Needs torch and torchvision (Debian's python3-torch, python3-torchvision);
installs nothing.
"""
import gzip
import os
import statistics
import sys
import time

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset
import torchvision.transforms as T


def load_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    nd = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(nd)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * nd).reshape(dims)


class FMNIST(Dataset):
    def __init__(self, root, transform):
        self.images = torch.from_numpy(load_idx(os.path.join(root, "train-images-idx3-ubyte.gz")).copy())
        self.labels = torch.from_numpy(load_idx(os.path.join(root, "train-labels-idx1-ubyte.gz")).astype(np.int64))
        self.transform = transform

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        img = self.images[i].unsqueeze(0).float().div_(255.0)  # ToTensor: [1, 28, 28]
        return self.transform(img), self.labels[i]


def main():
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    root = sys.argv[2] if len(sys.argv) > 2 else "/usr/share/datasets/fashion-mnist"
    torch.set_num_threads(1)
    tf = T.Compose([T.RandomCrop(28, padding=4), T.Normalize((0.2860,), (0.3530,))])
    ds = FMNIST(root, tf)
    for nw in (0, 2):
        dl = DataLoader(ds, batch_size=128, shuffle=True, num_workers=nw,
                        generator=torch.Generator().manual_seed(0))
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            n = 0
            for x, y in dl:
                n += x.shape[0]
            times.append((time.perf_counter() - t0) * 1e3)
            assert n == len(ds)
        print("dataloader_fmnist_w%d %.3f %.3f %.3f" % (nw, statistics.median(times), min(times), max(times)),
              flush=True)


if __name__ == "__main__":
    main()
