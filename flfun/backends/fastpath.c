/* Optional C accelerator for the eager binary operators of flfun.Array (x + y, x * y, ...).
 *
 * A BinaryOp is flfun.numpy.add (and subtract, multiply, divide, maximum, minimum), so also Array.__add__ and
 * friends. On its fast path (two exact Arrays of one allowed dtype on one device, or an Array and a Python int or
 * float, with nothing tracing or taping) it calls the primitive's registered impl
 * for the device's backend -- looked up in the primitive's live impls dict on every call, so register_impl still
 * takes effect at once -- and wraps the result in a new Array. Everything else (tracers, promotion, bad shapes,
 * tapes) goes to the Python operator it was given, which holds the semantics. flfun works the same without
 * this module; see flfun/numpy/_elementwise.py.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *impls;     /* the primitive's dict: backend name -> impl */
    PyObject *dtypes;    /* frozenset of dtypes the fast path may take */
    PyObject *fallback;  /* the Python operator: fallback(x1, x2) */
    PyObject *general;   /* its general path (promotion, the shape rule's clear error), for a failed impl call */
    PyObject *dict;      /* __name__, __doc__, __wrapped__ of the Python operator */
} BinaryOp;

static PyTypeObject *array_type;          /* flfun.array.Array */
static Py_ssize_t value_offset, device_offset;
static PyObject *state;                   /* flfun.core._state; fast path only while state.eager is True */
static PyObject *float_dtypes;            /* frozenset: the dtypes a Python float converts to */
static PyObject *str_eager, *str_dtype, *str_backend, *str_type;

#define SLOT(obj, off) (*(PyObject **)((char *)(obj) + (off)))

/* The impl's inputs for the fast path, or 0 when it does not apply: two Arrays of one dtype on one device, or an
 * Array and a Python int (or float, for a float Array) converted to a scalar of the Array's dtype. */
static int fast_inputs(BinaryOp *op, PyObject *x1, PyObject *x2, PyObject **v1, PyObject **v2, PyObject **device) {
    int a1 = Py_TYPE(x1) == array_type, a2 = Py_TYPE(x2) == array_type;
    PyObject *array = a1 ? x1 : x2, *other = a1 ? x2 : x1;
    if (!a1 && !a2) return 0;
    if (!(a1 && a2) && !PyLong_CheckExact(other) && !PyFloat_CheckExact(other)) return 0;
    PyObject *eager = PyObject_GetAttr(state, str_eager);
    int ok = eager != NULL && PyObject_IsTrue(eager) == 1;
    Py_XDECREF(eager);
    *device = SLOT(array, device_offset);
    PyObject *value = SLOT(array, value_offset);
    if (!ok || value == NULL || *device == NULL) return 0;
    PyObject *dtype = PyObject_GetAttr(value, str_dtype);
    if (dtype == NULL || PySet_Contains(op->dtypes, dtype) != 1) { Py_XDECREF(dtype); return 0; }
    PyObject *converted = NULL;
    if (a1 && a2) {
        PyObject *other_value = SLOT(other, value_offset);
        PyObject *dtype2 = other_value ? PyObject_GetAttr(other_value, str_dtype) : NULL;
        ok = dtype2 == dtype && SLOT(other, device_offset) == *device;
        Py_XDECREF(dtype2);
        if (ok) { converted = SLOT(other, value_offset); Py_XINCREF(converted); }
    } else if (PyLong_CheckExact(other) || PySet_Contains(float_dtypes, dtype) == 1) {
        PyObject *scalar_type = PyObject_GetAttr(dtype, str_type);
        converted = scalar_type ? PyObject_CallOneArg(scalar_type, other) : NULL;   /* may overflow: fallback */
        Py_XDECREF(scalar_type);
    }
    Py_DECREF(dtype);
    if (converted == NULL) return 0;
    Py_INCREF(value);
    *v1 = a1 ? value : converted;
    *v2 = a1 ? converted : value;
    return 1;
}

/* The fast path; returns NULL without an exception set when it does not apply, with *failed set when the impl
 * raised an Exception (the general path then gives the clear error without calling the impl again). */
static PyObject *fast(BinaryOp *op, PyObject *x1, PyObject *x2, int *failed) {
    PyObject *args[2], *device;
    if (!fast_inputs(op, x1, x2, &args[0], &args[1], &device)) { PyErr_Clear(); return NULL; }
    PyObject *backend = PyObject_GetAttr(device, str_backend);
    PyObject *impl = backend ? PyDict_GetItemWithError(op->impls, backend) : NULL;  /* borrowed */
    Py_XDECREF(backend);
    Py_XINCREF(impl);   /* a register_impl during the call must not free it */
    PyObject *out = impl ? PyObject_Vectorcall(impl, args, 2, NULL) : NULL;
    Py_XDECREF(impl);
    Py_DECREF(args[0]);
    Py_DECREF(args[1]);
    if (out == NULL) {
        if (impl == NULL || PyErr_ExceptionMatches(PyExc_Exception)) { PyErr_Clear(); *failed = impl != NULL; }
        return NULL;   /* KeyboardInterrupt and the like propagate */
    }
    PyObject *result = array_type->tp_alloc(array_type, 0);
    if (result == NULL) { Py_DECREF(out); return NULL; }
    SLOT(result, value_offset) = out;
    Py_INCREF(device);
    SLOT(result, device_offset) = device;
    return result;
}

