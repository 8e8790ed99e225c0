/* hipdnn_cabi.frontend._fastexec: the C half of Graph.execute's by-value cache
 * (hipdnn_cabi/frontend/graph/execution.py, docs/frontend.md "Execute cache").
 *
 * A CPython extension module built beside libhipdnn_backend.so (cdef/build_backend.py).  It uses
 * only the public C API of the backend: the frontend hands it the address of
 * hipdnnBackendExecute of the library it opened, inside each cache entry.
 *
 *   key(variant_pack, workspace, handle) -> tuple | None
 *       The by-value key of one execute call: the handle's identity, the workspace's and every
 *       buffer's type and fingerprint, every key (its identity; str / int / float / bool by type
 *       and value).  None: some buffer is not kept by value (its type is not in the kinds table,
 *       or it gives no fingerprint).  Fingerprints, by kind (set_kinds):
 *         0 number:     the value itself;
 *         1 ndarray:    data pointer, writability, shape and strides (PEP 3118 buffer) and dtype;
 *         2 torch-like: data_ptr(), dtype, shape, stride(), device.
 *       Packed as (bytes, objects...): see keybuf.
 *   execute(graph, cache, variant_pack, workspace, handle) -> int | None
 *       key(...) looked up in ``cache``; on a hit whose entry still matches the graph's state (the
 *       active plan, select_engine_by_memory, the device workspace, the handle and its raw
 *       handle: every one compared by identity with what the entry holds strongly), one
 *       hipdnnBackendExecute(h, plan, pack) with the GIL released; returns its status.  None: no
 *       such entry (or anything unexpected): the caller takes the Python path.
 *   graph_execute_method
 *       Graph.execute itself (an instancemethod around graph_execute): the lookup above on the
 *       graph's ``_fcache``; a miss (or unusual arguments) calls graph._execute_cached(...), a
 *       failed status graph._execute_failed(status).
 *   set_kinds(dict)   {type: kind} (exact types; the frontend adds types as it meets them).
 *
 * Entry layout (a tuple; execution.py _VEntry): 0 plan object, 1 select_engine_by_memory,
 * 2 _dev_ws, 3 handle object, 4 raw handle object, 5 handle address, 6 plan address,
 * 7 variant pack address, 8 address of hipdnnBackendExecute, ... (Python-only fields).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

typedef int (*fe_exec_fn)(void*, void*, void*);

enum { K_NUMBER = 0, K_NDARRAY = 1, K_TORCH = 2 };
#define ENTRY_MIN 9

static PyObject* g_kinds; /* dict: exact type -> kind */
static PyObject *s_data_ptr, *s_dtype, *s_shape, *s_stride, *s_device, *s_active, *s_plans,
    *s_plan_ok, *s_sebm, *s_dev_ws, *s_handle, *s_h;

/* The key under construction.  A key is a tuple (bytes, obj, ...): the bytes pack, as int64
 * words, everything that is an identity or a machine integer (the handle's and the keys' identities,
 * type and dtype objects by identity, data pointers, shapes, strides, writability, int numbers);
 * the objects after it are what compares by value (str keys, float / bool / big int numbers, a
 * torch device).  Hashing and comparing it is one memory hash / memcmp plus a few objects.  The
 * layout of each item follows from its type (kind), so the encoding is unambiguous; every object
 * the words name by identity is held by the entry (execution.py _fcache_put) so no address is
 * reused while the entry lives. */
#define KEY_WORDS 1024
#define KEY_OBJS 64
typedef struct {
    Py_ssize_t n, m;
    int64_t w[KEY_WORDS];
    PyObject* o[KEY_OBJS]; /* new references */
} keybuf;

static int too_long(void)
{
    PyErr_SetString(PyExc_OverflowError, "execute key too long");
    return -1;
}

static int word(keybuf* K, int64_t v)
{
    if (K->n == KEY_WORDS)
        return too_long();
    K->w[K->n++] = v;
    return 0;
}

