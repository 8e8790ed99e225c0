/* hipdnn-cabi conformance: backend-API driver.  dlopens a hipDNN backend library and runs one
 * scenario of C calls, printing one JSON record per call (see driver.c for the format):
 *   backend_driver MODE LIB.so [FILE]
 * Modes handle/descriptor/tensor/last_error/strings need no plugins; graph (FILE: a Graph blob
 * stamped min API 1.4.0) runs the §2 graph sequences with no plugins; engine runs the heuristic ->
 * engine config -> plan -> variant pack -> execute sequence against HIPDNN_PLUGIN_DIR's plugins;
 * heur_host (FILE: comma-separated policy ids) lists the heuristic policies of the handle and runs
 * ENGINEHEUR with each policy alone, and with SelectionHeuristic::StaticOrdering (the candidates).
 * Judging is done in hipdnn_cabi/conformance/checks/backend.py. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hipdnn_backend.h"

#define SYMBOLS(X)                                                                                  \
    X(hipdnnCreate) X(hipdnnDestroy) X(hipdnnBackendCreateDescriptor) X(hipdnnBackendDestroyDescriptor) \
    X(hipdnnBackendFinalize) X(hipdnnBackendGetAttribute) X(hipdnnBackendSetAttribute)              \
    X(hipdnnGetLastErrorString) X(hipdnnPeekLastErrorString_ext) X(hipdnnGetErrorString)            \
    X(hipdnnVersionString_ext) X(hipdnnBackendExecute) X(hipdnnBackendGetSerializedBinaryGraph_ext)       \
    X(hipdnnBackendGetSerializedBinaryContents_ext) X(hipdnnBackendCreateAndDeserializeGraph_ext)   \
    X(hipdnnBackendGetSerializedExecutionPlan_ext) X(hipdnnBackendGetSerializedBinaryGraphAndPlan_ext) \
    X(hipdnnSetPluginUnloadMode_ext) X(hipdnnGetEngineIdByName_ext) X(hipdnnSetEnginePluginPaths_ext) \
    X(hipdnnGetHeuristicPolicyCount_ext) X(hipdnnGetHeuristicPolicyInfo_ext)
#define X_FIELD(n) __typeof__(&n) n;
static struct { SYMBOLS(X_FIELD) } B;

static const char* drv_last_error(void)
{
    static __thread char msg[HIPDNN_ERROR_STRING_MAX_LENGTH];
    msg[0] = 0;
    if (B.hipdnnPeekLastErrorString_ext) B.hipdnnPeekLastErrorString_ext(msg, sizeof msg);
    return msg;
}
#include "driver_common.h"
#define CALL(tag, fn, args, expr) DRV_CALL(B, tag, fn, args, expr)

static int m_handle(void)
{
    hipdnnHandle_t h = NULL, hs[16];
    CALL("create", hipdnnCreate, "&handle", (&h));
    printf("{\"t\":\"handle\",\"null\":%d}\n", h == NULL);
    CALL("destroy", hipdnnDestroy, "handle", (h));
    CALL("create_null", hipdnnCreate, "NULL", (NULL));
    CALL("destroy_null", hipdnnDestroy, "NULL", (NULL));
    int bad = 0;
    for (int i = 0; i < 16; i++) bad += B.hipdnnCreate(&hs[i]) != 0;
    for (int i = 0; i < 16; i++) bad += B.hipdnnDestroy(hs[i]) != 0;
    printf("{\"t\":\"many\",\"failures\":%d}\n", bad);
    done();
    return 0;
}

static int m_descriptor(void)
{
    hipdnnBackendDescriptor_t d = NULL;
    CALL("unknown_type", hipdnnBackendCreateDescriptor, "type=9999, &desc", ((hipdnnBackendDescriptorType_t)9999, &d));
    CALL("not_creatable", hipdnnBackendCreateDescriptor, "HIPDNN_BACKEND_INTERMEDIATE_INFO_DESCRIPTOR, &desc",
         (HIPDNN_BACKEND_INTERMEDIATE_INFO_DESCRIPTOR, &d));
    CALL("create_null", hipdnnBackendCreateDescriptor, "HIPDNN_BACKEND_TENSOR_DESCRIPTOR, NULL", (HIPDNN_BACKEND_TENSOR_DESCRIPTOR, NULL));
    CALL("destroy_null", hipdnnBackendDestroyDescriptor, "NULL", (NULL));
    CALL("finalize_null", hipdnnBackendFinalize, "NULL", (NULL));
    done();
    return 0;
}

static int m_tensor(void)
{
    hipdnnBackendDescriptor_t t = NULL, t2 = NULL;
    int64_t dims[2] = {2, 3}, strides[2] = {3, 1}, uid = 7, three[3] = {1, 2, 3}, out[4] = {0}, n = -1;
    hipdnnDataType_t dt = HIPDNN_DATA_FLOAT;
    CALL("create", hipdnnBackendCreateDescriptor, "HIPDNN_BACKEND_TENSOR_DESCRIPTOR, &desc", (HIPDNN_BACKEND_TENSOR_DESCRIPTOR, &t));
    CALL("get_before_finalize", hipdnnBackendGetAttribute, "tensor, DIMENSIONS, INT64, 2, &n, out (not finalized)",
         (t, HIPDNN_ATTR_TENSOR_DIMENSIONS, HIPDNN_TYPE_INT64, 2, &n, out));
    CALL("finalize_empty", hipdnnBackendFinalize, "tensor with nothing set", (t));
    CALL("set_wrong_type", hipdnnBackendSetAttribute, "tensor, DIMENSIONS, BOOLEAN, 2, dims",
         (t, HIPDNN_ATTR_TENSOR_DIMENSIONS, HIPDNN_TYPE_BOOLEAN, 2, dims));
    CALL("set_null_array", hipdnnBackendSetAttribute, "tensor, DIMENSIONS, INT64, 2, NULL",
         (t, HIPDNN_ATTR_TENSOR_DIMENSIONS, HIPDNN_TYPE_INT64, 2, NULL));
    CALL("set_scalar_count2", hipdnnBackendSetAttribute, "tensor, UNIQUE_ID, INT64, 2, dims",
         (t, HIPDNN_ATTR_TENSOR_UNIQUE_ID, HIPDNN_TYPE_INT64, 2, dims));
    CALL("set_vector_count0", hipdnnBackendSetAttribute, "tensor, DIMENSIONS, INT64, 0, dims",
         (t, HIPDNN_ATTR_TENSOR_DIMENSIONS, HIPDNN_TYPE_INT64, 0, dims));
    CALL("set_unknown_attr", hipdnnBackendSetAttribute, "tensor, attribute 99999, INT64, 1, &uid",
         (t, (hipdnnBackendAttributeName_t)99999, HIPDNN_TYPE_INT64, 1, &uid));
    CALL("set_uid", hipdnnBackendSetAttribute, "tensor, UNIQUE_ID, INT64, 1, &uid", (t, HIPDNN_ATTR_TENSOR_UNIQUE_ID, HIPDNN_TYPE_INT64, 1, &uid));
    CALL("set_dtype", hipdnnBackendSetAttribute, "tensor, DATA_TYPE, DATA_TYPE, 1, &FLOAT", (t, HIPDNN_ATTR_TENSOR_DATA_TYPE, HIPDNN_TYPE_DATA_TYPE, 1, &dt));
    CALL("set_dims", hipdnnBackendSetAttribute, "tensor, DIMENSIONS, INT64, 2, {2,3}", (t, HIPDNN_ATTR_TENSOR_DIMENSIONS, HIPDNN_TYPE_INT64, 2, dims));
    CALL("set_strides", hipdnnBackendSetAttribute, "tensor, STRIDES, INT64, 2, {3,1}", (t, HIPDNN_ATTR_TENSOR_STRIDES, HIPDNN_TYPE_INT64, 2, strides));
    CALL("finalize", hipdnnBackendFinalize, "tensor", (t));
    CALL("set_after_finalize", hipdnnBackendSetAttribute, "finalized tensor, UNIQUE_ID, INT64, 1, &uid",
         (t, HIPDNN_ATTR_TENSOR_UNIQUE_ID, HIPDNN_TYPE_INT64, 1, &uid));
    n = -1;
    CALL("get_size_query", hipdnnBackendGetAttribute, "tensor, DIMENSIONS, INT64, 0, &n, NULL",
         (t, HIPDNN_ATTR_TENSOR_DIMENSIONS, HIPDNN_TYPE_INT64, 0, &n, NULL));
    printf("{\"t\":\"size_query\",\"n\":%lld}\n", (long long)n);
    n = -1;
    CALL("get_size_query_null_count", hipdnnBackendGetAttribute, "tensor, DIMENSIONS, INT64, 0, NULL, NULL",
         (t, HIPDNN_ATTR_TENSOR_DIMENSIONS, HIPDNN_TYPE_INT64, 0, NULL, NULL));
    out[0] = out[1] = out[2] = -5;
    CALL("get_truncated", hipdnnBackendGetAttribute, "tensor, DIMENSIONS, INT64, 1, &n, out",
         (t, HIPDNN_ATTR_TENSOR_DIMENSIONS, HIPDNN_TYPE_INT64, 1, &n, out));
    printf("{\"t\":\"truncated\",\"n\":%lld,\"v0\":%lld,\"v1\":%lld}\n", (long long)n, (long long)out[0], (long long)out[1]);
    CALL("get_full", hipdnnBackendGetAttribute, "tensor, DIMENSIONS, INT64, 4, &n, out",
         (t, HIPDNN_ATTR_TENSOR_DIMENSIONS, HIPDNN_TYPE_INT64, 4, &n, out));
    printf("{\"t\":\"full\",\"n\":%lld,\"v0\":%lld,\"v1\":%lld}\n", (long long)n, (long long)out[0], (long long)out[1]);
    CALL("get_wrong_type", hipdnnBackendGetAttribute, "tensor, UNIQUE_ID, BOOLEAN, 1, &n, out",
         (t, HIPDNN_ATTR_TENSOR_UNIQUE_ID, HIPDNN_TYPE_BOOLEAN, 1, &n, out));
    CALL("destroy", hipdnnBackendDestroyDescriptor, "tensor", (t));
    /* dims/strides of different lengths */
    CALL("create2", hipdnnBackendCreateDescriptor, "HIPDNN_BACKEND_TENSOR_DESCRIPTOR, &desc", (HIPDNN_BACKEND_TENSOR_DESCRIPTOR, &t2));
    CALL("set2_uid", hipdnnBackendSetAttribute, "tensor, UNIQUE_ID, INT64, 1, &uid", (t2, HIPDNN_ATTR_TENSOR_UNIQUE_ID, HIPDNN_TYPE_INT64, 1, &uid));
    CALL("set2_dtype", hipdnnBackendSetAttribute, "tensor, DATA_TYPE, DATA_TYPE, 1, &FLOAT", (t2, HIPDNN_ATTR_TENSOR_DATA_TYPE, HIPDNN_TYPE_DATA_TYPE, 1, &dt));
    CALL("set2_dims", hipdnnBackendSetAttribute, "tensor, DIMENSIONS, INT64, 3, {1,2,3}", (t2, HIPDNN_ATTR_TENSOR_DIMENSIONS, HIPDNN_TYPE_INT64, 3, three));
    CALL("set2_strides", hipdnnBackendSetAttribute, "tensor, STRIDES, INT64, 2, {3,1}", (t2, HIPDNN_ATTR_TENSOR_STRIDES, HIPDNN_TYPE_INT64, 2, strides));
    CALL("finalize_mismatch", hipdnnBackendFinalize, "tensor with 3 dims and 2 strides", (t2));
    CALL("destroy2", hipdnnBackendDestroyDescriptor, "tensor", (t2));
    done();
    return 0;
}

