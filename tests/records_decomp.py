"""Op-table records for the matrix decompositions (cholesky, eigh, svd, qr, solve, slogdet) and the
flfun.numpy.linalg functions built on them, in real and complex dtypes. Each fn builds a well-conditioned matrix
from its argument (entries in [-1, 1] plus a diagonal spread 10, 20, 30, ..., or ``a a^H + I``), so eigen /
singular values stay distinct and away from zero, and returns sign- and phase-invariant quantities (``v conj(v)``;
``u vh``; Q and R with a positive diagonal of R) so that the results are unique and finite differences well
defined. The gauge-dependent raw vectors are compared with JAX in ``test_linalg_complex.py``."""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from op_table import COMPLEX, FLOATS, OpRecord

import flfun.numpy as fnp
from flfun.primitives import decomp
from flfun.testing import arrays, shapes


def _mats(square=True, tall=None, rhs=False):
    """A stack of m x n matrices (square; any shape; tall m >= n; wide m < n) and, with ``rhs``, a right-hand side
    (..., m, k)."""
    def strat(dtype):
        @st.composite
        def draw(draw):
            batch = draw(shapes(max_dims=1, max_side=2))
            m = draw(st.integers(1 if tall is not False else 2, 3))
            n = m if square else draw(st.integers(1, m) if tall else st.integers(m + 1, 4) if tall is False
                                      else st.integers(1, 3))
            a = draw(arrays(dtype, batch + (m, n), low=-1, high=1))
            b = (draw(arrays(dtype, batch + (m, draw(st.integers(1, 2))))),) if rhs else ()
            return (a,) + b, {}
        return draw()
    return strat


def _spread(ns, a, sign=1.0):
    m, n = a.shape[-2:]
    d = ns.asarray([10.0 * (j + 1) * sign ** j for j in range(n)], dtype=a.dtype)
    return a + ns.eye(m, n, dtype=a.dtype) * d


def _H(ns, a):
    return ns.conj(ns.matrix_transpose(a))


def _sym(ns, a):
    return _spread(ns, (a + _H(ns, a)) * 0.5)


def _spd(ns, a):
    return a @ _H(ns, a) + ns.eye(a.shape[-1], dtype=a.dtype)


def _eigh(ns, eigh):
    def fn(a):
        w, v = eigh(_sym(ns, a))
        return w, v * ns.conj(v)
    return fn


def _svd(ns, svd):
    def fn(a):
        u, s, vh = svd(_spread(ns, a))
        return s, u * ns.conj(u), vh * ns.conj(vh), u @ vh
    return fn


def _qr(ns, qr):
    def fn(a):     # (LAPACK's, and the jvp's, R has a real diagonal)
        q, r = qr(_spread(ns, a))
        d = ns.sign(ns.real(ns.linalg.diagonal(r) if ns is fnp else ns.diagonal(r, axis1=-2, axis2=-1)))
        return q * d[..., None, :], r * d[..., :, None]
    return fn


def _gram(ns, q):
    return _H(ns, q) @ q


def _full_svd(ns, svd):
    """Invariants of the full SVD: the reconstruction from the first k columns / rows, u^T u, vh vh^T, s."""
    def fn(a):
        u, s, vh = svd(a)
        k = s.shape[-1]
        return (u[..., :k] * s[..., None, :]) @ vh[..., :k, :], _gram(ns, u), _gram(ns, ns.matrix_transpose(vh)), s
    return fn


def _complete_qr(ns, qr):
    """Invariants of the complete QR: q r, q^T q, the part of r below the diagonal."""
    def fn(a):
        q, r = qr(a)
        return q @ r, _gram(ns, q), ns.tril(r, -1)
    return fn


_np_svd = lambda x: np.linalg.svd(x, full_matrices=False)
_TOL = {"atol": 1e-4, "rtol": 1e-4, "dtypes": FLOATS + COMPLEX}
RECORDS = [
    OpRecord("cholesky", lambda a: decomp.cholesky(_spd(fnp, a)), lambda a: np.linalg.cholesky(_spd(np, a)),
             _mats(), **_TOL),
    OpRecord("eigh", _eigh(fnp, decomp.eigh), _eigh(np, np.linalg.eigh), _mats(), **_TOL),
    OpRecord("svd", _svd(fnp, decomp.svd), _svd(np, _np_svd), _mats(square=False), **_TOL),
    OpRecord("qr", _qr(fnp, decomp.qr), _qr(np, np.linalg.qr), _mats(square=False, tall=True), **_TOL),
    OpRecord("qr", _qr(fnp, decomp.qr), _qr(np, np.linalg.qr), _mats(square=False, tall=False), diff=False,
             name="qr_wide", **_TOL),
    OpRecord("svd", _full_svd(fnp, lambda x: decomp.svd(x, full_matrices=True)), _full_svd(np, np.linalg.svd),
             _mats(square=False), diff=False, name="svd_full", **_TOL),
    OpRecord("qr", _complete_qr(fnp, lambda x: decomp.qr(x, full_matrices=True)),
             _complete_qr(np, lambda x: np.linalg.qr(x, mode="complete")), _mats(square=False), diff=False,
             name="qr_complete", **_TOL),
    OpRecord("solve", lambda a, b: decomp.solve(_spread(fnp, a), b), lambda a, b: np.linalg.solve(_spread(np, a), b),
             _mats(rhs=True), **_TOL),
    OpRecord("slogdet", lambda a: decomp.slogdet(_spread(fnp, a, -1.0)),
             lambda a: tuple(np.linalg.slogdet(_spread(np, a, -1.0))), _mats(), **_TOL),
    OpRecord("slogdet", lambda a: fnp.linalg.det(_spread(fnp, a, -1.0)) / 1e3,
             lambda a: np.linalg.det(_spread(np, a, -1.0)) / 1e3, _mats(), name="linalg.det", **_TOL),
    OpRecord("solve", lambda a: fnp.linalg.inv(_spread(fnp, a)), lambda a: np.linalg.inv(_spread(np, a)), _mats(),
             name="linalg.inv", **_TOL),
    OpRecord("svd", lambda a: fnp.linalg.pinv(_spread(fnp, a)), lambda a: np.linalg.pinv(_spread(np, a)),
             _mats(square=False), name="linalg.pinv", **_TOL),
]