static int ptr_word(keybuf* K, const void* p) { return word(K, (int64_t)(intptr_t)p); }

/* Append an object compared by value (a new reference, stolen); -1 on error. */
static int obj(keybuf* K, PyObject* o)
{
    if (o == NULL)
        return -1;
    if (K->m == KEY_OBJS) {
        Py_DECREF(o);
        return too_long();
    }
    K->o[K->m++] = o;
    return 0;
}

/* An int that fits int64 as a word (tag 0), else the object by value (tag 1). */
static int int_word(keybuf* K, PyObject* v)
{
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (x == -1 && PyErr_Occurred())
        return -1;
    if (overflow) {
        Py_INCREF(v);
        return word(K, 1) || obj(K, v) ? -1 : 0;
    }
    return word(K, 0) || word(K, (int64_t)x) ? -1 : 0;
}

/* A tuple of ints (torch.Size, stride()) as its length and items; 1 when it is something else. */
static int ints_words(keybuf* K, PyObject* t)
{
    if (!PyTuple_Check(t))
        return 1;
    Py_ssize_t n = PyTuple_GET_SIZE(t);
    if (word(K, n))
        return -1;
    for (Py_ssize_t i = 0; i < n; ++i) {
        PyObject* d = PyTuple_GET_ITEM(t, i);
        if (!PyLong_Check(d))
            return 1;
        long long x = PyLong_AsLongLong(d);
        if (x == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            return 1;
        }
        if (word(K, (int64_t)x))
            return -1;
    }
    return 0;
}

/* The result (new reference) of a method call or attribute lookup on v. */
static PyObject* get(PyObject* v, PyObject* name, int call)
{
    return call ? PyObject_CallMethodNoArgs(v, name) : PyObject_GetAttr(v, name);
}

/* A torch-like buffer: data_ptr(), dtype (identity), shape and stride() (ints), device (value).
 * 0 done, 1 not kept by value, -1 error. */
static int torch_words(keybuf* K, PyObject* v)
{
    PyObject* p = get(v, s_data_ptr, 1);
    if (p == NULL)
        return -1;
    int r = PyLong_Check(p) ? int_word(K, p) : 1;
    Py_DECREF(p);
    if (r)
        return r;
    PyObject* dt = get(v, s_dtype, 0);
    if (dt == NULL)
        return -1;
    r = ptr_word(K, dt); /* torch dtypes are immortal singletons; the entry holds it anyway */
    Py_DECREF(dt);
    for (int i = 0; !r && i < 2; ++i) {
        PyObject* t = get(v, i ? s_stride : s_shape, i);
        if (t == NULL)
            return -1;
        r = ints_words(K, t);
        Py_DECREF(t);
    }
    return r ? r : obj(K, get(v, s_device, 0));
}

/* The fingerprint of one buffer (or the workspace): 0 done, 1 not kept by value, -1 error. */
static int push_fp(keybuf* K, PyObject* v)
{
    if (v == Py_None)
        return word(K, 0);
    PyObject* k = PyDict_GetItemWithError(g_kinds, (PyObject*)Py_TYPE(v));
    if (k == NULL)
        return PyErr_Occurred() ? -1 : 1;
    long kind = PyLong_AsLong(k);
    if (ptr_word(K, Py_TYPE(v)) < 0)
        return -1;
    switch (kind) {
    case K_NUMBER:
        if (PyLong_CheckExact(v))
            return int_word(K, v);
        Py_INCREF(v);
        return obj(K, v);
    case K_TORCH:
        return torch_words(K, v);
    case K_NDARRAY: {
        Py_buffer b;
        if (PyObject_GetBuffer(v, &b, PyBUF_STRIDES) < 0) { /* a dtype PEP 3118 cannot describe */
            PyErr_Clear();
            return 1;
        }
        int r = ptr_word(K, b.buf) || word(K, b.readonly) || word(K, b.ndim);
        for (int i = 0; !r && i < b.ndim; ++i)
            r = word(K, b.shape[i]) || word(K, b.strides[i]);
        PyBuffer_Release(&b);
        if (r)
            return -1;
        PyObject* dt = get(v, s_dtype, 0); /* the array's descr: the entry holds it */
        if (dt == NULL)
            return -1;
        r = ptr_word(K, dt);
        Py_DECREF(dt);
        return r;
    }
    default:
        return 1;
    }
}