static int m_last_error(void)
{
    char small[8], full[HIPDNN_ERROR_STRING_MAX_LENGTH], again[HIPDNN_ERROR_STRING_MAX_LENGTH], after[HIPDNN_ERROR_STRING_MAX_LENGTH];
    hipdnnBackendDescriptor_t d = NULL;
    need((const void*)B.hipdnnPeekLastErrorString_ext, "hipdnnPeekLastErrorString_ext");
    need((const void*)B.hipdnnGetLastErrorString, "hipdnnGetLastErrorString");
    CALL("fail", hipdnnBackendCreateDescriptor, "HIPDNN_BACKEND_TENSOR_DESCRIPTOR, NULL", (HIPDNN_BACKEND_TENSOR_DESCRIPTOR, NULL));
    memset(small, 'X', sizeof small);
    B.hipdnnPeekLastErrorString_ext(small, sizeof small);
    int nul_ok = memchr(small, 0, sizeof small) != NULL;
    B.hipdnnPeekLastErrorString_ext(full, sizeof full);
    /* a successful call must not clear it */
    CALL("success", hipdnnBackendCreateDescriptor, "HIPDNN_BACKEND_TENSOR_DESCRIPTOR, &desc", (HIPDNN_BACKEND_TENSOR_DESCRIPTOR, &d));
    if (d) B.hipdnnBackendDestroyDescriptor(d);
    B.hipdnnPeekLastErrorString_ext(again, sizeof again);
    char got[HIPDNN_ERROR_STRING_MAX_LENGTH];
    B.hipdnnGetLastErrorString(got, sizeof got);
    B.hipdnnPeekLastErrorString_ext(after, sizeof after);
    printf("{\"t\":\"last_error\",\"small_nul\":%d,\"small\":", nul_ok);
    jstr(nul_ok ? small : "");
    printf(",\"full\":"); jstr(full);
    printf(",\"after_success\":"); jstr(again);
    printf(",\"get\":"); jstr(got);
    printf(",\"after_get\":"); jstr(after);
    printf("}\n");
    printf("{\"t\":\"pre\",\"tag\":\"null_buf\",\"fn\":\"hipdnnGetLastErrorString\",\"args\":\"NULL, 16\"}\n");
    fflush(stdout);
    B.hipdnnGetLastErrorString(NULL, 16);
    B.hipdnnPeekLastErrorString_ext(NULL, 16);
    printf("{\"t\":\"null_buf_ok\"}\n");
    done();
    return 0;
}

