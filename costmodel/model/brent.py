"""Brent's root finder (Brent 1973) as scipy.optimize.brentq runs it, without importing scipy.

`brentq_steps` is a generator of the steps of scipy's brentq.c: it yields each x to price and is sent f(x), so
many brackets can advance in lockstep (one vectorized pricing per step) with the same iterates and root as
brentq on the same f; `brentq` drives one bracket with a scalar f.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ..io.errors import InputError

_BRENTQ_RTOL = 4 * np.finfo(float).eps  # scipy.optimize.brentq's default rtol
_BRENTQ_MAXITER = 100  # and maxiter


def brentq_steps(xa: float, xb: float, xtol: float, rtol: float = _BRENTQ_RTOL, maxiter: int = _BRENTQ_MAXITER):
    """scipy.optimize.brentq (Brent 1973, the steps of scipy's brentq.c) as a generator: yields each x to price,
    is sent f(x), returns the root - so many brackets advance in lockstep, one vectorized call per step, with
    the same iterates (and root) as brentq on the same f."""
    xpre, xcur = xa, xb
    xblk = fblk = spre = scur = 0.0
    fpre = yield xpre
    fcur = yield xcur
    if fpre == 0:
        return xpre
    if fcur == 0:
        return xcur
    if math.copysign(1.0, fpre) == math.copysign(1.0, fcur):
        raise InputError("crossover: f(a) and f(b) must have different signs")
    for _ in range(maxiter):
        if fpre != 0 and fcur != 0 and math.copysign(1.0, fpre) != math.copysign(1.0, fcur):
            xblk, fblk = xpre, fpre
            spre = scur = xcur - xpre
        if abs(fblk) < abs(fcur):
            xpre, xcur, xblk = xcur, xblk, xcur
            fpre, fcur, fblk = fcur, fblk, fcur
        delta = (xtol + rtol * abs(xcur)) / 2
        sbis = (xblk - xcur) / 2
        if fcur == 0 or abs(sbis) < delta:
            return xcur
        if abs(spre) > delta and abs(fcur) < abs(fpre):
            if xpre == xblk:  # interpolate
                stry = -fcur * (xcur - xpre) / (fcur - fpre)
            else:  # extrapolate (inverse quadratic)
                dpre = (fpre - fcur) / (xpre - xcur)
                dblk = (fblk - fcur) / (xblk - xcur)
                stry = -fcur * (fblk * dblk - fpre * dpre) / (dblk * dpre * (fblk - fpre))
            if 2 * abs(stry) < min(abs(spre), 3 * abs(sbis) - delta):  # good short step
                spre, scur = scur, stry
            else:  # bisect
                spre = scur = sbis
        else:  # bisect
            spre = scur = sbis
        xpre, fpre = xcur, fcur
        xcur += scur if abs(scur) > delta else (delta if sbis > 0 else -delta)
        fcur = yield xcur
    raise InputError("crossover: brentq did not converge")


def brentq(f: Callable[[float], float], a: float, b: float, xtol: float = 2e-12) -> float:
    """The root of f in [a, b] (f(a), f(b) of opposite signs) by `brentq_steps`: scipy.optimize.brentq(f, a, b,
    xtol=xtol)'s root to the last bit, with the same evaluations (tests/evidence/test_interval_table.py)."""
    gen = brentq_steps(a, b, xtol)
    x = next(gen)
    while True:
        try:
            x = gen.send(f(x))
        except StopIteration as done:
            return done.value
