"""The heart of flfun: abstract values, primitives, the trace stack and ``bind``.

Every operation is ``bind(primitive, *arrays, **params)``. With no transform active, ``bind`` checks shapes with
the primitive's abstract-eval rule and calls the impl registered for the operands' backend (the eager path).
Otherwise it hands the primitive to the innermost active trace (jvp, vmap, staging, ...), which applies the
primitive's rule for that transform. Levels on a stack keep nested transforms apart (as in JAX's autodidax).
"""
from __future__ import annotations

import itertools
import threading
from typing import Any, Callable

import numpy as np

from flfun import dtypes
from flfun.array import Array


# --------------------------------------------------------------------------------------------- abstract values
_DTYPE_TYPES = frozenset(type(d) for d in dtypes.SUPPORTED)


class ShapedArray:
    """What a transform knows about an array: its shape, dtype and whether it is a weak Python scalar."""
    __slots__ = ("shape", "dtype", "weak_type")

    def __init__(self, shape, dtype, weak_type: bool = False):
        self.shape = shape if type(shape) is tuple else tuple(int(d) for d in shape)
        self.dtype = dtype if type(dtype) in _DTYPE_TYPES else np.dtype(dtype)
        self.weak_type = weak_type

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: int(np.prod(self.shape, dtype=np.int64)))
    nbytes = property(lambda self: self.size * self.dtype.itemsize)

    def update(self, shape=None, dtype=None, weak_type=None) -> "ShapedArray":
        return ShapedArray(self.shape if shape is None else shape, self.dtype if dtype is None else dtype,
                           self.weak_type if weak_type is None else weak_type)

    def str_short(self) -> str:
        return short(self)

    def __eq__(self, other):
        return (type(other) is ShapedArray and self.shape == other.shape and self.dtype == other.dtype
                and self.weak_type == other.weak_type)

    def __hash__(self):
        return hash((self.shape, self.dtype, self.weak_type))

    def __repr__(self):
        return f"ShapedArray({self.str_short()}{', weak' if self.weak_type else ''})"


def short(x) -> str:
    """Short description of anything with shape and dtype: ``f32[3,4]``."""
    return f"{dtypes.short_name(x.dtype)}[{','.join(map(str, x.shape))}]"


def is_weak(x) -> bool:
    """Whether ``x`` is a weakly typed value (a Python scalar, or an aval/tracer marked weak)."""
    t = type(x)
    if t is ShapedArray:
        return x.weak_type
    if t is np.ndarray or t is Array or isinstance(x, np.generic):
        return False
    return t in (int, float, bool, complex) or getattr(x, "weak_type", False)


def get_aval(x) -> ShapedArray:
    """The abstract value of an Array, Tracer, numpy array or Python scalar."""
    t = type(x)
    if t is Array:
        v = x._value
        return ShapedArray(v.shape, v.dtype)
    if isinstance(x, Tracer):
        return x.aval
    if t in (int, float, bool, complex):
        return ShapedArray((), dtypes.scalar_dtype(x), weak_type=True)
    if hasattr(x, "shape") and hasattr(x, "dtype"):
        return ShapedArray(x.shape, x.dtype)
    raise TypeError(f"{type(x).__name__} is not a valid flfun array type: {x!r:.80}")


# --------------------------------------------------------------------------------------------------- primitives
PRIMITIVES: dict[str, "Primitive"] = {}
_registry_version = itertools.count(1)
registry_version = 0


_FACTS = ("inplace", "collective", "elementwise", "linear_in", "identities", "value_preserving", "involution", "chain")


def _setter(slot: str) -> Callable:
    """A ``Primitive.def_<slot>`` decorator method."""
    def define(self, fn: Callable) -> Callable:
        setattr(self, slot, fn)
        return fn
    return define