/* The key of one call (new reference), Py_None when not kept by value, NULL on error. */
static PyObject* make_key(PyObject* vp, PyObject* ws, PyObject* handle)
{
    if (!PyDict_Check(vp) || g_kinds == NULL)
        Py_RETURN_NONE;
    keybuf K;
    K.n = K.m = 0;
    int r = ptr_word(&K, handle == Py_None ? NULL : handle);
    if (!r)
        r = push_fp(&K, ws);
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (!r && PyDict_Next(vp, &pos, &k, &v)) {
        if (k == Py_None) /* skipped, as execute skips it */
            continue;
        PyTypeObject* tk = Py_TYPE(k);
        r = ptr_word(&K, tk);
        if (!r) {
            if (tk == &PyLong_Type)
                r = int_word(&K, k);
            else if (tk == &PyUnicode_Type || tk == &PyFloat_Type || tk == &PyBool_Type) {
                Py_INCREF(k);
                r = obj(&K, k);
            } else
                r = ptr_word(&K, k); /* the entry holds the key */
        }
        if (!r)
            r = push_fp(&K, v);
    }
    PyObject* t = r ? NULL : PyTuple_New(1 + K.m);
    if (t != NULL) {
        PyObject* bytes = PyBytes_FromStringAndSize((const char*)K.w, (Py_ssize_t)(K.n * sizeof(int64_t)));
        if (bytes == NULL) {
            Py_DECREF(t);
            t = NULL;
        } else {
            PyTuple_SET_ITEM(t, 0, bytes);
            for (Py_ssize_t i = 0; i < K.m; ++i)
                PyTuple_SET_ITEM(t, 1 + i, K.o[i]); /* steals */
            K.m = 0;
        }
    }
    for (Py_ssize_t i = 0; i < K.m; ++i)
        Py_DECREF(K.o[i]);
    if (r > 0)
        Py_RETURN_NONE;
    return t;
}

static PyObject* fe_key(PyObject* self, PyObject* const* args, Py_ssize_t n)
{
    (void)self;
    if (n != 3) {
        PyErr_SetString(PyExc_TypeError, "key(variant_pack, workspace, handle)");
        return NULL;
    }
    return make_key(args[0], args[1], args[2]);
}

/* 1 when the graph's state is the one entry e was made under: its active plan (_plans[_active],
 * with _plan_ok[_active] True), select_engine_by_memory, _dev_ws, the handle (the argument, else
 * graph.handle) and that handle's raw handle (_h), each compared by identity with what e holds.
 * Read from the instance dicts (no descriptor, no Python code runs); anything else is 0. */
static int state_is(PyObject* g, PyObject* e, PyObject* handle)
{
    PyObject* d = PyObject_GenericGetDict(g, NULL);
    if (d == NULL) {
        PyErr_Clear();
        return 0;
    }
    int ok = 0;
    PyObject* a = PyDict_GetItemWithError(d, s_active);
    PyObject* plans = a ? PyDict_GetItemWithError(d, s_plans) : NULL;
    PyObject* oks = plans ? PyDict_GetItemWithError(d, s_plan_ok) : NULL;
    if (oks != NULL && PyLong_CheckExact(a) && PyList_CheckExact(plans) && PyList_CheckExact(oks)) {
        Py_ssize_t i = PyLong_AsSsize_t(a);
        if (i >= 0 && i < PyList_GET_SIZE(plans) && i < PyList_GET_SIZE(oks))
            ok = PyList_GET_ITEM(oks, i) == Py_True && PyList_GET_ITEM(plans, i) == PyTuple_GET_ITEM(e, 0);
    }
    ok = ok && PyDict_GetItemWithError(d, s_sebm) == PyTuple_GET_ITEM(e, 1)
         && PyDict_GetItemWithError(d, s_dev_ws) == PyTuple_GET_ITEM(e, 2);
    PyObject* hh = handle != Py_None ? handle : ok ? PyDict_GetItemWithError(d, s_handle) : NULL;
    ok = ok && hh == PyTuple_GET_ITEM(e, 3); /* then e holds hh */
    Py_DECREF(d);
    if (ok) {
        PyObject* hd = PyObject_GenericGetDict(hh, NULL);
        ok = hd != NULL && PyDict_GetItemWithError(hd, s_h) == PyTuple_GET_ITEM(e, 4);
        Py_XDECREF(hd);
    }
    if (PyErr_Occurred())
        PyErr_Clear();
    return ok;
}