static int m_strings(void)
{
    need((const void*)B.hipdnnGetErrorString, "hipdnnGetErrorString");
    int codes[4] = {0, 3, 8, 9999};
    for (int i = 0; i < 4; i++) {
        const char* a = B.hipdnnGetErrorString((hipdnnStatus_t)codes[i]);
        const char* b = B.hipdnnGetErrorString((hipdnnStatus_t)codes[i]);
        printf("{\"t\":\"error_string\",\"code\":%d,\"same_ptr\":%d,\"value\":", codes[i], a == b);
        jstr(a);
        printf("}\n");
    }
    need((const void*)B.hipdnnVersionString_ext, "hipdnnVersionString_ext");
    printf("{\"t\":\"version\",\"value\":");
    jstr(B.hipdnnVersionString_ext());
    printf("}\n");
    done();
    return 0;
}

/* ------------------------------------------------------------------ graphs (spec §1.5, §2.2) */
typedef hipdnnBackendDescriptor_t D;
#define MUST(tag, fn, args, expr) do { if (CALL(tag, fn, args, expr)) fatal(#fn " failed (" tag ")"); } while (0)

/* a finalized [3,4] float tensor; scalar = [1,1] with an optional baked value and runtime flag */
static D tensor(int64_t uid, int scalar, const float* value, int runtime)
{
    D t = NULL;
    int64_t dims[2] = {3, 4}, strides[2] = {4, 1}, one[2] = {1, 1};
    hipdnnDataType_t dt = HIPDNN_DATA_FLOAT;
    int virt = 0, rt = 1;
    MUST("t_create", hipdnnBackendCreateDescriptor, "TENSOR", (HIPDNN_BACKEND_TENSOR_DESCRIPTOR, &t));
    MUST("t_uid", hipdnnBackendSetAttribute, "UNIQUE_ID", (t, HIPDNN_ATTR_TENSOR_UNIQUE_ID, HIPDNN_TYPE_INT64, 1, &uid));
    MUST("t_dt", hipdnnBackendSetAttribute, "DATA_TYPE", (t, HIPDNN_ATTR_TENSOR_DATA_TYPE, HIPDNN_TYPE_DATA_TYPE, 1, &dt));
    MUST("t_dims", hipdnnBackendSetAttribute, "DIMENSIONS", (t, HIPDNN_ATTR_TENSOR_DIMENSIONS, HIPDNN_TYPE_INT64, 2, scalar ? one : dims));
    MUST("t_strides", hipdnnBackendSetAttribute, "STRIDES", (t, HIPDNN_ATTR_TENSOR_STRIDES, HIPDNN_TYPE_INT64, 2, scalar ? one : strides));
    MUST("t_virtual", hipdnnBackendSetAttribute, "IS_VIRTUAL", (t, HIPDNN_ATTR_TENSOR_IS_VIRTUAL, HIPDNN_TYPE_BOOLEAN, 1, &virt));
    if (value) MUST("t_value", hipdnnBackendSetAttribute, "VALUE_EXT", (t, HIPDNN_ATTR_TENSOR_VALUE_EXT, HIPDNN_TYPE_CHAR, 4, value));
    if (runtime) MUST("t_runtime", hipdnnBackendSetAttribute, "IS_RUNTIME_PASS_BY_VALUE_EXT", (t, HIPDNN_ATTR_TENSOR_IS_RUNTIME_PASS_BY_VALUE_EXT, HIPDNN_TYPE_BOOLEAN, 1, &rt));
    MUST("t_finalize", hipdnnBackendFinalize, "tensor", (t));
    return t;
}
/* a finalized pointwise op z = x (mode) y */
static D pointwise(int mode, D x, D y, D z)
{
    D op = NULL;
    hipdnnDataType_t dt = HIPDNN_DATA_FLOAT;
    int32_t m = mode;
    MUST("op_create", hipdnnBackendCreateDescriptor, "OPERATION_POINTWISE", (HIPDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, &op));
    MUST("op_mode", hipdnnBackendSetAttribute, "POINTWISE_MODE", (op, HIPDNN_ATTR_POINTWISE_MODE, HIPDNN_TYPE_POINTWISE_MODE, 1, &m));
    MUST("op_prec", hipdnnBackendSetAttribute, "POINTWISE_MATH_PREC", (op, HIPDNN_ATTR_POINTWISE_MATH_PREC, HIPDNN_TYPE_DATA_TYPE, 1, &dt));
    MUST("op_in0", hipdnnBackendSetAttribute, "IN_0", (op, HIPDNN_ATTR_OPERATION_POINTWISE_IN_0_EXT, HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x));
    MUST("op_in1", hipdnnBackendSetAttribute, "IN_1", (op, HIPDNN_ATTR_OPERATION_POINTWISE_IN_1_EXT, HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y));
    MUST("op_out0", hipdnnBackendSetAttribute, "OUT_0", (op, HIPDNN_ATTR_OPERATION_POINTWISE_OUT_0_EXT, HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, &z));
    CALL("op_finalize", hipdnnBackendFinalize, "pointwise op", (op));
    return op;
}
/* an operation graph: ops and/or handle (NULL = not set), finalized when both are set */
static D graph(D op, hipdnnHandle_t h, const char* tag)
{
    D g = NULL;
    int ovr = 0;
    MUST("g_create", hipdnnBackendCreateDescriptor, "OPERATIONGRAPH", (HIPDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &g));
    if (op) MUST("g_ops", hipdnnBackendSetAttribute, "OPS", (g, HIPDNN_ATTR_OPERATIONGRAPH_OPS, HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, &op));
    MUST("g_ovr", hipdnnBackendSetAttribute, "IS_OVERRIDE_SHAPE_ENABLED_EXT", (g, HIPDNN_ATTR_OPERATIONGRAPH_IS_OVERRIDE_SHAPE_ENABLED_EXT, HIPDNN_TYPE_BOOLEAN, 1, &ovr));
    if (h) MUST("g_handle", hipdnnBackendSetAttribute, "HANDLE", (g, HIPDNN_ATTR_OPERATIONGRAPH_HANDLE, HIPDNN_TYPE_HANDLE, 1, &h));
    char args[128];
    snprintf(args, sizeof args, "operation graph (%s)", op && h ? "ops and handle set" : op ? "no handle" : h ? "no ops" : "nothing set");
    CALL(tag, hipdnnBackendFinalize, args, (g));
    return g;
}
static D add_graph(hipdnnHandle_t h)
{
    D x = tensor(1, 0, NULL, 0), y = tensor(2, 0, NULL, 0), z = tensor(3, 0, NULL, 0);
    D op = pointwise(HIPDNN_POINTWISE_ADD, x, y, z);
    D g = graph(op, h, "graph_finalize");
    B.hipdnnBackendDestroyDescriptor(x); B.hipdnnBackendDestroyDescriptor(y); B.hipdnnBackendDestroyDescriptor(z);
    B.hipdnnBackendDestroyDescriptor(op);
    return g;
}

