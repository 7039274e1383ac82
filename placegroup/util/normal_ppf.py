"""The standard normal's inverse CDF, vectorised over numpy or cupy: truncated normal draws
from one uniform each (ops/random.py's ``truncated_gaussian_random``, NOTE(truncated-normal)
there; new rows of a table keyed by raw ids, placegroup/util/dynamic_table.py).

Phi^-1 is Acklam's rational approximation (relative error below 1.2e-9, far inside float32), in
float64.
"""
from __future__ import annotations

PHI_LO, PHI_HI = 0.022750131948179195, 0.9772498680518208  # Phi(-2), Phi(2)
_A = (-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02, 1.383577518672690e+02,
      -3.066479806614716e+01, 2.506628277459239e+00)
_B = (-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02, 6.680131188771972e+01,
      -1.328068155288572e+01, 1.0)
_C = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00, -2.549732539343734e+00,
      4.374664141464968e+00, 2.938163982698783e+00)
_D = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00, 3.754408661907416e+00, 1.0)


def _poly(xp, coeffs, t):
    out = xp.full(t.shape, coeffs[0])
    for c in coeffs[1:]:
        out = out * t + c
    return out


def normal_ppf(xp, p):
    """Phi^-1(p) for p in (0, 1), float64 (Acklam's algorithm)."""
    q = p - 0.5
    r = q * q
    central = _poly(xp, _A, r) * q / _poly(xp, _B, r)
    tail = xp.sqrt(-2.0 * xp.log(xp.minimum(p, 1.0 - p)))
    tails = _poly(xp, _C, tail) / _poly(xp, _D, tail)
    return xp.where(xp.abs(q) <= 0.47575, central, xp.where(q < 0, tails, -tails))


__all__ = ["normal_ppf", "PHI_LO", "PHI_HI"]
