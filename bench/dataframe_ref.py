"""pandas side of bench_dataframe: read_csv + a 5-step preprocessing of the
bench CSV (run with Debian's /usr/bin/python3, pandas 1.5).
Usage: dataframe_ref.py CSV REPS -> prints one line: the times in ms."""
import sys
import time

import pandas as pd


def run(path):
    df = pd.read_csv(path)
    df["x"] = df["x"].fillna(0.0)                       # 1. fill_null
    df["y"] = (df["y"] - df["y"].mean()) / df["y"].std()  # 2. standardize
    df["x"] = df["x"].clip(-1.0, 1.0)                   # 3. clip
    df = df[df["flag"]]                                 # 4. filter
    g = df.groupby("cat").agg(x_mean=("x", "mean"), y_mean=("y", "mean")).reset_index()  # 5. group_by mean
    return g


def main():
    path, reps = sys.argv[1], int(sys.argv[2])
    times = []
    g = None
    for _ in range(reps):
        t0 = time.perf_counter()
        g = run(path)
        times.append((time.perf_counter() - t0) * 1e3)
    print(" ".join("%.3f" % t for t in times))
    print("check %d %.9f %.9f" % (len(g), g["x_mean"].sum(), g["y_mean"].sum()))


if __name__ == "__main__":
    main()