static int m_graph(const char* stamped14)
{
    hipdnnHandle_t h = NULL;
    MUST("create", hipdnnCreate, "&handle", (&h));
    D x = tensor(1, 0, NULL, 0), y = tensor(2, 0, NULL, 0), z = tensor(3, 0, NULL, 0);
    D op = pointwise(HIPDNN_POINTWISE_ADD, x, y, z);
    D g0 = graph(NULL, NULL, "graph_finalize_nothing");
    D g1 = graph(op, NULL, "graph_finalize_no_handle");
    D g2 = graph(NULL, h, "graph_finalize_no_ops");
    D g = graph(op, h, "graph_finalize");
    /* serialized graph: size query, one byte short, exact */
    size_t sz = 0, sz2 = 0, sz3 = 0;
    CALL("ser_size", hipdnnBackendGetSerializedBinaryGraph_ext, "graph, 0, &size, NULL", (g, 0, &sz, NULL));
    uint8_t* buf = malloc(sz + 1);
    if (sz) {
        CALL("ser_short", hipdnnBackendGetSerializedBinaryGraph_ext, "graph, size - 1, &size, buf", (g, sz - 1, &sz2, buf));
        CALL("ser_full", hipdnnBackendGetSerializedBinaryGraph_ext, "graph, size, &size, buf", (g, sz, &sz3, buf));
    }
    printf("{\"t\":\"ser\",\"size\":%zu,\"short_size\":%zu,\"full_size\":%zu}\n", sz, sz2, sz3);
    int flags = -1;
    CALL("contents_4", hipdnnBackendGetSerializedBinaryContents_ext, "4 arbitrary bytes, 4, &flags", ((const uint8_t*)"\x01\x02\x03\x04", 4, &flags));
    printf("{\"t\":\"contents\",\"flags\":%d}\n", flags);
    flags = -1;
    if (sz) {
        CALL("contents_graph", hipdnnBackendGetSerializedBinaryContents_ext, "serialized graph, size, &flags", (buf, sz, &flags));
        printf("{\"t\":\"contents_graph\",\"flags\":%d}\n", flags);
        D d = NULL;
        if (!CALL("deser_good", hipdnnBackendCreateAndDeserializeGraph_ext, "&desc, serialized graph, size", (&d, buf, sz)) && d)
            B.hipdnnBackendDestroyDescriptor(d);
    }
    static const char junk[] = "this is not a FlatBuffer graph!!this is not a FlatBuffer graph!!";
    D dj = NULL;
    CALL("deser_junk", hipdnnBackendCreateAndDeserializeGraph_ext, "&desc, 64 junk bytes, 64", (&dj, (const uint8_t*)junk, 64));
    if (stamped14 && strcmp(stamped14, "-")) {
        size_t n;
        uint8_t* sb = slurp(stamped14, &n);
        D ds = NULL;
        CALL("deser_min_api_1_4", hipdnnBackendCreateAndDeserializeGraph_ext, "&desc, graph stamped min API 1.4.0, size", (&ds, sb, n));
        free(sb);
    }
    /* engine finalize with an id no plugin offers (no plugins are loaded) */
    D e = NULL;
    int64_t bad_id = 0x0123456789abcdefLL;
    MUST("e_create", hipdnnBackendCreateDescriptor, "ENGINE", (HIPDNN_BACKEND_ENGINE_DESCRIPTOR, &e));
    MUST("e_graph", hipdnnBackendSetAttribute, "ENGINE_OPERATION_GRAPH", (e, HIPDNN_ATTR_ENGINE_OPERATION_GRAPH, HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g));
    MUST("e_id", hipdnnBackendSetAttribute, "ENGINE_GLOBAL_INDEX", (e, HIPDNN_ATTR_ENGINE_GLOBAL_INDEX, HIPDNN_TYPE_INT64, 1, &bad_id));
    CALL("engine_bad_id", hipdnnBackendFinalize, "engine with an id no plugin offers", (e));
    /* plugin management misuse (§3.2, §6, checklist 14-16) */
    CALL("unload_mode_bad", hipdnnSetPluginUnloadMode_ext, "-1", ((hipdnnPluginUnloadingMode_ext_t)-1));
    int64_t id = 0;
    CALL("engine_by_empty_name", hipdnnGetEngineIdByName_ext, "handle, \"\", &id", (h, "", &id));
    CALL("set_paths_same", hipdnnSetEnginePluginPaths_ext, "0, NULL, ADDITIVE (unchanged) with a live handle", (0, NULL, HIPDNN_PLUGIN_LOADING_ADDITIVE));
    const char* paths[1] = {"/nonexistent/hipdnn-conform-plugin-dir"};
    CALL("set_paths_live", hipdnnSetEnginePluginPaths_ext, "1, {\"/nonexistent/...\"}, ADDITIVE with a live handle", (1, paths, HIPDNN_PLUGIN_LOADING_ADDITIVE));
    D ds[] = {e, g, g0, g1, g2, op, x, y, z};
    for (size_t i = 0; i < sizeof ds / sizeof ds[0]; i++) B.hipdnnBackendDestroyDescriptor(ds[i]);
    free(buf);
    CALL("destroy", hipdnnDestroy, "handle", (h));
    done();
    return 0;
}