/* The status (a new int) of the kept pack's execute, or Py_None (not a new reference: no entry, or
 * the graph's state moved). */
static PyObject* fe_execute_in(PyObject* g, PyObject* cache, PyObject* vp, PyObject* ws, PyObject* handle)
{
    PyObject* key = make_key(vp, ws, handle);
    if (key == NULL) {
        PyErr_Clear(); /* the Python path meets the same buffer and says what is wrong */
        return Py_None;
    }
    if (key == Py_None) {
        Py_DECREF(key);
        return Py_None;
    }
    PyObject* e = PyDict_GetItemWithError(cache, key); /* borrowed */
    Py_XINCREF(e);
    Py_DECREF(key);
    if (e == NULL) {
        PyErr_Clear();
        return Py_None;
    }
    int ok = PyTuple_Check(e) && PyTuple_GET_SIZE(e) >= ENTRY_MIN && state_is(g, e, handle);
    void *h = NULL, *p = NULL, *v = NULL, *f = NULL;
    if (ok) {
        h = PyLong_AsVoidPtr(PyTuple_GET_ITEM(e, 5));
        p = PyLong_AsVoidPtr(PyTuple_GET_ITEM(e, 6));
        v = PyLong_AsVoidPtr(PyTuple_GET_ITEM(e, 7));
        f = PyLong_AsVoidPtr(PyTuple_GET_ITEM(e, 8));
        if (PyErr_Occurred() || f == NULL) {
            PyErr_Clear();
            ok = 0;
        }
    }
    if (!ok) {
        Py_DECREF(e);
        return Py_None;
    }
    int st;
    Py_BEGIN_ALLOW_THREADS /* calls into plugins release the GIL (docs/embedding.md) */
    st = ((fe_exec_fn)f)(h, p, v);
    Py_END_ALLOW_THREADS
    Py_DECREF(e);
    return PyLong_FromLong(st);
}

static PyObject* fe_execute(PyObject* self, PyObject* const* args, Py_ssize_t n)
{
    (void)self;
    if (n != 5) {
        PyErr_SetString(PyExc_TypeError, "execute(graph, cache, variant_pack, workspace, handle)");
        return NULL;
    }
    if (!PyDict_Check(args[1]))
        Py_RETURN_NONE;
    PyObject* r = fe_execute_in(args[0], args[1], args[2], args[3], args[4]);
    if (r == Py_None)
        Py_INCREF(r);
    return r;
}

/* Graph.execute(variant_pack, workspace=None, handle=None) (bound through an instancemethod):
 * the kept pack of the call when ``graph._fcache`` has it, else graph._execute_cached(...) (the
 * identity cache and the full path).  A non-zero status goes to graph._execute_failed(status),
 * which raises the backend's error. */
static PyObject *s_fcache, *s_execute_cached, *s_execute_failed, *s_workspace, *s_variant_pack;

