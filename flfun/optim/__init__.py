"""``flfun.optim``: functional optimisers (optax-style ``init`` / ``update`` pairs) and learning-rate schedules.

An optimiser is a ``GradientTransformation``: ``state = opt.init(params)``, then
``updates, state = opt.update(grads, state, params)`` and ``params = apply_updates(params, updates)``. Everything
is built from flfun.numpy, so a whole training step (loss, grad, update) can be jitted. Transformations compose
with ``chain`` (e.g. gradient clipping before AdamW). SGD, Adam and AdamW follow PyTorch's update formulas.
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from flfun import numpy as fnp
from flfun.lax import convert_element_type as _cast
from flfun.optim.transformation import GradientTransformation
from flfun.tree import tree_leaves, tree_map, tree_structure

Schedule = Callable[[Any], Any]
ScalarOrSchedule = float | Schedule


class EmptyState(NamedTuple):
    """The state of a stateless transformation."""


class SgdState(NamedTuple):
    count: Any
    momentum: Any


class AdamState(NamedTuple):
    count: Any
    mu: Any
    nu: Any


class ChainState(NamedTuple):
    states: tuple


def _check_positive(fn: str, allow_zero: bool = True, **values) -> None:
    for name, value in values.items():
        if not callable(value) and (not isinstance(value, numbers.Real) or isinstance(value, bool) or value < 0
                                    or (not allow_zero and value == 0)):
            raise ValueError(f"{fn}: {name} must be a {'non-negative' if allow_zero else 'positive'} number, "
                             f"got {value!r}")


def _lr(learning_rate: ScalarOrSchedule, count):
    return learning_rate(count) if callable(learning_rate) else learning_rate


def _as(x, dtype):
    return x if x.dtype == dtype else _cast(x, dtype)


def apply_updates(params, updates):
    """``params + updates`` leafwise, keeping each parameter's dtype.

    Example::

        >>> params = apply_updates({"w": fnp.ones(2)}, {"w": fnp.full(2, -0.5)})
    """
    return tree_map(lambda p, u: _as(p + u, p.dtype), params, updates)


def global_norm(tree) -> Any:
    """The L2 norm of all leaves together: ``sqrt(sum_i sum(leaf_i ** 2))``.

    Example::

        >>> float(global_norm({"a": fnp.asarray([3.0]), "b": fnp.asarray([4.0])}))
        5.0
    """
    return fnp.sqrt(sum((fnp.sum(g * g) for g in tree_leaves(tree)), 0.0))   # 0.0 is weak: the leaves' dtype


# --------------------------------------------------------------------------------------------- transforms
def sgd(learning_rate: ScalarOrSchedule, momentum: float = 0.0, nesterov: bool = False,
        weight_decay: float = 0.0) -> GradientTransformation:
    """Stochastic gradient descent as ``torch.optim.SGD`` (dampening 0): ``g += wd p; b = m b + g;
    p -= lr (g + m b if nesterov else b)``.

    Example::

        >>> opt = sgd(0.1, momentum=0.9, nesterov=True)
    """
    _check_positive("sgd", learning_rate=learning_rate, momentum=momentum, weight_decay=weight_decay)
    if nesterov and momentum == 0:
        raise ValueError("sgd: nesterov=True needs a positive momentum")

    def init(params):
        return SgdState(fnp.zeros((), dtype=fnp.int32), tree_map(fnp.zeros_like, params) if momentum else None)

    def update(grads, state, params=None):
        if weight_decay:
            _need_params(params, "sgd (weight_decay)")
            grads = tree_map(lambda g, p: g + weight_decay * p, grads, params)
        buf = state.momentum
        if momentum:
            buf = tree_map(lambda b, g: momentum * b + g, buf, grads)
            grads = tree_map(lambda g, b: g + momentum * b, grads, buf) if nesterov else buf
        lr = _lr(learning_rate, state.count)
        return tree_map(lambda g: -lr * g, grads), SgdState(state.count + 1, buf)

    return GradientTransformation(init, update)


def _need_params(params, fn: str) -> None:
    if params is None:
        raise ValueError(f"{fn}: update needs params (call opt.update(grads, state, params))")


def _decay_mask(mask, params):
    if mask is None:
        return tree_map(lambda _: True, params)
    m = mask(params) if callable(mask) else mask
    if tree_structure(m) != tree_structure(params):
        raise ValueError(f"adamw: mask must have the structure of params, got {tree_structure(m)} for "
                         f"{tree_structure(params)}")
    return m


def adamw(learning_rate: ScalarOrSchedule = 1e-3, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
          weight_decay: float = 0.01, mask=None) -> GradientTransformation:
    """Adam with decoupled weight decay, exactly ``torch.optim.AdamW``'s formula (t counts from 1)::

        p <- p (1 - lr wd);  m <- b1 m + (1 - b1) g;  v <- b2 v + (1 - b2) g^2
        p <- p - lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)

    ``mask`` (a pytree of bools like params, or a function of params giving one) limits the decay to some
    leaves; by default every parameter decays, as in torch.

    Example::

        >>> opt = adamw(3e-4, weight_decay=0.01)
        >>> state = opt.init(params)
    """
    _check_positive("adamw", learning_rate=learning_rate, weight_decay=weight_decay, eps=eps)
    for name, b in (("b1", b1), ("b2", b2)):
        if not 0.0 <= b < 1.0:
            raise ValueError(f"adamw: {name} must be in [0, 1), got {b!r}")

    def init(params):
        return AdamState(fnp.zeros((), dtype=fnp.int32), tree_map(fnp.zeros_like, params),
                         tree_map(fnp.zeros_like, params))

    def update(grads, state, params=None):
        count = state.count + 1
        # the bias corrections in float64 when a parameter is float64, else float32 (the hot case)
        ftype = fnp.float64 if any(g.dtype == fnp.float64 for g in tree_leaves(grads)) else fnp.float32
        t = _cast(count, ftype)
        mu = tree_map(lambda m, g: b1 * m + (1.0 - b1) * g, state.mu, grads)
        nu = tree_map(lambda v, g: b2 * v + (1.0 - b2) * (g * g), state.nu, grads)
        lr = _lr(learning_rate, state.count)
        step_size = lr / (1.0 - fnp.power(ftype.type(b1), t))
        bc2_sqrt = fnp.sqrt(1.0 - fnp.power(ftype.type(b2), t))
        updates = tree_map(lambda m, v: -step_size * m / (fnp.sqrt(v) / bc2_sqrt + eps), mu, nu)
        if weight_decay:
            _need_params(params, "adamw")
            updates = tree_map(lambda u, p, on: u - (lr * weight_decay) * p if on else u, updates, params,
                               _decay_mask(mask, params))
        return tree_map(lambda u, g: _as(u, g.dtype), updates, grads), AdamState(count, mu, nu)

    return GradientTransformation(init, update)


def adam(learning_rate: ScalarOrSchedule = 1e-3, b1: float = 0.9, b2: float = 0.999,
         eps: float = 1e-8) -> GradientTransformation:
    """Adam (``torch.optim.Adam`` without weight decay): ``adamw`` with ``weight_decay=0``.

    Example::

        >>> opt = adam(1e-3)
    """
    return adamw(learning_rate, b1, b2, eps, weight_decay=0.0)


def clip_by_global_norm(max_norm: float) -> GradientTransformation:
    """Scale all gradients by ``min(1, max_norm / (global_norm + 1e-6))`` (``torch.nn.utils.clip_grad_norm_``).

    Example::

        >>> opt = chain(clip_by_global_norm(1.0), adamw(3e-4))
    """
    _check_positive("clip_by_global_norm", False, max_norm=max_norm)

    def update(grads, state, params=None):
        coef = fnp.minimum(max_norm / (global_norm(grads) + 1e-6), 1.0)
        return tree_map(lambda g: _as(g * coef, g.dtype), grads), state

    return GradientTransformation(lambda params: EmptyState(), update)


def chain(*transforms: GradientTransformation) -> GradientTransformation:
    """Apply ``transforms`` in order, each to the previous one's updates.

    Example::

        >>> opt = chain(clip_by_global_norm(1.0), sgd(0.1, momentum=0.9))
    """
    for i, t in enumerate(transforms):
        if not isinstance(t, GradientTransformation):
            raise ValueError(f"chain: argument {i} is not a GradientTransformation: {t!r:.60}")

    def update(grads, state, params=None):
        new_states = []
        for t, s in zip(transforms, state.states):
            grads, s = t.update(grads, s, params)
            new_states.append(s)
        return grads, ChainState(tuple(new_states))

    return GradientTransformation(lambda params: ChainState(tuple(t.init(params) for t in transforms)), update)


# ---------------------------------------------------------------------------------------------- schedules
def _step_f32(step):
    return _cast(fnp.asarray(step), fnp.float32)


def constant_schedule(value: float) -> Schedule:
    """``lambda step: value``.

    Example::

        >>> sched = constant_schedule(0.1)
    """
    return lambda step: fnp.full((), value, dtype=fnp.float32)


def warmup_cosine_schedule(peak_value: float, warmup_steps: int, decay_steps: int, init_value: float = 0.0,
                           end_value: float = 0.0) -> Schedule:
    """Linear warm-up from ``init_value`` to ``peak_value`` over ``warmup_steps``, then a cosine decay to
    ``end_value`` at step ``decay_steps`` (the total), constant after that.

    Example::

        >>> sched = warmup_cosine_schedule(3e-4, warmup_steps=100, decay_steps=1000)
        >>> opt = adamw(sched)
    """
    if warmup_steps < 0 or decay_steps <= warmup_steps:
        raise ValueError(f"warmup_cosine_schedule: need 0 <= warmup_steps < decay_steps, got warmup_steps="
                         f"{warmup_steps}, decay_steps={decay_steps}")

    def schedule(step):
        s = _step_f32(step)
        warm = init_value + (peak_value - init_value) * s / float(max(warmup_steps, 1))
        frac = fnp.clip((s - warmup_steps) / float(decay_steps - warmup_steps), 0.0, 1.0)
        cos = end_value + (peak_value - end_value) * 0.5 * (1.0 + fnp.cos(math.pi * frac))
        return fnp.where(s < warmup_steps, warm, cos)

    return schedule


def step_schedule(init_value: float, step_size: int, gamma: float = 0.1) -> Schedule:
    """``init_value * gamma ** (step // step_size)`` (``torch.optim.lr_scheduler.StepLR``).

    Example::

        >>> sched = step_schedule(0.1, step_size=30, gamma=0.1)
    """
    if not isinstance(step_size, numbers.Integral) or step_size <= 0:
        raise ValueError(f"step_schedule: step_size must be a positive int, got {step_size!r}")

    def schedule(step):
        k = fnp.floor(_step_f32(step) / float(step_size))
        return init_value * fnp.power(np.float32(gamma), k)

    return schedule


__all__ = ["AdamState", "ChainState", "EmptyState", "GradientTransformation", "SgdState", "adam", "adamw",
           "apply_updates", "chain", "clip_by_global_norm", "constant_schedule", "global_norm", "sgd",
           "step_schedule", "warmup_cosine_schedule"]

from flfun.optim.sharded import ShardedState, sharded, state_bytes_per_device  # noqa: F401  (ZeRO-1)
