"""jax.lax's implicitly differentiated solvers, ``custom_root`` and ``custom_linear_solve``, and the special
functions ``betainc``, ``igamma_grad_a`` and ``random_gamma_grad``.

The solvers run the user's ``solve`` with the closures of ``f`` / ``matvec`` under ``stop_gradient`` and attach
the implicit-function derivative with correction terms whose value is zero: ``x + (d - stop_gradient(d))`` where
``d`` is a Newton step for the residual. Their derivative is the implicit one (exact at a root / solution), and
being built from ordinary ops it needs no rules of its own: closures over traced values, jvp, grad, vmap and jit all apply."""
from __future__ import annotations

from typing import Callable

from flfun.core import get_aval
from flfun.ir import eval_program
from flfun.primitives.elementwise import stop_gradient
from flfun import numpy as fnp
from flfun.numpy.promotion import to_float
from flfun.scipy.special import betainc as _betainc, gammainc as _gammainc, gammaln as _gammaln
from flfun.transforms.jvp import jvp
from flfun.transforms.subprogram import strong, trace_body
from flfun.tree import tree_flatten, tree_map, tree_unflatten


def _sg(tree):
    return tree_map(stop_gradient, tree)


def _closure_stopped(f: Callable, example) -> Callable:
    """``f`` (traced once at ``example``'s avals) with the values it closes over under ``stop_gradient``: derivatives
    in its argument pass, derivatives through its closure (the differentiated parameters) do not."""
    leaves, tree = tree_flatten(example)
    out_trees = []

    def flat(*xs):
        outs, out_tree = tree_flatten(f(tree_unflatten(tree, list(xs))))
        out_trees.append(out_tree)
        return outs
    closed, captured = trace_body(flat, [strong(get_aval(x)) for x in leaves])
    captured = [stop_gradient(c) for c in captured]
    return lambda x: tree_unflatten(out_trees[0], eval_program(closed.program, closed.consts,
                                                               captured + tree_flatten(x)[0]))


def _correction(x, d):
    """``x`` in value, with the derivative of ``d`` (whose value is ~0)."""
    return tree_map(lambda xi, di: xi + (di - stop_gradient(di)), x, d)


def custom_root(f: Callable, initial_guess, solve: Callable, tangent_solve: Callable, has_aux: bool = False):
    """The root ``x`` of ``f`` found by ``solve(f, initial_guess)``, differentiated implicitly: ``dx = -J^-1 df``
    with ``J = df/dx`` at the root, applied by ``tangent_solve(g, y)`` (``g`` the linear map ``v -> J v``), so
    no derivative flows through ``solve``'s iterations (which may be a ``while_loop``). ``f`` may close over the
    values being differentiated. Two zero-valued Newton corrections give exact derivatives up to third order;
    ``tangent_solve`` must itself be differentiable (a direct solve). With ``has_aux``, ``solve`` returns
    ``(root, aux)`` and ``aux`` gets no derivative.

    Example::

        >>> sqrt = lambda a: lax.custom_root(lambda x: x ** 2 - a, 1.0, newton, lambda g, y: y / g(1.0))
        >>> fl.grad(sqrt)(4.0)    # 1 / (2 sqrt(4))
        Array(0.25)
    """
    out = solve(_closure_stopped(f, initial_guess), _sg(initial_guess))
    root, aux = out if has_aux else (out, None)
    root = _sg(root)
    for _ in range(2):      # Newton steps on the derivatives: exact to first, then third order
        step = tangent_solve(lambda v, x=root: jvp(f, (x,), (v,))[1], f(root))
        root = _correction(root, tree_map(lambda d: -d, step))
    return (root, _sg(aux)) if has_aux else root


def custom_linear_solve(matvec: Callable, b, solve: Callable, transpose_solve: Callable | None = None,
                        symmetric: bool = False, has_aux: bool = False):
    """``x = solve(matvec, b)`` for the linear map ``matvec``, differentiated implicitly: ``dx = A^-1 (db - dA x)``,
    the inverse applied by ``solve`` (with ``matvec``'s closure stopped) to the residual ``b - matvec(x)``, whose
    value is zero; two such corrections give exact first and second derivatives. Reverse mode differentiates
    ``solve`` in its right-hand side only, which for a linear solver is linear: it needs ``solve`` made of
    differentiable ops (direct solves, ``fori_loop``/``scan`` iterations), not a ``while_loop``.
    ``transpose_solve`` and ``symmetric`` are accepted for JAX compatibility and not needed.

    Example::

        >>> a = fnp.asarray([[2.0, 1.0], [1.0, 3.0]])
        >>> solve = lambda mv, rhs: fnp.linalg.solve(fl.jacfwd(mv)(rhs), rhs)      # materialise the map
        >>> fl.grad(lambda s: lax.custom_linear_solve(lambda v: s * (a @ v), fnp.ones(2), solve).sum())(1.0)
        Array(-0.6)
    """
    del transpose_solve, symmetric
    stopped = _closure_stopped(matvec, b)
    first = lambda out: out[0] if has_aux else out
    out = solve(stopped, _sg(b))
    x = _sg(first(out))
    for _ in range(2):
        x = _correction(x, first(solve(stopped, tree_map(lambda bi, ai: bi - ai, b, matvec(x)))))
    return (x, _sg(out[1])) if has_aux else x


def betainc(a, b, x):
    """The regularised incomplete beta ``I_x(a, b)`` (``flfun.scipy.special.betainc``).

    Example::

        >>> round(float(lax.betainc(2.0, 3.0, 0.4)), 4)
        0.5248
    """
    return _betainc(a, b, x)


def igamma_grad_a(a, x):
    """``d/da`` of the regularised lower incomplete gamma ``P(a, x)`` (``igamma``), by forward mode.

    Example::

        >>> round(float(lax.igamma_grad_a(2.0, 1.5)), 4)
        -0.3135
    """
    a, x = fnp.broadcast_arrays(to_float(fnp.asarray(a)), to_float(fnp.asarray(x)))
    return jvp(lambda a: _gammainc(a, x), (a,), (fnp.ones_like(a),))[1]


def random_gamma_grad(a, x):
    """``dx/da`` of a Gamma(``a``, 1) sample ``x`` held at a fixed CDF level (implicit reparameterisation:
    ``-(dP/da) / (dP/dx)``), the derivative ``flfun.random.gamma`` samples need.

    Example::

        >>> round(float(lax.random_gamma_grad(2.0, 1.5)), 4)
        0.9366
    """
    a, x = fnp.broadcast_arrays(to_float(fnp.asarray(a)), to_float(fnp.asarray(x)))
    density = fnp.exp((a - 1.0) * fnp.log(x) - x - _gammaln(a))
    return -igamma_grad_a(a, x) / density


__all__ = ["betainc", "custom_linear_solve", "custom_root", "igamma_grad_a", "random_gamma_grad"]