static PyObject* fe_graph_execute(PyObject* self, PyObject* const* args, Py_ssize_t nargsf, PyObject* kwnames)
{
    (void)self;
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    if (n < 1) {
        PyErr_SetString(PyExc_TypeError, "execute() needs the graph");
        return NULL;
    }
    PyObject *g = args[0], *vp = n > 1 ? args[1] : NULL, *ws = n > 2 ? args[2] : Py_None,
             *handle = n > 3 ? args[3] : Py_None;
    int fast = n <= 4;
    Py_ssize_t nk = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t i = 0; fast && i < nk; ++i) {
        PyObject* k = PyTuple_GET_ITEM(kwnames, i);
        if (k == s_workspace && n <= 2)
            ws = args[n + i];
        else if (k == s_handle && n <= 3)
            handle = args[n + i];
        else if (k == s_variant_pack && n == 1)
            vp = args[n + i];
        else
            fast = 0;
    }
    if (fast && vp != NULL) {
        PyObject* fc = PyObject_GetAttr(g, s_fcache);
        if (fc == NULL)
            PyErr_Clear();
        else {
            PyObject* st = PyDict_Check(fc) && PyDict_GET_SIZE(fc) ? fe_execute_in(g, fc, vp, ws, handle) : Py_None;
            Py_DECREF(fc);
            if (st == NULL)
                return NULL;
            if (st != Py_None) {
                long v = PyLong_AsLong(st);
                if (v == 0) {
                    Py_DECREF(st);
                    Py_INCREF(g);
                    return g;
                }
                PyObject* r = PyObject_CallMethodOneArg(g, s_execute_failed, st);
                Py_DECREF(st);
                return r;
            }
        }
    }
    PyObject* m = PyObject_GetAttr(g, s_execute_cached);
    if (m == NULL)
        return NULL;
    PyObject* r = PyObject_Vectorcall(m, args + 1, (size_t)(n - 1), kwnames);
    Py_DECREF(m);
    return r;
}

static PyObject* fe_set_kinds(PyObject* self, PyObject* arg)
{
    (void)self;
    if (!PyDict_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "set_kinds(dict)");
        return NULL;
    }
    Py_INCREF(arg);
    Py_XSETREF(g_kinds, arg);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"key", (PyCFunction)(void (*)(void))fe_key, METH_FASTCALL, "key(variant_pack, workspace, handle)"},
    {"execute", (PyCFunction)(void (*)(void))fe_execute, METH_FASTCALL,
     "execute(graph, cache, variant_pack, workspace, handle) -> status | None"},
    {"set_kinds", fe_set_kinds, METH_O, "set_kinds({type: kind})"},
    {"graph_execute", (PyCFunction)(void (*)(void))fe_graph_execute, METH_FASTCALL | METH_KEYWORDS,
     "graph_execute($module, graph, variant_pack, workspace=None, handle=None)\n--\n\n"
     "Graph.execute: the kept pack of the call, else graph._execute_cached(...)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fastexec", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__fastexec(void)
{
    struct {
        PyObject** p;
        const char* s;
    } names[] = {{&s_data_ptr, "data_ptr"}, {&s_dtype, "dtype"},   {&s_shape, "shape"},
                 {&s_stride, "stride"},     {&s_device, "device"}, {&s_active, "_active"},
                 {&s_plans, "_plans"},      {&s_plan_ok, "_plan_ok"}, {&s_sebm, "select_engine_by_memory"},
                 {&s_dev_ws, "_dev_ws"},    {&s_handle, "handle"}, {&s_h, "_h"},
                 {&s_fcache, "_fcache"},    {&s_execute_cached, "_execute_cached"},
                 {&s_execute_failed, "_execute_failed"}, {&s_workspace, "workspace"},
                 {&s_variant_pack, "variant_pack"}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; ++i)
        if ((*names[i].p = PyUnicode_InternFromString(names[i].s)) == NULL)
            return NULL;
    PyObject* m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    /* Graph.execute: graph_execute bound like a Python function (an instancemethod) */
    PyObject* f = PyObject_GetAttrString(m, "graph_execute");
    PyObject* im = f ? PyInstanceMethod_New(f) : NULL;
    Py_XDECREF(f);
    if (im == NULL || PyModule_AddObject(m, "graph_execute_method", im) < 0) {
        Py_XDECREF(im);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
