"""C for fused groups on the CPU: each ``FusionGroup`` (``flfun.compiler.fusion``) becomes one C function with
constant loop bounds and strides, its per-element code taken from the CUDA lowering (``kernel_source``: the same
C expressions, registered as every primitive's ``"cuda"`` lowering) and its outer loop split across OpenMP
threads.

A kernel is ``void name(const void *in0, ..., void *out0, ..., int nt)`` over C-contiguous buffers: input ``k``
is read with the strides of ``group.in_shapes[k]`` broadcast to ``group.shape`` (0 where it broadcasts), and dims
that every operand walks contiguously are merged first. A reduction epilogue keeps one accumulator per output
element (float32 sums accumulate in double), so every output element is computed by one thread in a fixed order:
results do not depend on the thread count.
"""
from __future__ import annotations

import numpy as np

from flfun.backends.cuda.lowering import C_TYPES, kernel_source
from flfun.compiler.fusion import FusionGroup

PRELUDE = """#include <math.h>
#include <stdbool.h>
#include <string.h>
static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
static inline double __longlong_as_double(long long i) { double f; memcpy(&f, &i, 8); return f; }
#define __device__ static
#if defined(__FMA__) || defined(__ARM_FEATURE_FMA)
#define FL_FMA(a, b, c) fmaf(a, b, c)
#else
#define FL_FMA(a, b, c) ((a) * (b) + (c))
#endif
/* float32 exp without libm, so that loops vectorize: n = round(x / ln 2) (the 1.5 * 2^23 trick), Cody-Waite
   r = x - n ln 2, Cephes' degree-7 minimax polynomial, then 2^n as two normal factors so that subnormal and
   overflowing results round once. About 1 ulp (1.001 at most seen) from the float64 result; NaN, +-inf as libm's. */
static inline float fl_expf(float x) {
  const float lo = x >= -104.0f ? x : -104.0f, xc = lo > 89.0f ? 89.0f : lo;   /* NaN -> -104: (int)n stays defined */
  const float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  const float r = FL_FMA(n, 2.12194440e-4f, FL_FMA(n, -0.693359375f, xc));
  float p = FL_FMA(1.9875691500e-4f, r, 1.3981999507e-3f);
  p = FL_FMA(FL_FMA(FL_FMA(p, r, 8.3334519073e-3f), r, 4.1665795894e-2f), r, 1.6666665459e-1f);
  p = FL_FMA(FL_FMA(p, r, 5.0000001201e-1f), r * r, r) + 1.0f;
  const int k = (int)n, k1 = k >> 1;
  const float y = p * __int_as_float((k1 + 127) << 23) * __int_as_float((k - k1 + 127) << 23);
  return x != x ? x + x : y;
}
/* float32 tanh: Cephes' odd polynomial below |x| = 0.625, 1 - 2 / (exp(2|x|) + 1) above, the sign of x
   (so tanh(-0) = -0); within 1.5 ulp. */
static inline float fl_tanhf(float x) {
  const float a = fabsf(x), z = a * a;
  float p = FL_FMA(FL_FMA(-5.70498872745e-3f, z, 2.06390887954e-2f), z, -5.37397155531e-2f);
  p = FL_FMA(FL_FMA(p, z, 1.33314422036e-1f), z, -3.33332819422e-1f);
  return x != x ? x + x : copysignf(a < 0.625f ? FL_FMA(p * z, a, a) : 1.0f - 2.0f / (fl_expf(2.0f * a) + 1.0f), x);
}
#define expf fl_expf
#define tanhf fl_tanhf
"""
PARALLEL_MIN = 1 << 14      # elements below which a kernel runs on the calling thread (a fork costs ~ 5 us)
BLOCK = 256                 # output columns one thread accumulates at a time in a column reduction


def strides(shape: tuple, in_shape: tuple) -> list[int]:
    """Element strides of a C-contiguous array of ``in_shape`` read at every index of ``shape`` (0 where it
    broadcasts; ``in_shape`` is aligned to the right, numpy-style)."""
    in_shape = (1,) * (len(shape) - len(in_shape)) + tuple(in_shape)
    out, step = [], 1
    for m in reversed(in_shape):
        out.append(step if m != 1 else 0)
        step *= m
    return out[::-1]


