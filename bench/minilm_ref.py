"""torch side of bench_minilm: all-MiniLM-L6-v2 sentence embeddings with
sentence-transformers (torch from PyPI, the pyenv python3), the same
sentences, batch size and thread count as ours.
Usage: minilm_ref.py MODEL_DIR SENTENCES_FILE BATCH THREADS REPS
Prints: "times <ms per encode of all sentences>...", "cpu <process CPU ms
per encode>..." then "check <sum>"."""
import sys
import time

import torch
from sentence_transformers import SentenceTransformer


def main():
    model_dir, path, batch, threads, reps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    torch.set_num_threads(threads)
    with open(path, encoding="utf-8") as f:
        sentences = [line.rstrip("\n") for line in f]
    model = SentenceTransformer(model_dir, device="cpu")
    model.eval()
    times, cpu = [], []
    emb = None
    with torch.inference_mode():
        model.encode(sentences, batch_size=batch, convert_to_tensor=True)  # warm-up
        for _ in range(reps):
            t0, c0 = time.perf_counter(), time.process_time()
            emb = model.encode(sentences, batch_size=batch, convert_to_tensor=True)
            times.append((time.perf_counter() - t0) * 1e3)
            cpu.append((time.process_time() - c0) * 1e3)
    print("times " + " ".join("%.3f" % t for t in times))
    print("cpu " + " ".join("%.3f" % t for t in cpu))
    print("check %.6f %s" % (float(emb.abs().sum()), torch.__version__))


if __name__ == "__main__":
    main()
