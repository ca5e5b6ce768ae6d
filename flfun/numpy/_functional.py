"""Applying Python functions over arrays: ``vectorize`` (numpy's, with gufunc ``signature``), ``apply_along_axis``
and ``apply_over_axes``, ``fromfunction`` and ``piecewise``. The loops numpy runs in Python become ``vmap``s, so
``func`` is traced once and the whole stays differentiable and jittable (as in JAX)."""
import functools
import re

from flfun import dtypes
from flfun.core import short
from flfun.numpy._asarray import as_array, no_out
from flfun.numpy._creation import zeros
from flfun.numpy._elementwise import logical_not, logical_or, where
from flfun.lax_control import scan
from flfun.numpy._index_tricks import indices
from flfun.numpy._joining import concatenate
from flfun.numpy._shaping import broadcast_shapes, broadcast_to, expand_dims, moveaxis, reshape
from flfun.numpy.promotion import asarray_like
from flfun.transforms.vmap import vmap
from flfun.util import canonical_axis

__all__ = ["vectorize", "apply_along_axis", "apply_over_axes", "fromfunction", "piecewise"]

_ARG = r"\(([\w,\s]*)\)"


def _parse_signature(signature: str):
    """``'(m,n),(n)->(m)'`` as ``([('m', 'n'), ('n',)], [('m',)])``."""
    m = re.fullmatch(rf"\s*({_ARG}(\s*,\s*{_ARG})*)\s*->\s*({_ARG}(\s*,\s*{_ARG})*)\s*", signature)
    if not m:
        raise ValueError(f"vectorize: not a valid gufunc signature: {signature!r}")
    ins, outs = signature.split("->")
    core = [[tuple(d.strip() for d in g.split(",") if d.strip()) for g in re.findall(_ARG, side)]
            for side in (ins, outs)]
    return core[0], core[1]


def vectorize(pyfunc, *, excluded=frozenset(), signature: str | None = None):
    """``pyfunc`` applied across the leading (broadcast) dimensions of its array arguments, as numpy's
    ``vectorize``: elementwise without ``signature``, or over the core dimensions a gufunc signature such as
    ``'(n),(n)->()'`` names. Arguments in ``excluded`` (positions or names) pass through unchanged.

    Example::

        >>> fnp.vectorize(lambda a, b: fnp.dot(a, b), signature="(n),(n)->()")(fnp.ones((4, 3)), fnp.ones(3)).shape
        (4,)
    """
    ins, outs = _parse_signature(signature) if signature else (None, None)

    @functools.wraps(pyfunc)
    def wrapped(*args, **kwargs):
        fixed = {k: v for k, v in kwargs.items() if k in excluded}
        names = [k for k in kwargs if k not in excluded]
        pos = [i for i in range(len(args)) if i not in excluded]
        arrays = [asarray_like(args[i]) for i in pos] + [asarray_like(kwargs[k]) for k in names]
        cores = ins if ins is not None else [()] * len(arrays)
        if len(cores) != len(arrays):
            raise TypeError(f"vectorize: the signature {signature!r} has {len(cores)} inputs, got {len(arrays)}")
        for a, c in zip(arrays, cores):
            if a.ndim < len(c):
                raise ValueError(f"vectorize: argument {short(a)} has fewer dimensions than its core {c}")
        loop = broadcast_shapes(*[a.shape[:a.ndim - len(c)] for a, c in zip(arrays, cores)])
        arrays = [reshape(broadcast_to(a, loop + a.shape[a.ndim - len(c):]), (-1,) + a.shape[a.ndim - len(c):])
                  for a, c in zip(arrays, cores)]

        def call(*xs):
            full = list(args)
            for i, x in zip(pos, xs):
                full[i] = x
            return pyfunc(*full, **fixed, **dict(zip(names, xs[len(pos):])))
        out = vmap(call)(*arrays) if loop else call(*[a[0] for a in arrays])
        multi = isinstance(out, tuple)
        res = [o if loop else expand_dims(o, 0) for o in (out if multi else (out,))]
        res = [reshape(o, loop + o.shape[1:]) for o in res]
        if outs is not None and len(outs) != len(res):
            raise TypeError(f"vectorize: the signature {signature!r} has {len(outs)} outputs, got {len(res)}")
        return tuple(res) if multi else res[0]
    return wrapped


def apply_along_axis(func1d, axis: int, arr, *args, **kwargs):
    """``func1d`` applied to each 1-d slice of ``arr`` along ``axis``; its result's dimensions replace that axis.

    Example::

        >>> fnp.apply_along_axis(fnp.sum, 1, fnp.ones((2, 3))).tolist()
        [3.0, 3.0]
    """
    a = as_array(arr)
    axis = canonical_axis(axis, a.ndim, "apply_along_axis")
    def f(x):
        return func1d(x, *args, **kwargs)
    for _ in range(a.ndim - 1):
        f = vmap(f)
    out = f(moveaxis(a, axis, -1))
    nb = a.ndim - 1
    return moveaxis(out, tuple(range(nb, out.ndim)), tuple(range(axis, axis + out.ndim - nb)))


def apply_over_axes(func, a, axes):
    """``func(a, axis)`` for each axis in turn, the reduced axis kept as size 1 (as numpy)."""
    a = as_array(a)
    for ax in [axes] if isinstance(axes, int) else axes:
        out = func(a, ax)
        a = out if out.ndim == a.ndim else expand_dims(out, canonical_axis(ax, a.ndim, "apply_over_axes"))
        if a.ndim != out.ndim and a.ndim != out.ndim + 1:
            raise ValueError(f"apply_over_axes: func must keep or drop exactly axis {ax}, got {short(out)}")
    return a


