#!/usr/bin/env python3
"""Fits the polynomial of the erf GELU that the sm90 GEMM epilogue computes
(src/backends/cuda/gemm/gelu_erf.h) and prints its coefficients.

The epilogue computes GELU(x) = max(x, 0) - a 2^p(a) for a = |x|, where
2^p(a) stands for the tail 1 - Phi(a). Each instruction per output element
costs speed at BERT-large's size, where the H200 runs at its power cap
(bench/RESULTS.md), so the fit asks for the fewest terms and no clamp:

- the objective is GELU's absolute error, so the fit of log2(1 - Phi(a)) is
  weighted by a (1 - Phi(a)) ln 2 (the error that a unit of log2 error makes),
  a minimax problem solved as a linear programme over [0, R];
- past R the polynomial must fall (its leading coefficient negative and its
  derivative <= 0) and stay under log2 of twice the true tail, so that a
  large |x| gets a tail of 0 from ex2 (no clamp to a range is needed) and
  |x| up to the largest float stays right;
- R is searched, and each candidate is checked in float32 (fma rounding of
  every Horner step) over a dense grid of [-40, 40] and a logarithmic one up
  to 3.4e38.

Needs numpy and scipy (pip install scipy). Usage: python3 scripts/fit_gelu_tail.py [--degree 5]
"""
import argparse

import numpy as np
from scipy.optimize import linprog
from scipy.special import log_ndtr, ndtr

LN2 = np.log(2.0)


def log2_tail(a):
    return log_ndtr(-a) / LN2


def fit(degree, fit_end):
    n = degree + 1
    a = np.linspace(0.0, fit_end, 3000)
    weight = a * np.exp2(log2_tail(a)) * LN2 + 1e-12
    powers = np.stack([a**k for k in range(n)], 1)
    # Variables: the coefficients c_0..c_degree, then t; minimise t subject to
    # |weight (p(a) - log2_tail(a))| <= t on the fit range.
    rows = [np.hstack([powers * weight[:, None], -np.ones((len(a), 1))]),
            np.hstack([-powers * weight[:, None], -np.ones((len(a), 1))])]
    bounds = [log2_tail(a) * weight, -log2_tail(a) * weight]
    beyond = np.linspace(fit_end, 60.0, 3000)
    slope = np.stack([k * beyond ** (k - 1) if k else 0 * beyond for k in range(n)], 1)
    rows.append(np.hstack([slope, np.zeros((len(beyond), 1))]))
    bounds.append(np.zeros(len(beyond)))
    rows.append(np.hstack([np.stack([beyond**k for k in range(n)], 1), np.zeros((len(beyond), 1))]))
    bounds.append(log2_tail(beyond) + 1.0)
    res = linprog(np.r_[np.zeros(n), 1.0], A_ub=np.vstack(rows), b_ub=np.concatenate(bounds),
                  bounds=[(None, None)] * (n - 1) + [(None, -1e-9), (0, None)], method="highs")
    return np.float32(res.x[:n]) if res.success else None


def gelu_float32(coefficients, x):
    """The epilogue's arithmetic: float32 inputs, one rounding per fma."""
    x = x.astype(np.float32)
    a = np.abs(x).astype(np.float64)
    c = coefficients.astype(np.float64)
    p = np.full_like(a, c[-1])
    with np.errstate(over="ignore", invalid="ignore"):
        for ck in c[-2::-1]:
            p = np.float32(p * a + ck).astype(np.float64)
        tail = np.exp2(np.float32(p)).astype(np.float64)
        return np.float32(np.maximum(x.astype(np.float64), 0.0) - a * tail).astype(np.float64)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--degree", type=int, default=5)
    args = parser.parse_args()
    x = np.concatenate([np.linspace(-40, 40, 800001), -np.logspace(1, 38.5, 2000),
                        np.logspace(1, 38.5, 2000)]).astype(np.float32).astype(np.float64)
    want = x * ndtr(x)
    best = None
    for fit_end in np.arange(3.0, 7.01, 0.25):
        c = fit(args.degree, fit_end)
        if c is None:
            continue
        got = gelu_float32(c, x)
        if not np.all(np.isfinite(got)):
            continue
        err = np.max(np.abs(got - want))
        if best is None or err < best[0]:
            best = (err, fit_end, c)
    err, fit_end, c = best
    at = x[np.argmax(np.abs(gelu_float32(c, x) - want))]
    print(f"degree {args.degree}, fit over [0, {fit_end}]: max |GELU error| {err:.3g} "
          f"(at x = {at:.4g}) against float64, float32 arithmetic")
    print("coefficients, highest first (Horner):")
    for k in range(args.degree, -1, -1):
        print(f"  a^{k}: {float(c[k]):.9g}f")


if __name__ == "__main__":
    main()
