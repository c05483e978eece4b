#!/usr/bin/env python3
"""fit_erf.py -- the coefficients of gelu's erf and tanh
(src/backend/cpu/ew_vec_impl.h: k_erf_p/q, k_tanh_p/q).

f(x) ~ x P(x^2) / Q(x^2) on [0, X] (beyond, f is +-1 in float32), Q(0) = 1:
erf with P, Q of degree 5 on [0, 4], tanh with degree 4 on [0, 9].  A
least-squares start, then Lawson-style reweighting towards the minimax
solution.  Prints the float32 coefficients (constant term first), the
maximum absolute error of the fit in float64 and of its float32 evaluation
(Horner, no FMA, the clamps) over [-X - 1, X + 1] and [-12, 12].  Needs
numpy and scipy (pip install numpy scipy).  Not run by the build: its
output is in the header."""
import numpy as np
from scipy.optimize import least_squares
from scipy.special import erf

def residual(c, x, t, y, NP):
    p = np.polyval(c[:NP + 1][::-1], t)
    q = 1 + np.polyval(np.concatenate([c[NP + 1:][::-1], [0]]), t)
    return x * p / q - y


def fit(f, NP, NQ, X):
    x = np.concatenate([np.linspace(0, X, 4000), X * (1 - np.cos(np.linspace(0, np.pi / 2, 2000)))])
    t, y = x * x, f(x)
    # linearized start: x P(t) - y (Q(t) - 1) = y
    a = np.hstack([np.stack([x * t**i for i in range(NP + 1)], 1),
                   np.stack([-y * t**i for i in range(1, NQ + 1)], 1)])
    c = np.linalg.lstsq(a, y, rcond=None)[0]
    w = np.ones_like(x)
    for _ in range(60):
        c = least_squares(lambda c: w * residual(c, x, t, y, NP), c, xtol=1e-15, ftol=1e-15, gtol=1e-15).x
        e = np.abs(residual(c, x, t, y, NP))
        w = w * (e / e.max() + 1e-3) ** 0.5
        w /= w.max()
    return c, np.abs(residual(c, x, t, y, NP)).max()


def one(name, f, NP, NQ, X, span):
    c, err = fit(f, NP, NQ, X)
    p = c[:NP + 1].astype(np.float32)
    q = np.concatenate([[1.0], c[NP + 1:]]).astype(np.float32)
    print("%s P: {%s}" % (name, ", ".join("%.17gf" % v for v in p)))
    print("%s Q: {%s}" % (name, ", ".join("%.17gf" % v for v in q)))
    x = np.linspace(-span, span, 2000001).astype(np.float32)
    xc = np.clip(x, np.float32(-X), np.float32(X))
    t = xc * xc
    pp, qq = p[NP], q[NQ]
    for k in range(NP - 1, -1, -1):
        pp = pp * t + p[k]
    for k in range(NQ - 1, -1, -1):
        qq = qq * t + q[k]
    r = np.clip(xc * pp / qq, np.float32(-1), np.float32(1))
    print("%s: fit max abs error %.3e; float32 evaluation over [-%g, %g]: %.3e" %
          (name, err, span, span, np.abs(r - f(x.astype(np.float64))).max()))


if __name__ == "__main__":
    one("erf", erf, 5, 5, 4.0, 5.0)
    one("tanh", np.tanh, 4, 4, 9.0, 12.0)
