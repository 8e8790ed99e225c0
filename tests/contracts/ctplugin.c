/* A small configurable engine plugin for the contract tests (plan serialization, behaviour notes).
 * Every graph is applicable; execution does nothing (it counts calls).  Compile-time switches:
 *   TAG="x"                  plugin "ctplug_x", engine "CTPLUG_x" (id = FNV-1a-64 of the name)
 *   API_VERSION="1.0.0"      reported plugin API version
 *   DETAILS_H="file.h"       defines `static const unsigned char k_details[]` (EngineDetails)
 *   NO_SERIALIZE             omit the serialization trio
 *   LEGACY_SERIALIZE_ONLY    export only the legacy 3-argument SerializeExecutionContext (+ the
 *                            other two), as plugins built before WithEngineId existed do
 *   WITH_ID_ONLY             export only SerializeExecutionContextWithEngineId (+ the other two)
 *                            (default: both save hooks are exported)
 *   FAIL_SERIALIZE           the save hook fails (INTERNAL_ERROR + message)
 *   EMPTY_PAYLOAD            the save hook succeeds with an empty payload
 *   FAIL_DESTROY_SERIALIZED  the destroy hook fails (INTERNAL_ERROR + message)
 *   FAIL_DESERIALIZE         the restore hook fails (INVALID_VALUE + message)
 *   NULL_FROM_SERIALIZED     the restore hook succeeds with a NULL context
 * ctplug_counters(out[8]) reports: serialize, destroy_serialized, deserialize, execute,
 * destroy_context, outstanding payloads, WithEngineId save calls, legacy save calls.
 */
#include <hipdnn_plugin_sdk/EnginePluginApi.h>
#include <stdlib.h>
#include <string.h>
#ifndef TAG
#define TAG "a"
#endif
#ifndef API_VERSION
#define API_VERSION "1.0.0"
#endif
#ifdef DETAILS_H
#include DETAILS_H
#else
/* EngineDetails with no fields: root offset 8, vtable {4,4}, table soffset 4. */
static const unsigned char k_details[12] = {8, 0, 0, 0, 4, 0, 4, 0, 4, 0, 0, 0};
#endif
#define P HIPDNN_PLUGIN_EXPORT hipdnnPluginStatus_t
static const char* g_err = "";
static int g_handle;
static int g_ctx;
static int g_restored_ctx;
static long g_n[8];

static int64_t engine_id(void)
{
    const char* s = "CTPLUG_" TAG;
    uint64_t h = 0xcbf29ce484222325ull;
    for(; *s; s++) { h ^= (unsigned char)*s; h *= 0x100000001b3ull; }
    return (int64_t)h;
}
HIPDNN_PLUGIN_EXPORT void ctplug_counters(long* out) { memcpy(out, g_n, sizeof g_n); }
P hipdnnPluginGetName(const char** n) { *n = "ctplug_" TAG; return HIPDNN_PLUGIN_STATUS_SUCCESS; }
P hipdnnPluginGetVersion(const char** v) { *v = "1.0.0"; return HIPDNN_PLUGIN_STATUS_SUCCESS; }
P hipdnnPluginGetApiVersion(const char** v) { *v = API_VERSION; return HIPDNN_PLUGIN_STATUS_SUCCESS; }
P hipdnnPluginGetType(hipdnnPluginType_t* t) { *t = HIPDNN_PLUGIN_TYPE_ENGINE; return HIPDNN_PLUGIN_STATUS_SUCCESS; }
HIPDNN_PLUGIN_EXPORT void hipdnnPluginGetLastErrorString(const char** e) { if(e) *e = g_err; }
P hipdnnEnginePluginGetAllEngineIds(int64_t* ids, uint32_t max, uint32_t* n)
{
    *n = 1;
    if(ids && max >= 1) ids[0] = engine_id();
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}
P hipdnnEnginePluginGetEngineName(int64_t id, const char** name) { (void)id; *name = "CTPLUG_" TAG; return HIPDNN_PLUGIN_STATUS_SUCCESS; }
P hipdnnEnginePluginCreate(hipdnnEnginePluginHandle_t* h) { *h = (hipdnnEnginePluginHandle_t)&g_handle; return HIPDNN_PLUGIN_STATUS_SUCCESS; }
P hipdnnEnginePluginDestroy(hipdnnEnginePluginHandle_t h) { (void)h; return HIPDNN_PLUGIN_STATUS_SUCCESS; }
P hipdnnEnginePluginSetStream(hipdnnEnginePluginHandle_t h, hipStream_t s) { (void)h; (void)s; return HIPDNN_PLUGIN_STATUS_SUCCESS; }
P hipdnnEnginePluginGetApplicableEngineIds(hipdnnEnginePluginHandle_t h, const hipdnnPluginConstData_t* g,
                                           int64_t* ids, uint32_t max, uint32_t* n)
{
    (void)h; (void)g; (void)max;
    ids[0] = engine_id();
    *n = 1;
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}
P hipdnnEnginePluginGetEngineDetails(hipdnnEnginePluginHandle_t h, int64_t id, const hipdnnPluginConstData_t* g,
                                     hipdnnPluginConstData_t* d)
{
    (void)h; (void)id; (void)g;
    d->ptr = k_details;
    d->size = sizeof k_details;
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}
P hipdnnEnginePluginDestroyEngineDetails(hipdnnEnginePluginHandle_t h, hipdnnPluginConstData_t* d) { (void)h; (void)d; return HIPDNN_PLUGIN_STATUS_SUCCESS; }
P hipdnnEnginePluginGetWorkspaceSize(hipdnnEnginePluginHandle_t h, const hipdnnPluginConstData_t* c,
                                     const hipdnnPluginConstData_t* g, size_t* ws)
{
    (void)h; (void)c; (void)g;
    *ws = 64;
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}
P hipdnnEnginePluginCreateExecutionContext(hipdnnEnginePluginHandle_t h, const hipdnnPluginConstData_t* c,
                                           const hipdnnPluginConstData_t* g, hipdnnEnginePluginExecutionContext_t* x)
{
    (void)h; (void)c; (void)g;
    *x = (hipdnnEnginePluginExecutionContext_t)&g_ctx;
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}
P hipdnnEnginePluginDestroyExecutionContext(hipdnnEnginePluginHandle_t h, hipdnnEnginePluginExecutionContext_t x)
{
    (void)h; (void)x;
    g_n[4]++;
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}
P hipdnnEnginePluginGetWorkspaceSizeFromExecutionContext(hipdnnEnginePluginHandle_t h,
                                                         hipdnnEnginePluginExecutionContext_t x, size_t* ws)
{
    (void)h; (void)x;
    *ws = 64;
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}
P hipdnnEnginePluginExecuteOpGraph(hipdnnEnginePluginHandle_t h, hipdnnEnginePluginExecutionContext_t x, void* ws,
                                   const hipdnnPluginDeviceBuffer_t* b, uint32_t n)
{
    (void)h; (void)ws; (void)b; (void)n;
    if(x != (hipdnnEnginePluginExecutionContext_t)&g_ctx && x != (hipdnnEnginePluginExecutionContext_t)&g_restored_ctx) {
        g_err = "ctplug: unknown execution context";
        return HIPDNN_PLUGIN_STATUS_BAD_PARAM;
    }
    g_n[3]++;
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}