class Primitive:
    """One operation and all of its rules and facts, each a slot set in the primitive's own block.

    ``abstract_eval(*avals, **params)`` is the shape/dtype rule (it raises the clear errors); ``impls`` maps a
    backend name to ``fn(*buffers, **params)`` (``writes_out``: the backends whose impl takes ``out=``, declared
    by ``register_impl``); ``jvp``, ``transpose`` and ``batch`` are the transform rules. The facts:
    ``inplace`` lists operand indices whose buffer the output may overwrite when the operand dies here;
    ``linear_in`` the operands it is linear in given the others (``"all"``; the eager tape transposes those);
    ``elementwise``: it broadcasts like numpy, elementwise; ``identities``: ``(k, value)`` pairs where operand
    ``k`` equal to ``value`` makes the result the other operand; ``value_preserving``: a uniform operand gives a
    uniform result of the same value; ``chain(inner_params, outer_params)``: the params of one application
    equal to two in a row (``involution``: two in a row are the identity). Facts may also be given as keywords
    (``Primitive("neg", linear_in="all", involution=True)``). Defining a name that exists is an error unless
    ``replace=True``.

    Example::

        square_p = Primitive("square")
        square_p.def_abstract_eval(lambda x: ShapedArray(x.shape, x.dtype))
        register_impl(square_p, "numpy", lambda x: x * x)
        square_p.def_jvp(lambda primals, tangents: (square(primals[0]), 2 * primals[0] * tangents[0]))
    """

    def __init__(self, name: str, *, multiple_results: bool = False, replace: bool = False, **facts):
        if name in PRIMITIVES and not replace:
            raise ValueError(f"Primitive({name!r}): a primitive with this name exists; pass replace=True to "
                             f"replace it")
        self.name, self.multiple_results = name, multiple_results
        self.impls: dict[str, Callable] = {}
        self.writes_out: set[str] = set()  # backends whose impl accepts out= (see register_impl)
        self.out_impls: list[Callable] = []  # impls ever declared writes_out=True (re-registering one keeps it)
        self.abstract_eval = self.jvp = self.transpose = self.batch = None   # the rules: Callable | None
        self.inplace: tuple[int, ...] = ()
        self.collective = False   # collectives name mapped axes in params["axes"]
        self.elementwise = False  # broadcasting elementwise (the eager tape and the passes use this)
        self.elementwise_tangent: Callable | None = None  # unary elementwise: tangent(t, x, out), diagonal J
        self.lowerings: dict[str, Callable] = {}  # compiler target -> lowering rule (see register_lowering)
        self.linear_in: tuple[int, ...] | str | None = None
        self.identities: tuple[tuple[int, object], ...] = ()
        self.value_preserving = self.involution = False
        self.chain: Callable | None = None
        if set(facts) - set(_FACTS):
            raise TypeError(f"Primitive({name!r}): unknown facts {sorted(set(facts) - set(_FACTS))}; the facts are "
                            f"{', '.join(_FACTS)}")
        for k, v in facts.items():
            setattr(self, k, v)
        PRIMITIVES[name] = self

    def bind(self, *args, **params):
        return bind(self, *args, **params)

    def def_jvp(self, fn: Callable) -> Callable:
        self.jvp = fn
        self.elementwise_tangent = None  # a derived shortcut must never outlive the rule it came from
        return fn

    def_abstract_eval, def_transpose, def_batch = _setter("abstract_eval"), _setter("transpose"), _setter("batch")

    def __repr__(self):
        return self.name


def _is_ufunc(fn) -> bool:
    return type(fn).__name__ == "ufunc" and getattr(fn, "nout", 1) == 1


def register_impl(prim: Primitive, backend: str, fn: Callable | None,
                  writes_out: bool | None = None) -> Callable | None:
    """Install ``fn`` as ``prim``'s implementation on ``backend``; returns the previous one (or ``None``).

    ``writes_out=True`` declares that ``fn`` takes an ``out=`` buffer to write its result into (jit's memory
    plan then hands it one); the default (``None``) keeps an earlier declaration of this ``fn`` and otherwise
    declares it for single-output ufuncs (numpy's or cupy's) only: a wrapper ``def f(*a, **k)`` gets no ``out=``.
    Every transform (eager, grad, vmap, jit, pmap) uses the new impl from the next call on, because they all
    evaluate primitives through this registry; jit caches are keyed on the registry version.

    Example::

        old = register_impl(primitives.get("add"), "numpy", lambda x, y, out=None: np.add(x, y, out=out),
                            writes_out=True)
    """
    global registry_version
    if not isinstance(prim, Primitive):
        raise TypeError(f"register_impl: expected a Primitive, got {prim!r}")
    old = prim.impls.pop(backend, None)
    prim.writes_out.discard(backend)
    if fn is not None:
        prim.impls[backend] = fn
        if writes_out is None:
            writes_out = _is_ufunc(fn) or any(f is fn for f in prim.out_impls)
        if writes_out:
            prim.writes_out.add(backend)
            if not any(f is fn for f in prim.out_impls):
                prim.out_impls.append(fn)
    registry_version = next(_registry_version)
    return old