/* ------------------------------------------------------------------ heuristic -> plan -> execute */
static int heur_results(D g, const char* pfx, D** cfgs_out, int64_t* n_out)
{
    D hr = NULL;
    int mode = HIPDNN_HEUR_MODE_FALLBACK;
    char tag[64];
    MUST("h_create", hipdnnBackendCreateDescriptor, "ENGINEHEUR", (HIPDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &hr));
    MUST("h_graph", hipdnnBackendSetAttribute, "ENGINEHEUR_OPERATION_GRAPH", (hr, HIPDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g));
    MUST("h_mode", hipdnnBackendSetAttribute, "ENGINEHEUR_MODE FALLBACK", (hr, HIPDNN_ATTR_ENGINEHEUR_MODE, HIPDNN_TYPE_HEUR_MODE, 1, &mode));
    snprintf(tag, sizeof tag, "%sheur_finalize", pfx);
    if (CALL(tag, hipdnnBackendFinalize, "engine heuristic", (hr))) fatal("heuristic finalize failed");
    int64_t n = -1, m = -1;
    snprintf(tag, sizeof tag, "%sresults_count", pfx);
    CALL(tag, hipdnnBackendGetAttribute, "heur, RESULTS, BACKEND_DESCRIPTOR, 0, &n, NULL", (hr, HIPDNN_ATTR_ENGINEHEUR_RESULTS, HIPDNN_TYPE_BACKEND_DESCRIPTOR, 0, &n, NULL));
    D* cfgs = calloc((size_t)(n > 0 ? n : 0) + 1, sizeof *cfgs);
    if (n > 0) {
        snprintf(tag, sizeof tag, "%sresults_null_array", pfx);
        CALL(tag, hipdnnBackendGetAttribute, "heur, RESULTS, BACKEND_DESCRIPTOR, 2, &n, NULL", (hr, HIPDNN_ATTR_ENGINEHEUR_RESULTS, HIPDNN_TYPE_BACKEND_DESCRIPTOR, 2, &m, NULL));
        for (int64_t i = 0; i < n; i++) MUST("cfg_create", hipdnnBackendCreateDescriptor, "ENGINECFG", (HIPDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfgs[i]));
        m = -1;
        snprintf(tag, sizeof tag, "%sresults_fetch", pfx);
        CALL(tag, hipdnnBackendGetAttribute, "heur, RESULTS, BACKEND_DESCRIPTOR, n, &m, cfgs", (hr, HIPDNN_ATTR_ENGINEHEUR_RESULTS, HIPDNN_TYPE_BACKEND_DESCRIPTOR, n, &m, cfgs));
    }
    printf("{\"t\":\"%sresults\",\"n\":%lld,\"m\":%lld}\n", pfx, (long long)n, (long long)m);
    B.hipdnnBackendDestroyDescriptor(hr);
    *cfgs_out = cfgs;
    *n_out = n;
    return 0;
}
static int64_t cfg_engine_id(D cfg)
{
    D e = NULL;
    int64_t c = 0, id = 0;
    MUST("cfg_engine", hipdnnBackendGetAttribute, "cfg, ENGINECFG_ENGINE, 1, &c, &engine", (cfg, HIPDNN_ATTR_ENGINECFG_ENGINE, HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c, &e));
    MUST("engine_id", hipdnnBackendGetAttribute, "engine, ENGINE_GLOBAL_INDEX, 1, &c, &id", (e, HIPDNN_ATTR_ENGINE_GLOBAL_INDEX, HIPDNN_TYPE_INT64, 1, &c, &id));
    B.hipdnnBackendDestroyDescriptor(e);
    return id;
}

