"""Matrix-decomposition impls against an array module ``xp`` (numpy and cupy both provide ``xp.linalg``)."""
from __future__ import annotations


def impls(xp):
    la = xp.linalg
    return {"cholesky": la.cholesky, "solve": la.solve, "eigh": lambda x: list(la.eigh(x)),
            "svd": lambda x: list(la.svd(x, full_matrices=False)), "qr": lambda x: list(la.qr(x)),
            "slogdet": lambda x: list(la.slogdet(x))}
