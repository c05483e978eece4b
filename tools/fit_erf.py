#!/usr/bin/env python3
"""fit_erf.py -- the coefficients of gelu's erf (src/backend/cpu/ew_vec_impl.h).

erf(x) ~ x P(x^2) / Q(x^2) on [0, 4] (beyond, erf is +-1 in float32),
P and Q of degree 5, Q(0) = 1: a least-squares start, then Lawson-style
reweighting towards the minimax solution.  Prints the float32 coefficients,
the maximum absolute error of the fit in float64 and of its float32
evaluation (Horner, no FMA) over [-5, 5].  Needs numpy and scipy
(pip install numpy scipy).  Not run by the build: its output is in the
header."""
import numpy as np
from scipy.optimize import least_squares
from scipy.special import erf

NP, NQ, X = 5, 5, 4.0


def residual(c, x, t, y):
    p = np.polyval(c[:NP + 1][::-1], t)
    q = 1 + np.polyval(np.concatenate([c[NP + 1:][::-1], [0]]), t)
    return x * p / q - y


def fit():
    x = np.concatenate([np.linspace(0, X, 4000), X * (1 - np.cos(np.linspace(0, np.pi / 2, 2000)))])
    t, y = x * x, erf(x)
    # linearized start: x P(t) - y (Q(t) - 1) = y
    a = np.hstack([np.stack([x * t**i for i in range(NP + 1)], 1),
                   np.stack([-y * t**i for i in range(1, NQ + 1)], 1)])
    c = np.linalg.lstsq(a, y, rcond=None)[0]
    w = np.ones_like(x)
    for _ in range(60):
        c = least_squares(lambda c: w * residual(c, x, t, y), c, xtol=1e-15, ftol=1e-15, gtol=1e-15).x
        e = np.abs(residual(c, x, t, y))
        w = w * (e / e.max() + 1e-3) ** 0.5
        w /= w.max()
    return c, np.abs(residual(c, x, t, y)).max()


def main():
    c, err = fit()
    p = c[:NP + 1].astype(np.float32)
    q = np.concatenate([[1.0], c[NP + 1:]]).astype(np.float32)
    for i, v in enumerate(p):
        print("#define CT_ERF_P%d %.17gf" % (i, v))
    for i, v in enumerate(q[1:], 1):
        print("#define CT_ERF_Q%d %.17gf" % (i, v))
    x = np.linspace(-5, 5, 2000001).astype(np.float32)
    xc = np.clip(x, np.float32(-X), np.float32(X))
    t = xc * xc
    pp, qq = p[NP], q[NQ]
    for k in range(NP - 1, -1, -1):
        pp = pp * t + p[k]
    for k in range(NQ - 1, -1, -1):
        qq = qq * t + q[k]
    r = np.clip(xc * pp / qq, np.float32(-1), np.float32(1))
    print("fit max abs error %.3e; float32 evaluation over [-5, 5]: %.3e" % (err, np.abs(r - erf(x.astype(np.float64))).max()))


if __name__ == "__main__":
    main()