static int m_engine(void)
{
    hipdnnHandle_t h = NULL;
    MUST("create", hipdnnCreate, "&handle", (&h));
    D g = add_graph(h);
    D* cfgs;
    int64_t n;
    heur_results(g, "", &cfgs, &n);
    if (n <= 0) fatal("the heuristic offers no engine config for a float32 [3,4] ADD");
    CALL("cfg_finalize", hipdnnBackendFinalize, "engine config #0 from the heuristic", (cfgs[0]));
    int64_t eid = cfg_engine_id(cfgs[0]);
    printf("{\"t\":\"engine\",\"id\":\"%lld\"}\n", (long long)eid);
    D plan = NULL;
    MUST("plan_create", hipdnnBackendCreateDescriptor, "EXECUTION_PLAN", (HIPDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan));
    MUST("plan_cfg", hipdnnBackendSetAttribute, "EXECUTION_PLAN_ENGINE_CONFIG", (plan, HIPDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfgs[0]));
    if (CALL("plan_finalize", hipdnnBackendFinalize, "plan", (plan))) fatal("plan finalize failed");
    int64_t ws = 0, c = 0;
    CALL("plan_ws", hipdnnBackendGetAttribute, "plan, WORKSPACE_SIZE, INT64, 1, &c, &ws", (plan, HIPDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, HIPDNN_TYPE_INT64, 1, &c, &ws));
    float x[12], y[12], zz[12];
    for (int i = 0; i < 12; i++) { x[i] = 0.25f * (float)i - 1.0f; y[i] = 2.0f - 0.5f * (float)i; zz[i] = -999.0f; }
    void* ptrs[3] = {x, y, zz};
    int64_t uids[3] = {1, 2, 3};
    void* wsp = ws > 0 ? calloc(1, (size_t)ws) : NULL;
    D vp = NULL;
    MUST("vp_create", hipdnnBackendCreateDescriptor, "VARIANT_PACK", (HIPDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp));
    MUST("vp_ptrs", hipdnnBackendSetAttribute, "DATA_POINTERS", (vp, HIPDNN_ATTR_VARIANT_PACK_DATA_POINTERS, HIPDNN_TYPE_VOID_PTR, 3, ptrs));
    MUST("vp_uids", hipdnnBackendSetAttribute, "UNIQUE_IDS", (vp, HIPDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, HIPDNN_TYPE_INT64, 3, uids));
    MUST("vp_ws", hipdnnBackendSetAttribute, "WORKSPACE", (vp, HIPDNN_ATTR_VARIANT_PACK_WORKSPACE, HIPDNN_TYPE_VOID_PTR, 1, &wsp));
    CALL("execute_unfinalized_vp", hipdnnBackendExecute, "handle, plan, variant pack not finalized", (h, plan, vp));
    MUST("vp_finalize", hipdnnBackendFinalize, "variant pack", (vp));
    CALL("execute", hipdnnBackendExecute, "handle, plan, variant pack (host buffers)", (h, plan, vp));
    int ok = 1;
    for (int i = 0; i < 12; i++) ok &= zz[i] == x[i] + y[i];
    printf("{\"t\":\"execute\",\"correct\":%d,\"z0\":%g}\n", ok, (double)zz[0]);
    /* serialized plan and graph+plan: two-call, one byte short (when the engine serializes) */
    size_t sz = 0, s2 = 0;
    int st = CALL("plan_ser_size", hipdnnBackendGetSerializedExecutionPlan_ext, "plan, 0, &size, NULL", (plan, 0, &sz, NULL));
    if (!st && sz) {
        uint8_t* b = malloc(sz);
        CALL("plan_ser_short", hipdnnBackendGetSerializedExecutionPlan_ext, "plan, size - 1, &size, buf", (plan, sz - 1, &s2, b));
        CALL("plan_ser_full", hipdnnBackendGetSerializedExecutionPlan_ext, "plan, size, &size, buf", (plan, sz, &s2, b));
        free(b);
    }
    sz = 0;
    st = CALL("gp_ser_size", hipdnnBackendGetSerializedBinaryGraphAndPlan_ext, "graph, plan, 0, &size, NULL", (g, plan, 0, &sz, NULL));
    if (!st && sz) {
        uint8_t* b = malloc(sz);
        CALL("gp_ser_short", hipdnnBackendGetSerializedBinaryGraphAndPlan_ext, "graph, plan, size - 1, &size, buf", (g, plan, sz - 1, &s2, b));
        CALL("gp_ser_full", hipdnnBackendGetSerializedBinaryGraphAndPlan_ext, "graph, plan, size, &size, buf", (g, plan, sz, &s2, b));
        int flags = -1;
        CALL("gp_contents", hipdnnBackendGetSerializedBinaryContents_ext, "graph+plan blob, size, &flags", (b, sz, &flags));
        printf("{\"t\":\"gp_contents\",\"flags\":%d}\n", flags);
        free(b);
    }
    B.hipdnnBackendDestroyDescriptor(vp);
    B.hipdnnBackendDestroyDescriptor(plan);
    for (int64_t i = 0; i < n; i++) B.hipdnnBackendDestroyDescriptor(cfgs[i]);
    free(cfgs);
    free(wsp);
    /* runtime pass-by-value graph (z = x * s, s a [1,1] runtime user-supplied scalar) and the same
       graph with s a compile-time constant: which engines does the heuristic offer? */
    for (int runtime = 1; runtime >= 0; runtime--) {
        float two = 2.0f;
        D tx = tensor(1, 0, NULL, 0), ts = tensor(2, 1, runtime ? NULL : &two, runtime), tz = tensor(3, 0, NULL, 0);
        D op = pointwise(HIPDNN_POINTWISE_MUL, tx, ts, tz);
        D gg = graph(op, h, runtime ? "pbv_graph_finalize" : "const_graph_finalize");
        D* cs;
        int64_t k;
        heur_results(gg, runtime ? "pbv_" : "const_", &cs, &k);
        int64_t* ids = calloc((size_t)(k > 0 ? k : 0) + 1, sizeof *ids);
        for (int64_t i = 0; i < k; i++) {
            if (B.hipdnnBackendFinalize(cs[i])) fatal("finalizing a heuristic engine config failed");
            ids[i] = cfg_engine_id(cs[i]);
        }
        printf("{\"t\":\"%s_engines\",\"ids\":[", runtime ? "pbv" : "const");
        for (int64_t i = 0; i < k; i++) printf("%s\"%lld\"", i ? "," : "", (long long)ids[i]);
        printf("]}\n");
        free(ids);
        for (int64_t i = 0; i < k; i++) B.hipdnnBackendDestroyDescriptor(cs[i]);
        free(cs);
        D ds[] = {gg, op, tx, ts, tz};
        for (size_t i = 0; i < 5; i++) B.hipdnnBackendDestroyDescriptor(ds[i]);
    }
    B.hipdnnBackendDestroyDescriptor(g);
    CALL("destroy", hipdnnDestroy, "handle", (h));
    done();
    return 0;
}