static PyObject *binary_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    BinaryOp *op = (BinaryOp *)self;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs != 2 || (kwnames != NULL && PyTuple_GET_SIZE(kwnames) != 0)) {
        PyObject *name = PyObject_GetAttrString(op->fallback, "__name__");
        if (name != NULL) PyErr_Format(PyExc_TypeError, "%U() takes exactly 2 positional arguments", name);
        Py_XDECREF(name);
        return NULL;
    }
    int failed = 0;
    PyObject *result = fast(op, args[0], args[1], &failed);
    if (result != NULL || PyErr_Occurred()) return result;
    return PyObject_Vectorcall(failed ? op->general : op->fallback, args, 2, NULL);
}

static PyObject *binary_get(PyObject *self, PyObject *obj, PyObject *type) {
    if (obj == NULL || obj == Py_None) { Py_INCREF(self); return self; }
    return PyMethod_New(self, obj);
}

static int binary_traverse(BinaryOp *op, visitproc visit, void *arg) {
    Py_VISIT(op->impls); Py_VISIT(op->dtypes); Py_VISIT(op->fallback); Py_VISIT(op->general); Py_VISIT(op->dict);
    return 0;
}

static int binary_clear(BinaryOp *op) {
    Py_CLEAR(op->impls); Py_CLEAR(op->dtypes); Py_CLEAR(op->fallback); Py_CLEAR(op->general); Py_CLEAR(op->dict);
    return 0;
}

static void binary_dealloc(BinaryOp *op) {
    PyObject_GC_UnTrack(op);
    binary_clear(op);
    Py_TYPE(op)->tp_free((PyObject *)op);
}

static PyObject *binary_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static char *names[] = {"impls", "dtypes", "fallback", "general", NULL};
    PyObject *impls, *dtypes, *fallback, *general;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!O!OO", names, &PyDict_Type, &impls, &PyFrozenSet_Type,
                                     &dtypes, &fallback, &general))
        return NULL;
    BinaryOp *op = (BinaryOp *)type->tp_alloc(type, 0);
    if (op == NULL) return NULL;
    op->vectorcall = binary_vectorcall;
    Py_INCREF(impls); op->impls = impls;
    Py_INCREF(dtypes); op->dtypes = dtypes;
    Py_INCREF(fallback); op->fallback = fallback;
    Py_INCREF(general); op->general = general;
    return (PyObject *)op;
}

static PyMemberDef binary_members[] = {
    {"fallback", T_OBJECT, offsetof(BinaryOp, fallback), READONLY, "the Python operator"},
    {NULL}
};

static PyGetSetDef binary_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict},
    {NULL}
};

static PyTypeObject BinaryOpType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "flfun.backends.fastpath.BinaryOp",
    .tp_doc = "BinaryOp(impls, dtypes, fallback, general): an Array operator with a C fast path.",
    .tp_basicsize = sizeof(BinaryOp),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_new = binary_new,
    .tp_dealloc = (destructor)binary_dealloc,
    .tp_traverse = (traverseproc)binary_traverse,
    .tp_clear = (inquiry)binary_clear,
    .tp_vectorcall_offset = offsetof(BinaryOp, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_descr_get = binary_get,
    .tp_members = binary_members,
    .tp_getset = binary_getset,
    .tp_dictoffset = offsetof(BinaryOp, dict),
};

static Py_ssize_t slot_offset(PyObject *cls, const char *name) {
    PyObject *descr = PyObject_GetAttrString(cls, name);
    if (descr == NULL) return -1;
    Py_ssize_t offset = -1;
    if (Py_IS_TYPE(descr, &PyMemberDescr_Type))
        offset = ((PyMemberDescrObject *)descr)->d_member->offset;
    else
        PyErr_Format(PyExc_TypeError, "Array.%s is not a slot", name);
    Py_DECREF(descr);
    return offset;
}

static PyObject *setup(PyObject *module, PyObject *args) {
    PyObject *cls, *st, *floats;
    if (!PyArg_ParseTuple(args, "O!OO!", &PyType_Type, &cls, &st, &PyFrozenSet_Type, &floats)) return NULL;
    Py_ssize_t v = slot_offset(cls, "_value"), d = slot_offset(cls, "_device");
    if (v < 0 || d < 0) return NULL;
    Py_INCREF(cls); Py_XSETREF(array_type, (PyTypeObject *)cls);
    Py_INCREF(st); Py_XSETREF(state, st);
    Py_INCREF(floats); Py_XSETREF(float_dtypes, floats);
    value_offset = v;
    device_offset = d;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"setup", setup, METH_VARARGS, "setup(Array, state, float_dtypes): bind the Array class, the transform state and the float dtypes."},
    {NULL}
};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "flfun.backends.fastpath", NULL, -1, methods};

PyMODINIT_FUNC PyInit_fastpath(void) {
    if (PyType_Ready(&BinaryOpType) < 0) return NULL;
    str_eager = PyUnicode_InternFromString("eager");
    str_dtype = PyUnicode_InternFromString("dtype");
    str_backend = PyUnicode_InternFromString("backend");
    str_type = PyUnicode_InternFromString("type");
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL) return NULL;
    Py_INCREF(&BinaryOpType);
    if (PyModule_AddObject(m, "BinaryOp", (PyObject *)&BinaryOpType) < 0) return NULL;
    return m;
}