def loop_dims(shape: tuple, operand_strides: list[list[int]], reduced: set) -> list[tuple[int, list[int], bool]]:
    """``(size, stride of each operand, reduced?)`` per loop dim, outermost first: size-1 dims dropped and
    neighbours merged where every operand walks them as one (and both are reduced or both kept)."""
    dims = [(n, [s[d] for s in operand_strides], d in reduced) for d, n in enumerate(shape) if n != 1]
    merged: list = []
    for n, st, red in dims:
        if merged:
            pn, pst, pred = merged[-1]
            if pred == red and all(p == s * n for p, s in zip(pst, st)):
                merged[-1] = (pn * n, st, red)
                continue
        merged.append((n, st, red))
    return merged


def _index(ivars: list[str], sts: list[int]) -> str:
    terms = [v if s == 1 else f"{v} * {s}L" for v, s in zip(ivars, sts) if s]
    return " + ".join(terms) or "0"


def _loops(dims: list, names: list[str], indent: str) -> tuple[list[str], str]:
    lines = []
    for (n, _, _), v in zip(dims, names):
        lines.append(f"{indent}for (long {v} = 0; {v} < {n}L; ++{v})")
        indent += "  "
    return lines, indent


def _parallel(n_outer: int, work: int) -> str:
    if n_outer == 0:
        return ""
    collapse = f" collapse({n_outer})" if n_outer > 1 else ""
    cond = f"if(parallel: {work}L >= {PARALLEL_MIN}L)"      # (a bare if() would switch simd off too)
    return f"  #pragma omp parallel for num_threads(nt) schedule(static){collapse} {cond}"


def function_source(group: FusionGroup, fname: str) -> str:
    """The C function ``fname`` computing ``group`` (see the module docstring); a reduction group's helper
    function, named ``fname_map``, comes first."""
    ks = kernel_source(group)
    if group.reduction is not None:      # name the helper after fname: the source depends only on the group
        ks.preamble, ks.map_expr = (x.replace(group.name, fname) for x in (ks.preamble, ks.map_expr))
    ct = lambda v: C_TYPES[v.aval.dtype.name]
    params = [f"const void *in{k}_" for k in range(len(group.inputs))]
    params += [f"void *out{j}_" for j in range(len(group.outputs))] + ["int nt"]
    ptrs = [f"  const {ct(v)} *p{k} = (const {ct(v)} *)in{k}_;" for k, v in enumerate(group.inputs)]
    ptrs += [f"  {ct(v)} *q{j} = ({ct(v)} *)out{j}_;" for j, v in enumerate(group.outputs)]
    shape = tuple(group.shape)
    reduced = set(group.reduction.params["axes"]) if group.reduction is not None else set()
    kept_shape = tuple(1 if d in reduced else n for d, n in enumerate(shape))
    sts = [strides(shape, s) for s in group.in_shapes] + [strides(shape, kept_shape)]
    dims = loop_dims(shape, sts, reduced)
    total = int(np.prod(shape, dtype=np.int64))
    loads = lambda ivars: [f"const {ct(v)} in{k} = p{k}[{_index(ivars, [d[1][k] for d in dims])}];"
                           for k, v in enumerate(group.inputs)]
    out_index = lambda ivars: _index(ivars, [d[1][-1] for d in dims])
    head = [f"void {fname}({', '.join(params)}) {{", *ptrs]
    if group.reduction is None:
        iv = [f"i{d}" for d in range(len(dims))]
        lines, ind = _loops(dims, iv, "  ")
        decl = [f"{ct(v)} out{j};" for j, v in enumerate(group.outputs)]
        store = [f"q{j}[{out_index(iv)}] = out{j};" for j in range(len(group.outputs))]
        body = [f"{ind}{{"] + [f"{ind}  {s}" for s in loads(iv) + decl + ks.body.split("\n") + store] + [f"{ind}}}"]
        par = _parallel(max(len(dims) - 1, 1) if dims else 0, total)
        # no element depends on another (an output reuses an input's buffer only at the same index): vectorize
        # the innermost loop however many pointers the kernel has (gcc gives up on the alias checks otherwise)
        if len(dims) > 1:
            lines.insert(-1, lines[-1][:len(lines[-1]) - len(lines[-1].lstrip())] + "#pragma omp simd")
        elif par:
            par = par.replace("parallel for", "parallel for simd")
        return "\n".join(head + ([par] if par else []) + lines + body + ["}"]) + "\n"
    return ks.preamble + "\n".join(head + _reduction(group, ks, dims, loads, out_index, total) + ["}"]) + "\n"


