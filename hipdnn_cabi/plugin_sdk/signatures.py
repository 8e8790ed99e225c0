"""The plugin C API signatures, parsed from the generated declarations (cdef/generated.py).

Used by the build (C slot functions / exported entry points) and by the adapters: the engine-plugin
surface (PluginApi.h + EnginePluginApi.h) and the heuristic-plugin surface (HeuristicsPluginApi.h);
a slot can hold a plugin of either kind.
"""
from __future__ import annotations

import re

from .._cdef import load

HEADERS = ("hipdnn_plugin_sdk/PluginApi.h", "hipdnn_plugin_sdk/EnginePluginApi.h",
           "hipdnn_plugin_sdk/HeuristicsPluginApi.h")
ENGINE_HEADERS = HEADERS[:2]
HEURISTIC_HEADERS = (HEADERS[0], HEADERS[2])
NUM_SLOTS = 8  # Python plugins loadable at once inside libhipdnn_backend.so


class Sig:
    __slots__ = ("name", "ret", "params", "names", "header")

    def __init__(self, name, ret, params, names, header=None):
        self.name, self.ret, self.params, self.names = name, ret, params, names
        self.header = header

    @property
    def is_void(self) -> bool:
        return self.ret == "void"

    def decl(self, prefix_params=(), name=None) -> str:
        ps = list(prefix_params) + self.params
        return f"{self.ret} {name or self.name}({', '.join(ps) if ps else 'void'})"


def parse(proto: str, header=None) -> Sig:
    m = re.match(r"^(.*?)\b(\w+)\((.*)\);$", proto.strip(), re.S)
    ret, name, args = m.group(1).strip(), m.group(2), m.group(3).strip()
    params = [a.strip() for a in args.split(",")] if args and args != "void" else []
    names = [re.findall(r"\w+", p)[-1] for p in params]
    return Sig(name, ret, params, names, header)


def signatures(generated=None) -> list[Sig]:
    if generated is None:
        generated = load()
    return [parse(p, h) for h in HEADERS for p in generated.FUNCTIONS[h]]


def dispatcher_name(fn: str) -> str:
    return "hpy_plugin_" + fn


def dispatcher_externs(generated=None) -> dict:
    """name -> C declaration of the extern "Python" dispatchers: ``hpy_plugin_<Fn>(int slot, ...)``."""
    return {dispatcher_name(s.name): s.decl(["int slot"], dispatcher_name(s.name))
            for s in signatures(generated)}


EXECUTE = "hipdnnEnginePluginExecuteOpGraph"

# The execute slots (the hot path: every hipdnnBackendExecute of a Python plugin's plan) call the
# adapter's ``execute_op_graph_ints(handle, context, workspace, buffers, count)`` through the
# CPython API (ints, and the device-buffer array as bytes) instead of through cffi's extern
# "Python" dispatcher: no cdata objects, no argument tuple.  The callable is set per slot, under
# the GIL, by hipdnn_cabi_plugin_slot_set_execute (slots.py, when a plugin is bound; 0 clears it);
# a slot without one calls the dispatcher as every other function does.  An exception escaping
# the callable is HIPDNN_PLUGIN_STATUS_INTERNAL_ERROR (the dispatchers' onerror), nothing printed.
EXECUTE_SLOT_C = r"""
static PyObject* hipdnn_cabi_slot_exec_fn[NUM_SLOTS];

static void hipdnn_cabi_plugin_slot_set_execute(int slot, uint64_t callable)
{
    if (slot < 0 || slot >= NUM_SLOTS)
        return;
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject* f = (PyObject*)(uintptr_t)callable;
    Py_XINCREF(f);
    Py_XSETREF(hipdnn_cabi_slot_exec_fn[slot], f);
    PyGILState_Release(g);
}

static hipdnnPluginStatus_t hipdnn_cabi_slot_execute(int slot, hipdnnEnginePluginHandle_t handle,
                                                     hipdnnEnginePluginExecutionContext_t ctx,
                                                     void* workspace,
                                                     const hipdnnPluginDeviceBuffer_t* buffers,
                                                     uint32_t count)
{
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject* f = hipdnn_cabi_slot_exec_fn[slot]; /* read under the GIL: set/cleared under it */
    if (f == NULL) {
        PyGILState_Release(g);
        return hpy_plugin_hipdnnEnginePluginExecuteOpGraph(slot, handle, ctx, workspace, buffers, count);
    }
    Py_INCREF(f);
    PyObject* a[5];
    a[0] = PyLong_FromVoidPtr((void*)handle);
    a[1] = PyLong_FromVoidPtr((void*)ctx);
    a[2] = PyLong_FromVoidPtr(workspace);
    if (count && buffers != NULL)
        a[3] = PyBytes_FromStringAndSize((const char*)buffers, (Py_ssize_t)count * 16);
    else {
        a[3] = Py_None;
        Py_INCREF(Py_None);
    }
    a[4] = PyLong_FromUnsignedLong(count);
    long st = HIPDNN_PLUGIN_STATUS_INTERNAL_ERROR;
    if (a[0] && a[1] && a[2] && a[3] && a[4]) {
        PyObject* r = PyObject_Vectorcall(f, a, 5, NULL);
        if (r != NULL) {
            st = PyLong_AsLong(r);
            Py_DECREF(r);
        }
    }
    if (PyErr_Occurred()) {
        PyErr_Clear();
        st = HIPDNN_PLUGIN_STATUS_INTERNAL_ERROR;
    }
    for (int i = 0; i < 5; ++i)
        Py_XDECREF(a[i]);
    Py_DECREF(f);
    PyGILState_Release(g);
    return (hipdnnPluginStatus_t)st;
}
"""


def slot_c_code(generated=None, nslots: int = NUM_SLOTS) -> tuple[str, str]:
    """(cdef, C source) of the static slot functions ``slot<K>_<Fn>`` and of
    ``uint64_t hipdnn_cabi_plugin_slot_fn(int slot, const char* name)``."""
    sigs = signatures(generated)
    code = ["#include <string.h>"]
    for s in sigs:
        code.append(f"static {s.decl(['int slot'], dispatcher_name(s.name))};")
    code.append(EXECUTE_SLOT_C.replace("NUM_SLOTS", str(nslots)))
    for k in range(nslots):
        for s in sigs:
            disp = "hipdnn_cabi_slot_execute" if s.name == EXECUTE else dispatcher_name(s.name)
            call = f"{disp}({', '.join([str(k)] + s.names)})"
            body = f"{call};" if s.is_void else f"return {call};"
            code.append(f"static {s.decl(name=f'slot{k}_{s.name}')} {{ {body} }}")
    code.append("static uint64_t hipdnn_cabi_plugin_slot_fn(int slot, const char* name)\n{")
    code.append("    if (name == NULL) return 0;")
    code.append("    switch (slot) {")
    for k in range(nslots):
        code.append(f"    case {k}:")
        for s in sigs:
            code.append(f'        if (strcmp(name, "{s.name}") == 0) '
                        f"return (uint64_t)(uintptr_t)&slot{k}_{s.name};")
        code.append("        return 0;")
    code.append("    default: return 0;\n    }\n}")
    code.append(f"static int hipdnn_cabi_plugin_slot_count(void) {{ return {nslots}; }}")
    cdef = ("uint64_t hipdnn_cabi_plugin_slot_fn(int slot, const char* name);\n"
            "int hipdnn_cabi_plugin_slot_count(void);\n"
            "void hipdnn_cabi_plugin_slot_set_execute(int slot, uint64_t callable);")
    return cdef, "\n".join(code)