#ifndef NO_SERIALIZE
static const unsigned char k_payload[8] = {'C', 'T', 'P', 'L', 1, 0, 0, 0};
static hipdnnPluginStatus_t save(hipdnnEnginePluginExecutionContext_t x, hipdnnPluginConstData_t* out)
{
    (void)x;
    g_n[0]++;
#ifdef FAIL_SERIALIZE
    out->ptr = NULL;
    out->size = 0;
    g_err = "ctplug: serialization exploded";
    return HIPDNN_PLUGIN_STATUS_INTERNAL_ERROR;
#endif
    unsigned char* p = malloc(sizeof k_payload);
    if(!p) return HIPDNN_PLUGIN_STATUS_ALLOC_FAILED;
    memcpy(p, k_payload, sizeof k_payload);
    out->ptr = p;
#ifdef EMPTY_PAYLOAD
    out->size = 0;
#else
    out->size = sizeof k_payload;
#endif
    g_n[5]++;
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}
#ifndef LEGACY_SERIALIZE_ONLY
P hipdnnEnginePluginSerializeExecutionContextWithEngineId(hipdnnEnginePluginHandle_t h, int64_t id,
                                                          hipdnnEnginePluginExecutionContext_t x,
                                                          hipdnnPluginConstData_t* out)
{
    (void)h;
    g_n[6]++;
    if(id != engine_id()) { g_err = "ctplug: wrong engine id"; return HIPDNN_PLUGIN_STATUS_INVALID_VALUE; }
    return save(x, out);
}
#endif
#ifndef WITH_ID_ONLY
P hipdnnEnginePluginSerializeExecutionContext(hipdnnEnginePluginHandle_t h, hipdnnEnginePluginExecutionContext_t x,
                                              hipdnnPluginConstData_t* out)
{
    (void)h;
    g_n[7]++;
    return save(x, out);
}
#endif
P hipdnnEnginePluginDestroySerializedExecutionContext(hipdnnEnginePluginHandle_t h, hipdnnPluginConstData_t* s)
{
    (void)h;
    g_n[1]++;
    if(s->ptr) {
        free((void*)s->ptr);
        g_n[5]--;
    }
    s->ptr = NULL;
    s->size = 0;
#ifdef FAIL_DESTROY_SERIALIZED
    g_err = "ctplug: destroy of the serialized context exploded";
    return HIPDNN_PLUGIN_STATUS_INTERNAL_ERROR;
#endif
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}
P hipdnnEnginePluginCreateExecutionContextFromSerialized(hipdnnEnginePluginHandle_t h, const hipdnnPluginConstData_t* s,
                                                         hipdnnEnginePluginExecutionContext_t* x)
{
    (void)h;
    g_n[2]++;
#ifdef FAIL_DESERIALIZE
    (void)s; (void)x;
    g_err = "ctplug: cannot restore this payload";
    return HIPDNN_PLUGIN_STATUS_INVALID_VALUE;
#else
    if(!s || !s->ptr || s->size != sizeof k_payload || memcmp(s->ptr, k_payload, 4) != 0) {
        g_err = "ctplug: not a ctplug payload";
        return HIPDNN_PLUGIN_STATUS_INVALID_VALUE;
    }
#ifdef NULL_FROM_SERIALIZED
    *x = NULL;
#else
    *x = (hipdnnEnginePluginExecutionContext_t)&g_restored_ctx;
#endif
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
#endif
}
#endif