def _accumulator(group: FusionGroup, reduce_type: str) -> str:
    """The accumulator's C type: double for float32 sums, else the output's type."""
    r = group.reduction
    return "double" if r.prim.name == "reduce_sum" and r.outputs[0].aval.dtype == np.float32 else reduce_type


def _reduction(group: FusionGroup, ks, dims: list, loads, out_index, total: int) -> list[str]:
    """The loop nest of a reduction group: row-wise (the innermost dim is reduced: one accumulator per output
    element) or column-wise (the innermost dim is kept: a block of ``BLOCK`` accumulators per thread)."""
    acc_t, rt = _accumulator(group, ks.reduce_type), ks.reduce_type
    kept = [d for d, (_, _, red) in enumerate(dims) if not red]
    red = [d for d, (_, _, r) in enumerate(dims) if r]
    iv = [f"i{d}" for d in range(len(dims))]
    def step(acc: str, ind: str) -> list[str]:
        """Fold one element into ``acc`` (``a`` and ``b`` are the names the reduction's expression combines)."""
        first = [] if acc == "a" else [f"{acc_t} a = {acc};"]
        return [f"{ind}{{", *(f"{ind}  {s}" for s in loads(iv) + first), f"{ind}  const {rt} b = {ks.map_expr};",
                f"{ind}  {acc} = ({acc_t})({ks.reduce_expr});", f"{ind}}}"]
    if dims and not dims[-1][2]:          # columns: the last dim is kept
        last, outer = kept[-1], kept[:-1]
        n_last = dims[last][0]
        lines = [_parallel(len(outer) + 1, total)]
        lines += _loops([dims[d] for d in outer], [iv[d] for d in outer], "  ")[0]
        ind = "  " + "  " * len(outer)
        lines += [f"{ind}for (long jb = 0; jb < {n_last}L; jb += {BLOCK}) {{",
                  f"{ind}  {acc_t} acc[{BLOCK}]; const long je = {n_last}L - jb < {BLOCK} ? {n_last}L - jb : {BLOCK};",
                  f"{ind}  for (long j = 0; j < je; ++j) acc[j] = {ks.identity};"]
        loops, ind2 = _loops([dims[d] for d in red], [iv[d] for d in red], ind + "  ")
        lines += loops + [f"{ind2}for (long j = 0; j < je; ++j) {{", f"{ind2}  const long {iv[last]} = jb + j;"]
        lines += step("acc[j]", ind2 + "  ") + [f"{ind2}}}"]
        lines += [f"{ind}  for (long j = 0; j < je; ++j) {{ const long {iv[last]} = jb + j; "
                  f"q0[{out_index(iv)}] = acc[j]; }}", f"{ind}}}"]
        return [x for x in lines if x]
    lines = [_parallel(len(kept), total)] if kept else []
    loops, ind = _loops([dims[d] for d in kept], [iv[d] for d in kept], "  ")
    lines += loops + [f"{ind}{{", f"{ind}  {acc_t} a = {ks.identity};"]
    inner, ind2 = _loops([dims[d] for d in red], [iv[d] for d in red], ind + "  ")
    if group.reduction.prim.name == "reduce_sum" and inner:
        inner[-1:-1] = [f"{ind2[:-2]}#pragma omp simd reduction(+:a)"]
    lines += inner + step("a", ind2) + [f"{ind}  q0[{out_index(iv)}] = a;", f"{ind}}}"]
    return [x for x in lines if x]


def library_source(groups: list[FusionGroup]) -> str:
    """One C file holding every group's kernel, named ``k0, k1, ...`` in order.

    Example::

        src = library_source([e.prim.group for e in fused.eqns if isinstance(e.prim, FusedPrimitive)])
    """
    return PRELUDE + "".join(function_source(g, f"k{i}") for i, g in enumerate(groups))


__all__ = ["PRELUDE", "function_source", "library_source", "loop_dims", "strides"]