/* ------------------------------------------------------------------ heuristic plugin policies */
static int64_t fnv1a64(const char* s)
{
    uint64_t h = 0xCBF29CE484222325ull;
    for (; *s; ++s) { h ^= (unsigned char)*s; h *= 0x100000001B3ull; }
    return (int64_t)h;
}
/* ENGINEHEUR on g with POLICY_ORDER_EXT = {pid}: prints {"t":"order","id":..,"st":..,"ids":[..]} */
static void ordered(D g, int64_t pid, const char* tag)
{
    D hr = NULL;
    int mode = HIPDNN_HEUR_MODE_FALLBACK;
    MUST("h_create", hipdnnBackendCreateDescriptor, "ENGINEHEUR", (HIPDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &hr));
    MUST("h_graph", hipdnnBackendSetAttribute, "ENGINEHEUR_OPERATION_GRAPH", (hr, HIPDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g));
    MUST("h_mode", hipdnnBackendSetAttribute, "ENGINEHEUR_MODE FALLBACK", (hr, HIPDNN_ATTR_ENGINEHEUR_MODE, HIPDNN_TYPE_HEUR_MODE, 1, &mode));
    MUST("h_order", hipdnnBackendSetAttribute, "ENGINEHEUR_POLICY_ORDER_EXT {policy_id}", (hr, HIPDNN_ATTR_ENGINEHEUR_POLICY_ORDER_EXT, HIPDNN_TYPE_INT64, 1, &pid));
    int st = CALL(tag, hipdnnBackendFinalize, "engine heuristic with POLICY_ORDER_EXT {policy_id}", (hr));
    int64_t n = 0, m = 0;
    int64_t* ids = NULL;
    if (!st) {
        MUST("h_count", hipdnnBackendGetAttribute, "heur, RESULTS, 0, &n, NULL", (hr, HIPDNN_ATTR_ENGINEHEUR_RESULTS, HIPDNN_TYPE_BACKEND_DESCRIPTOR, 0, &n, NULL));
        D* cfgs = calloc((size_t)(n > 0 ? n : 0) + 1, sizeof *cfgs);
        ids = calloc((size_t)(n > 0 ? n : 0) + 1, sizeof *ids);
        for (int64_t i = 0; i < n; i++) MUST("cfg_create", hipdnnBackendCreateDescriptor, "ENGINECFG", (HIPDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfgs[i]));
        if (n > 0) MUST("h_fetch", hipdnnBackendGetAttribute, "heur, RESULTS, n, &m, cfgs", (hr, HIPDNN_ATTR_ENGINEHEUR_RESULTS, HIPDNN_TYPE_BACKEND_DESCRIPTOR, n, &m, cfgs));
        int64_t k = 0;
        for (int64_t i = 0; i < m; i++)
            if (!CALL("cfg_finalize", hipdnnBackendFinalize, "engine config from the heuristic", (cfgs[i])))
                ids[k++] = cfg_engine_id(cfgs[i]);
        m = k;
        for (int64_t i = 0; i < n; i++) B.hipdnnBackendDestroyDescriptor(cfgs[i]);
        free(cfgs);
    }
    printf("{\"t\":\"order\",\"tag\":\"%s\",\"id\":\"%lld\",\"st\":%d,\"n\":%lld,\"ids\":[", tag, (long long)pid, st,
           (long long)n);
    for (int64_t i = 0; i < m; i++) printf("%s\"%lld\"", i ? "," : "", (long long)ids[i]);
    printf("]}\n");
    fflush(stdout);
    free(ids);
    B.hipdnnBackendDestroyDescriptor(hr);
}
static int m_heur_host(const char* pids)
{
    hipdnnHandle_t h = NULL;
    MUST("create", hipdnnCreate, "&handle", (&h));
    size_t np = 0;
    MUST("policy_count", hipdnnGetHeuristicPolicyCount_ext, "handle, &count", (h, &np));
    printf("{\"t\":\"policy_count\",\"n\":%zu}\n", np);
    for (size_t i = 0; i < np && i < 4096; i++) {
        int64_t id = 0;
        size_t L[4] = {0, 0, 0, 0};
        MUST("policy_info_size", hipdnnGetHeuristicPolicyInfo_ext, "handle, i, &id, NULL, &len, ... (sizes)",
             (h, i, &id, NULL, &L[0], NULL, &L[1], NULL, &L[2], NULL, &L[3]));
        char* b[4];
        for (int k = 0; k < 4; k++) b[k] = calloc(L[k] + 1, 1);
        MUST("policy_info", hipdnnGetHeuristicPolicyInfo_ext, "handle, i, &id, name, &len, plugin, &len, version, &len, api, &len",
             (h, i, &id, b[0], &L[0], b[1], &L[1], b[2], &L[2], b[3], &L[3]));
        printf("{\"t\":\"policy\",\"idx\":%zu,\"id\":\"%lld\",\"name\":", i, (long long)id);
        jstr(b[0]); printf(",\"plugin\":"); jstr(b[1]); printf(",\"version\":"); jstr(b[2]);
        printf(",\"api_version\":"); jstr(b[3]); printf("}\n");
        for (int k = 0; k < 4; k++) free(b[k]);
    }
    D g = add_graph(h);
    ordered(g, fnv1a64("SelectionHeuristic::StaticOrdering"), "static");
    const char* q = pids;
    while (q && *q) {
        char* e;
        int64_t pid = strtoll(q, &e, 10);
        if (e == q) break;
        ordered(g, pid, "policy");
        q = *e == ',' ? e + 1 : e;
    }
    B.hipdnnBackendDestroyDescriptor(g);
    CALL("destroy", hipdnnDestroy, "handle", (h));
    done();
    return 0;
}

int main(int argc, char** argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 3) return 2;
    void* lib = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        printf("{\"t\":\"dlopen\",\"error\":");
        jstr(dlerror());
        printf("}\n");
        return 5;
    }
#define X_LOAD(n) *(void**)(&B.n) = dlsym(lib, #n);
    SYMBOLS(X_LOAD)
    const char* m = argv[1];
    if (!strcmp(m, "handle")) return m_handle();
    if (!strcmp(m, "descriptor")) return m_descriptor();
    if (!strcmp(m, "tensor")) return m_tensor();
    if (!strcmp(m, "last_error")) return m_last_error();
    if (!strcmp(m, "strings")) return m_strings();
    if (!strcmp(m, "graph")) return m_graph(argc > 3 ? argv[3] : NULL);
    if (!strcmp(m, "engine")) return m_engine();
    if (!strcmp(m, "heur_host")) return m_heur_host(argc > 3 ? argv[3] : "");
    return 2;
}