def register_lowering(prim: Primitive, target: str, rule: Callable | None) -> Callable | None:
    """Install ``rule`` as ``prim``'s lowering for the compiler ``target``; returns the previous one (or ``None``).

    What a rule receives and returns is the target's contract: for ``"cuda"`` (fused kernels) it is
    ``rule(eqn, args) -> C expression or None``, ``args`` being the C expressions of the inputs. Fusion groups an
    equation only if its primitive has a lowering for the target. jit caches are keyed on the registry version.

    Example::

        register_lowering(square_p, "cuda", lambda e, args: f"(({args[0]}) * ({args[0]}))")
    """
    global registry_version
    if not isinstance(prim, Primitive):
        raise TypeError(f"register_lowering: expected a Primitive, got {prim!r}")
    old = prim.lowerings.pop(target, None)
    if rule is not None:
        prim.lowerings[target] = rule
    registry_version = next(_registry_version)
    return old


def missing_rule(kind: str, prim: Primitive, backend: str | None = None) -> NotImplementedError:
    where = f" on backend '{backend}'" if backend else ""
    return NotImplementedError(f"{prim.name}: no {kind} rule is defined{where}")


# ------------------------------------------------------------------------------------------------------- traces
class UnexpectedTracerError(Exception):
    """A traced value escaped the transform that created it."""


class ConcretizationError(TypeError):
    """A traced value was used where Python needs a concrete one (``if``, ``int()``, numpy conversion)."""


class MainTrace:
    """One level of the trace stack: a transform in progress. ``level`` orders nested transforms (0 is eager
    evaluation, the innermost transform has the highest), ``trace`` is the interpreter (an instance of
    ``trace_type``), ``global_data`` its per-level state (vmap's axis, staging's equation list) and ``active``
    turns False when the transform returns, so a leaked tracer is caught.

    Example::

        with new_main(JVPTrace) as main:          # level 1 above eager evaluation
            x = JVPTracer(main.trace, primal, tangent)
    """
    __slots__ = ("level", "trace_type", "global_data", "active", "trace")

    def __init__(self, level, trace_type, global_data):
        self.level, self.trace_type, self.global_data, self.active = level, trace_type, global_data, True
        self.trace = trace_type(self)


class Trace:
    """One transform's interpreter: lifts values into its tracers and processes primitives on them.

    Subclasses define ``pure(val)`` (lift a value, also a tracer of a lower level, into this trace's tracers) and
    ``process_primitive(prim, tracers, params) -> list`` (apply ``prim``'s rule for this transform).
    """

    def __init__(self, main: MainTrace):
        self.main = main


def _needs_concrete(what: str) -> Callable:
    return lambda self, *args, **kwargs: self._scalar(None, what)


class Tracer(Array):
    """A value inside a transform: what the user's function sees instead of an Array. Each transform pairs a
    ``Trace`` (the interpreter) with a ``Tracer`` subclass (its values: ``JVPTracer`` holds a primal and a
    tangent, ``BatchTracer`` a batched value and its mapped axis, ``StagingTracer`` only an abstract value).
    Subclasses set ``_trace`` and provide ``aval``; operators reach ``bind`` through ``flfun.numpy``."""
    __slots__ = ("_trace",)

    aval: ShapedArray

    shape = property(lambda self: self.aval.shape)
    dtype = property(lambda self: self.aval.dtype)
    weak_type = property(lambda self: self.aval.weak_type)
    device = property(lambda self: None)

    def full_lower(self):
        return self

    def _scalar(self, kind, what: str | None = None):
        raise ConcretizationError(
            f"{what or f'conversion to Python {kind.__name__}'} needs a concrete value, but this array is traced "
            f"({self.aval.str_short()} under {type(self._trace).__name__}). Inside a transform use "
            f"flfun.numpy.where / flfun.lax.select, or structured control flow (flfun.lax.cond / lax.switch for if, "
            f"lax.while_loop / lax.fori_loop / lax.scan for loops) instead of Python if/while, or mark the argument "
            f"static (jit's static_argnums).")

    __bool__ = _needs_concrete("bool() / Python control flow (if, while, and, or)")
    __array__ = _needs_concrete("conversion to a numpy array")
    __index__ = _needs_concrete("use as a Python index")
    item, tolist, __dlpack__ = _needs_concrete("item()"), _needs_concrete("tolist()"), _needs_concrete("__dlpack__")

    def __repr__(self):
        return f"Traced<{self.aval.str_short()}>with<{type(self._trace).__name__}>"

    __str__ = __repr__