def fromfunction(function, shape, *, dtype=float, **kwargs):
    """``function(*index_grids)`` over the index grid of ``shape``: ``fnp.fromfunction(lambda i, j: i + j, (2, 2))``."""
    dt = dtypes.DEFAULT_FLOAT if dtype is float else dtypes.canonicalize(dtype)
    return function(*[g.astype(dt) for g in indices(shape)], **kwargs)


def piecewise(x, condlist, funclist, *args, **kw):
    """``funclist[k](x)`` (or the constant ``funclist[k]``) where ``condlist[k]`` holds (a later condition wins);
    one extra function is the default where none holds, else 0. Every function sees all of ``x``.

    Example::

        >>> fnp.piecewise(fnp.asarray([-1.0, 2.0]), [fnp.asarray([True, False])], [lambda x: -x, lambda x: x * 10]).tolist()
        [1.0, 20.0]
    """
    x = asarray_like(x)
    conds = [asarray_like(c) for c in (condlist if isinstance(condlist, (list, tuple)) else [condlist])]
    if len(funclist) not in (len(conds), len(conds) + 1):
        raise ValueError(f"piecewise: {len(funclist)} functions for {len(conds)} conditions (need n or n + 1)")
    if len(funclist) == len(conds) + 1:
        none = logical_not(functools.reduce(logical_or, conds, zeros(x.shape, dtypes.bool_)))
        conds = conds + [none]
    out = zeros(x.shape, x.dtype)
    for c, f in zip(conds, funclist):
        value = f(x, *args, **kw) if callable(f) else f
        out = where(c, asarray_like(value).astype(x.dtype), out)
    return out


class ufunc:
    """A numpy-style universal function from a Python function of ``nin`` scalars (vectorised by
    :func:`vectorize`), with ``outer`` and, for binary ones, ``reduce`` and ``accumulate`` (a ``lax.scan`` over
    the axis) and a functional ``at`` (``inplace=False``; repeated indices apply once, unlike numpy).

    Example::

        >>> fnp.frompyfunc(lambda a, b: a * b + 1, 2, 1).reduce(fnp.asarray([1.0, 2.0, 3.0])).tolist()
        10.0
    """

    def __init__(self, func, /, nin: int, nout: int, *, name: str | None = None, nargs: int | None = None,
                 identity=None):
        self.func, self.nin, self.nout, self.identity = func, nin, nout, identity
        self.nargs = nin if nargs is None else nargs
        self.__name__ = name or getattr(func, "__name__", "ufunc")
        self._call = vectorize(func)

    def __repr__(self):
        return f"<flfun.numpy.ufunc '{self.__name__}'>"

    def __call__(self, *args):
        if len(args) != self.nin:
            raise TypeError(f"{self.__name__}: takes {self.nin} arguments, got {len(args)}")
        return self._call(*args)

    def outer(self, A, B):
        """``self(A[i...], B[j...])`` for every pair: the result has shape ``A.shape + B.shape``."""
        a, b = asarray_like(A), asarray_like(B)
        return self(reshape(a, a.shape + (1,) * b.ndim), b)

    def _scan(self, op, a, axis, initial):
        """``(start, last, running values)`` of ``func`` folded along ``axis`` of ``a`` (from ``initial``, else
        from the first slice)."""
        if self.nin != 2 or self.nout != 1:
            raise ValueError(f"{self.__name__}.{op}: only binary ufuncs with one output support {op}")
        x = as_array(a)
        x = moveaxis(x, canonical_axis(axis, x.ndim, op), 0)
        if initial is None and not x.shape[0]:
            raise ValueError(f"{self.__name__}.{op}: empty axis and no initial value")
        init = x[0] if initial is None else broadcast_to(asarray_like(initial).astype(x.dtype), x.shape[1:])
        return (init, *scan(lambda c, v: (self.func(c, v),) * 2, init, x[1:] if initial is None else x))

    def reduce(self, a, axis: int = 0, dtype=None, out=None, keepdims: bool = False, initial=None, where=None):
        """``func`` folded along ``axis``, left to right (from ``initial`` if given)."""
        if out is not None or where is not None:
            raise NotImplementedError(f"{self.__name__}.reduce: out= and where= are not supported")
        last = self._scan("reduce", a, axis, initial if initial is not None else self.identity)[1]
        return expand_dims(last, axis) if keepdims else last

    def accumulate(self, a, axis: int = 0, dtype=None, out=None):
        """The running fold along ``axis``: ``out[k] = func(out[k - 1], a[k])``."""
        no_out(f"{self.__name__}.accumulate", out)
        init, _, ys = self._scan("accumulate", a, axis, None)
        return moveaxis(concatenate([init[None], ys]), 0, axis)

    def at(self, a, indices, b=None, /, *, inplace: bool = True):
        """``a`` with ``a[indices]`` replaced by ``func(a[indices], b)``; pass ``inplace=False``."""
        if inplace:
            raise ValueError(f"{self.__name__}.at: flfun arrays are immutable; pass inplace=False")
        a = as_array(a)
        new = self(a[indices]) if b is None else self(a[indices], b)
        return a.at[indices].set(new)


def frompyfunc(func, /, nin: int, nout: int, *, identity=None) -> ufunc:
    """A :class:`ufunc` from a Python function: ``fnp.frompyfunc(lambda a, b: a + b, 2, 1, identity=0)``."""
    return ufunc(func, nin, nout, identity=identity)


__all__ += ["ufunc", "frompyfunc"]
