#!/usr/bin/env python3
"""Fits the polynomial of runtime/cpu/OwnGelu.h's erfcForF32 and prints its coefficients.

h(a) = (1 + 2a) e^(a^2) erfc(a) - 1 as a polynomial of degree 12 in t = (a - 3) / (a + 3), over
a in [0, 26.5] (t in [-1, 0.796]): least squares at 400 Chebyshev nodes of t, reweighted (Lawson)
towards the minimax fit, with h from mpmath at 40 digits. Prints the largest error in double
(6.3e-10) and the coefficients, highest degree first as the Horner loop uses them.

Needs python3-mpmath and python3-numpy (apt). Usage: scripts/fit_erfc.py
"""
import mpmath
import numpy as np

DEGREE, SHIFT, A_MAX, NODES = 12, 3.0, 26.5, 400


def h(t):
    a = SHIFT * (1 + mpmath.mpf(t)) / (1 - mpmath.mpf(t))
    return (1 + 2 * a) * mpmath.exp(a * a) * mpmath.erfc(a) - 1


def main():
    mpmath.mp.dps = 40
    lo, hi = -1.0, (A_MAX - SHIFT) / (A_MAX + SHIFT)
    k = np.arange(NODES)
    t = (lo + hi) / 2 + (hi - lo) / 2 * np.cos(np.pi * (k + 0.5) / NODES)
    y = np.array([float(h(v)) for v in t])
    weight = np.ones(NODES)
    vander = np.vander(t, DEGREE + 1, increasing=True)
    for _ in range(30):
        coef, *_ = np.linalg.lstsq(vander * weight[:, None], y * weight, rcond=None)
        error = vander @ coef - y
        weight *= np.sqrt(np.abs(error))
        weight /= weight.max()
    print(f"largest error {np.abs(error).max():.3g}")
    for c in coef[::-1]:
        print(f"{c:.17g}")


if __name__ == "__main__":
    main()