class EvalTrace(Trace):
    """The bottom of the stack: evaluate with the registered impl."""

    def pure(self, val):
        return to_array(val)

    def process_primitive(self, prim, tracers, params):
        out = eval_primitive(prim, tracers, params)
        return out if prim.multiple_results else [out]


class TraceState(threading.local):
    """The transform state of one thread (each thread starts eager, so eager code in one thread never sees
    another thread's trace): the trace ``stack`` (an ``EvalTrace`` at the bottom); ``evaluate``: no tracing
    transform is active, ``bind`` evaluates with the impl (maybe recording a tape); ``eager``: ... and no tape
    is recording either, so fast paths may call impls directly; ``dynamic``: the staging main that captures
    every bind (jit); ``tape``: the eager reverse-mode tape (flfun/transforms/tape.py)."""

    def __init__(self):
        self.evaluate = self.eager = True
        self.dynamic: MainTrace | None = None
        self.tape = None
        self.stack: list[MainTrace] = [MainTrace(0, EvalTrace, None)]

    def refresh(self) -> None:
        self.evaluate = len(self.stack) == 1 and self.dynamic is None
        self.eager = self.evaluate and self.tape is None


trace_state = TraceState()


class new_main:
    """Context manager pushing a new main trace (a transform level); yields the ``MainTrace``.

    With ``dynamic`` the trace captures every bind, even on constants (jit staging). A class rather than a
    generator-based context manager: it sits on the path of every eager ``grad`` call.
    """
    __slots__ = ("main", "prev_dynamic")

    def __init__(self, trace_type: type, global_data: Any = None, dynamic: bool = False):
        self.main = MainTrace(len(trace_state.stack), trace_type, global_data)
        self.prev_dynamic = dynamic

    def __enter__(self) -> MainTrace:
        st = trace_state
        st.stack.append(self.main)
        dynamic, self.prev_dynamic = self.prev_dynamic, st.dynamic
        if dynamic:
            st.dynamic = self.main
        st.eager = st.evaluate = False
        return self.main

    def __exit__(self, *exc) -> None:
        st = trace_state
        self.main.active = False
        st.stack.pop()
        st.dynamic = self.prev_dynamic
        st.refresh()


def _leaked(prim_name: str, tracer: Tracer) -> UnexpectedTracerError:
    return UnexpectedTracerError(
        f"{prim_name}: an array traced by {type(tracer._trace).__name__} ({tracer.aval.str_short()}) was used "
        f"after the transform that created it had returned (it leaked, e.g. through a global, a list or "
        f"a closure). Return values from the transformed function instead of storing them.")


def find_top_trace(prim: Primitive, args, params) -> Trace:
    """The trace that handles ``prim`` on ``args``: the highest level among the arguments' tracers, the dynamic
    (jit staging) trace if it is higher, and for a collective the trace that maps its named axis.

    Example::

        vmap(lambda x: x + y)(xs)      # add sees a BatchTracer and a concrete y: the BatchTrace handles it
    """
    st = trace_state
    top = st.stack[0]
    for a in args:
        if isinstance(a, Tracer):
            m = a._trace.main
            if not m.active:
                raise _leaked(prim.name, a)
            if m.level > top.level:
                top = m
    dyn = st.dynamic
    if dyn is not None and dyn.level > top.level:
        top = dyn
    if prim.collective:
        for name in params["axes"]:
            m = axis_main(name, prim.name)
            if m.level > top.level:
                top = m
    return top.trace


def full_raise(trace: Trace, val):
    """``val`` as a tracer of ``trace``: a concrete value or a tracer of a lower level is lifted with
    ``trace.pure``; a tracer of a higher level here means it escaped its transform (an error).

    Example::

        tracers = [full_raise(trace, a) for a in args]      # what bind does before process_primitive
    """
    if not isinstance(val, Tracer):
        return trace.pure(val if isinstance(val, Array) else to_array(val))
    m = val._trace.main
    if m is trace.main:
        return val
    if not m.active:
        raise _leaked("full_raise", val)
    if m.level < trace.main.level:
        return trace.pure(val)
    raise UnexpectedTracerError(f"cannot lift a tracer of level {m.level} into level {trace.main.level}")


