"""Matrix-decomposition impls against an array module ``xp`` (numpy and cupy both provide ``xp.linalg``)."""
from __future__ import annotations

from flfun.core import short


def impls(xp):
    la = xp.linalg

    def named(name, fn):
        """``fn`` whose LinAlgError (a singular or indefinite matrix, no convergence) names the operation."""
        def impl(*args, **params):
            try:
                return fn(*args, **params)
            except la.LinAlgError as e:
                raise la.LinAlgError(f"{name}: {e} (input {', '.join(map(short, args))})") from None
        return impl
    fns = {"cholesky": la.cholesky, "solve": la.solve, "eigh": lambda x: list(la.eigh(x)),
           "svd": lambda x, full_matrices: list(la.svd(x, full_matrices=full_matrices)),
           "qr": lambda x, full_matrices: list(la.qr(x, mode="complete" if full_matrices else "reduced")),
           "slogdet": lambda x: list(la.slogdet(x))}
    return {name: named(name, fn) for name, fn in fns.items()}
