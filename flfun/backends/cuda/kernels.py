"""Generated cupy kernels for fused groups (``flfun.compiler.fusion``): one ``ElementwiseKernel`` per elementwise
group and one ``ReductionKernel`` per group with a reduction epilogue, built from ``lowering.kernel_source`` and
compiled by cupy on first launch. A kernel impl is ``impl(*inputs, out=None | tuple of buffers) -> list of
outputs``; missing output buffers are allocated."""
from __future__ import annotations

from collections.abc import Callable

from flfun.backends.cuda.lowering import kernel_source
from flfun.compiler.fusion import FusionGroup


def build(group: FusionGroup) -> Callable:
    """The cupy impl of ``group``'s fused equation."""
    import cupy as cp
    ks = kernel_source(group)
    reshape = [(k, s) for k, (v, s) in enumerate(zip(group.inputs, group.in_shapes)) if v.aval.shape != s]
    out_avals = [(v.aval.shape, v.aval.dtype) for v in group.outputs]

    def buffers(out) -> list:
        """The output buffers: ``out``'s where given, else new ones."""
        return [cp.empty(s, d) if out is None or out[j] is None else out[j] for j, (s, d) in enumerate(out_avals)]

    if group.reduction is None:
        kern = cp.ElementwiseKernel(ks.in_params, ks.out_params, ks.body, ks.name)

        def impl(*ins, out=None):
            if reshape:
                ins = list(ins)
                for k, s in reshape:
                    ins[k] = ins[k].reshape(s)
            outs = buffers(out)
            kern(*ins, *outs)
            return outs
        return impl

    kern = cp.ReductionKernel(ks.in_params, ks.out_params, ks.map_expr, ks.reduce_expr, ks.body, ks.identity,
                              ks.name, reduce_type=ks.reduce_type, preamble=ks.preamble)
    axes, shape = tuple(group.reduction.params["axes"]), group.shape

    def reduce_impl(*ins, out=None):
        ins = [cp.broadcast_to(x.reshape(s), shape) for x, s in zip(ins, group.in_shapes)]
        o, = buffers(out)
        kern(*ins, axis=axes, out=o)
        return [o]
    return reduce_impl


__all__ = ["build"]