def full_lower(val):
    """``val`` with needless tracer layers removed (a JVPTracer with a zero tangent is its primal):
    ``full_lower(out)``."""
    return val.full_lower() if isinstance(val, Tracer) else val


def bind(prim: Primitive, *args, **params):
    """Apply ``prim`` to ``args``: evaluate eagerly, or hand it to the innermost active transform."""
    if trace_state.evaluate and not prim.collective:
        return eval_primitive(prim, args, params)
    trace = find_top_trace(prim, args, params)
    tracers = [full_raise(trace, a) for a in args]
    outs = trace.process_primitive(prim, tracers, params)
    return [full_lower(o) for o in outs] if prim.multiple_results else full_lower(outs[0])


def axis_main(name, op: str = "collective") -> MainTrace:
    """The innermost active trace that maps the named axis ``name`` (vmap/pmap with ``axis_name``)."""
    for m in reversed(trace_state.stack):
        if getattr(m.global_data, "name", None) == name:
            return m
    raise NameError(f"{op}: unbound axis name {name!r}; collectives need an enclosing vmap or pmap "
                    f"with axis_name={name!r}")


# --------------------------------------------------------------------------------------------- eager evaluation
_default_device = None


def default_device():
    global _default_device
    if _default_device is None:
        from flfun.backends import default_device as dd
        _default_device = dd()
    return _default_device


def set_default_device(device) -> None:
    global _default_device
    _default_device = device


_new_array = object.__new__


def wrap(value, device) -> Array:
    """Wrap a backend buffer (never copied) as an Array on ``device``."""
    a = _new_array(Array)
    a._value = value
    a._device = device
    return a


def to_array(x, dtype=None) -> Array:
    """A concrete Array from an Array, numpy array or Python scalar (numpy inputs are copied)."""
    if type(x) is Array:
        return x
    if isinstance(x, Tracer):
        raise _leaked("to_array", x)
    dev = default_device()
    if dtype is None and type(x) in (int, float, bool, complex):
        dtype = dtypes.scalar_dtype(x)
    value = np.array(x, dtype=dtype, copy=True)
    if dtypes.kind(value.dtype) not in "biufc":      # strings, objects, dates
        raise TypeError(f"{type(x).__name__} is not a valid flfun array type (dtype {value.dtype}): {x!r:.80}")
    return wrap(dev.put(value), dev)


def _one_device(name: str, args) -> list:
    """The operands on one device: 0-d arrays (Python scalars, weak constants made on the default device) follow
    the other operands, as in JAX; arrays with dimensions on different devices are an error."""
    arrays = [a if type(a) is Array else to_array(a) for a in args]
    devs = list(dict.fromkeys(a._device for a in arrays if a._value.ndim))
    if not devs:
        devs = list(dict.fromkeys(a._device for a in arrays if a._device is not default_device()))
    if len(devs) != 1:
        raise ValueError(f"{name}: operands live on different devices ({devs[0]} and {devs[1]}); move them "
                         f"with flfun.device_put first")
    dev = devs[0]
    return [a if a._device is dev else wrap(dev.put(a._device.to_host(a._value)), dev) for a in arrays]


def eval_primitive(prim: Primitive, args, params):
    """The eager path: check with the abstract-eval rule, call the backend impl, wrap the result (and record it
    when an eager reverse-mode tape is active)."""
    vals = []
    device = None
    arrays = args
    for i, a in enumerate(args):
        if type(a) is not Array:
            if isinstance(a, Tracer):
                raise _leaked(prim.name, a)
            a = to_array(a)
            if arrays is args:
                arrays = list(args)
            arrays[i] = a
        if device is None:
            device = a._device
        elif a._device is not device:
            return eval_primitive(prim, _one_device(prim.name, args), params)
        vals.append(a._value)
    if device is None:
        device = params.get("device") or default_device()
    prim.abstract_eval(*vals, **params)
    impl = prim.impls.get(device.backend)
    if impl is None:
        raise missing_rule("impl", prim, device.backend)
    out = impl(*vals, **params)
    outs = [wrap(o, device) for o in out] if prim.multiple_results else wrap(out, device)
    if trace_state.tape is not None:
        trace_state.tape.record(prim, params, arrays, outs if prim.multiple_results else [outs])
    return outs
