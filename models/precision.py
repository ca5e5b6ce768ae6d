"""Mixed precision for the training command (``--precision {f32,bf16,f16}``): the model's float32 parameters
stay the master copy that the optimizer updates (its state is float32 too); each step casts them, and the
inputs, to the compute dtype, runs forward and backward there, and takes the loss in float32. The gradients come
back in float32 through the cast's transpose. float16 also scales the loss (``DynamicLossScale``) so that small
gradients do not flush to zero, and skips the update of a step whose gradients overflow.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import flfun
import flfun.numpy as fnp
from flfun import dtypes, optim
from flfun.tree import register_dataclass, tree_leaves, tree_map

POLICIES = {"f32": dtypes.float32, "bf16": dtypes.bfloat16, "f16": dtypes.float16}   # --precision -> compute dtype


def cast_floats(tree: Any, dtype) -> Any:
    """``tree`` with its floating-point arrays cast to ``dtype`` (integer arrays, e.g. labels, as they are).

    Example::

        >>> cast_floats({"w": fnp.ones(2), "ids": fnp.arange(2)}, fnp.bfloat16)["w"].dtype
        dtype(bfloat16)
    """
    def cast(x):
        return x.astype(dtype) if isinstance(x, fnp.Array) and dtypes.is_float(x.dtype) else x
    return tree_map(cast, tree)


def in_compute_dtype(loss_fn: Callable, compute) -> Callable:
    """``loss_fn(model, x, y)`` evaluated with the model and ``x`` in ``compute``; the loss is float32."""
    if compute == dtypes.float32:
        return loss_fn

    def loss(model, x, y):
        return loss_fn(cast_floats(model, compute), cast_floats(x, compute), y).astype(dtypes.float32)
    return loss


@register_dataclass
@dataclasses.dataclass(frozen=True)
class DynamicLossScale:
    """The loss scale of float16 training: the loss is multiplied by ``scale`` before differentiation and the
    gradients divided by it. A step with non-finite gradients is skipped and halves the scale (not below 1);
    ``period`` finite steps in a row double it. A pytree, so it lives in the jitted step and in checkpoints.

    Example::

        >>> ls = DynamicLossScale.create(2.0 ** 15)
        >>> float(ls.adjust(fnp.asarray(False)).scale)
        16384.0
    """
    scale: Any              # float32 scalar
    good_steps: Any         # int32: finite steps since the scale last changed
    skipped: Any            # int32: steps skipped so far
    period: int = dataclasses.field(default=2000, metadata={"static": True})
    factor: float = dataclasses.field(default=2.0, metadata={"static": True})

    @classmethod
    def create(cls, initial: float = 2.0 ** 15, period: int = 2000, factor: float = 2.0) -> "DynamicLossScale":
        if not (initial >= 1 and period >= 1 and factor > 1):
            raise ValueError(f"DynamicLossScale: need initial >= 1, period >= 1 and factor > 1, got {initial}, "
                             f"{period} and {factor}")
        zero = fnp.zeros((), dtype=fnp.int32)
        return cls(fnp.asarray(initial, dtype=fnp.float32), zero, zero, int(period), float(factor))

    def unscale(self, grads):
        inverse = 1.0 / self.scale
        return tree_map(lambda g: g * inverse.astype(g.dtype), grads)

    def adjust(self, finite) -> "DynamicLossScale":
        """The scale after a step whose gradients were all finite (``finite``, a bool scalar) or not."""
        grow = finite & (self.good_steps + 1 >= self.period)
        scale = fnp.where(finite, fnp.where(grow, self.scale * self.factor, self.scale),
                          fnp.maximum(self.scale / self.factor, 1.0))
        good = fnp.where(finite & ~grow, self.good_steps + 1, 0).astype(fnp.int32)
        return dataclasses.replace(self, scale=scale, good_steps=good,
                                   skipped=self.skipped + (~finite).astype(fnp.int32))


def all_finite(tree):
    ok = fnp.asarray(True)
    for g in tree_leaves(tree):
        ok = ok & fnp.all(fnp.isfinite(g))
    return ok


def init_state(opt, model, precision: str):
    """The optimizer state for ``model`` (float32); with float16, paired with a fresh ``DynamicLossScale``."""
    state = opt.init(model)
    return (state, DynamicLossScale.create()) if precision == "f16" else state


def loss_scaled_step(loss_fn: Callable, opt) -> Callable:
    """The float16 training step ``(model, (opt_state, loss_scale), x, y) -> (model, state, loss)``: gradients of
    the scaled loss, unscaled; on overflow the model and optimizer state are kept and only the scale changes."""
    def step(model, state, x, y):
        opt_state, ls = state
        scaled, grads = flfun.value_and_grad(lambda m: loss_fn(m, x, y) * ls.scale)(model)
        grads = ls.unscale(grads)
        finite = all_finite(grads)
        updates, new_opt_state = opt.update(grads, opt_state, model)
        new_model = optim.apply_updates(model, updates)
        keep = lambda new, old: fnp.where(finite, new, old)   # noqa: E731
        return (tree_map(keep, new_model, model), (tree_map(keep, new_opt_state, opt_state), ls.adjust(finite)),
                scaled / ls.scale)
    return step


def report(opt_state, precision: str) -> dict:
    """What metrics.json says about the precision: the compute dtype and, for float16, the loss scale."""
    out = {"precision": precision, "compute_dtype": POLICIES[precision].name}
    if precision == "f16":
        ls = opt_state[1]
        out |= {"loss_scale": float(ls.scale), "loss_scale_skipped_steps": int(ls.skipped)}
    return out


__all__ = ["POLICIES", "DynamicLossScale", "cast_floats", "in_compute_dtype", "init_state", "loss_scaled_step",
           "report"]
