/* A tiny configurable engine plugin for the plugin-loading tests.  Compile-time switches:
 *   MINI_TAG="x"         plugin name "mini_x", engine name "MINI_x" (id = FNV-1a-64 of the name)
 *   ENGINE_NAME="N"      engine name N instead of "MINI_x"
 *   NO_GET_NAME          omit the required hipdnnPluginGetName
 *   NO_API_VERSION       omit hipdnnPluginGetApiVersion;  API_VERSION="1.0.0" otherwise
 *   NO_ENGINE_NAME       omit hipdnnEnginePluginGetEngineName
 *   BAD_NAME_HASH        GetEngineName answers a name whose hash is not the id
 *   FAIL_APPLICABLE      GetApplicableEngineIds fails with INTERNAL_ERROR + a message
 *   FAIL_EXECUTE         ExecuteOpGraph fails with BAD_PARAM + a message
 *   EXEC_SLEEP_MS=n      ExecuteOpGraph sleeps n ms (a slow engine, for autotune tests)
 *   LOG_HOOKS            export hipdnnPluginSetLoggingCallback and hipdnnPluginSetLogLevel; the level
 *                        hook logs "mini_x: pluginSetLogLevel level=N" at severity N (as hipDNN's test
 *                        plugin does), nothing for OFF
 *   FAIL_SET_LOG_LEVEL   (with LOG_HOOKS) hipdnnPluginSetLogLevel fails with INTERNAL_ERROR + a message
 *   FAIL_ENGINE_NAME     GetEngineName fails with INTERNAL_ERROR + a message
 *   REPORTED_NAME="N"    GetEngineName answers N (the engine id stays the hash of ENGINE_NAME)
 * The broken variants that need other code are small C files beside this one: each defines
 * OWN_<symbol> for the functions it replaces (or leaves out), includes this file, and writes its own.
 */
#ifdef EXEC_SLEEP_MS
#define _POSIX_C_SOURCE 200809L
#include <time.h>
#endif
#include <hipdnn_plugin_sdk/EnginePluginApi.h>
#include <string.h>
#ifndef MINI_TAG
#define MINI_TAG "a"
#endif
#ifndef ENGINE_NAME
#define ENGINE_NAME "MINI_" MINI_TAG
#endif
#ifndef API_VERSION
#define API_VERSION "1.0.0"
#endif
#define P HIPDNN_PLUGIN_EXPORT hipdnnPluginStatus_t
static const char* g_err = "";
#define MINI_UNUSED __attribute__((unused))
static int g_handle MINI_UNUSED;
static int g_ctx MINI_UNUSED;
/* An EngineDetails FlatBuffer with no fields: root offset 8, vtable {4,4}, table soffset 4. */
static const unsigned char k_details[12] MINI_UNUSED = {8, 0, 0, 0, 4, 0, 4, 0, 4, 0, 0, 0};
MINI_UNUSED static int64_t engine_id(void)
{
    const char* s = ENGINE_NAME;
    uint64_t h = 0xcbf29ce484222325ull;
    for(; *s; s++) { h ^= (unsigned char)*s; h *= 0x100000001b3ull; }
    return (int64_t)h;
}
#ifndef NO_GET_NAME
P hipdnnPluginGetName(const char** n) { *n = "mini_" MINI_TAG; return HIPDNN_PLUGIN_STATUS_SUCCESS; }
#endif
P hipdnnPluginGetVersion(const char** v) { *v = "9.9.9"; return HIPDNN_PLUGIN_STATUS_SUCCESS; }
#ifndef NO_API_VERSION
P hipdnnPluginGetApiVersion(const char** v) { *v = API_VERSION; return HIPDNN_PLUGIN_STATUS_SUCCESS; }
#endif
#ifndef OWN_GetType
P hipdnnPluginGetType(hipdnnPluginType_t* t) { *t = HIPDNN_PLUGIN_TYPE_ENGINE; return HIPDNN_PLUGIN_STATUS_SUCCESS; }
#endif
HIPDNN_PLUGIN_EXPORT void hipdnnPluginGetLastErrorString(const char** e) { *e = g_err; }
#ifndef OWN_GetAllEngineIds
P hipdnnEnginePluginGetAllEngineIds(int64_t* ids, uint32_t max, uint32_t* n)
{
    *n = 1;
    if(ids && max >= 1) ids[0] = engine_id();
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}
#endif
#ifdef LOG_HOOKS
#include <stdio.h>
static hipdnnCallback_t g_log_cb;
P hipdnnPluginSetLoggingCallback(hipdnnCallback_t cb) { g_log_cb = cb; return HIPDNN_PLUGIN_STATUS_SUCCESS; }
P hipdnnPluginSetLogLevel(hipdnnSeverity_t level)
{
#ifdef FAIL_SET_LOG_LEVEL
    (void)level;
    g_err = "mini: log level refused";
    return HIPDNN_PLUGIN_STATUS_INTERNAL_ERROR;
#else
    char msg[128];
    snprintf(msg, sizeof msg, "mini_" MINI_TAG ": pluginSetLogLevel level=%d", (int)level);
    if(g_log_cb && level != HIPDNN_SEV_OFF) g_log_cb(level, msg);
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
#endif
}
#endif
#ifndef NO_ENGINE_NAME
P hipdnnEnginePluginGetEngineName(int64_t id, const char** name)
{
    (void)id;
#ifdef FAIL_ENGINE_NAME
    g_err = "mini: no name today";
    return HIPDNN_PLUGIN_STATUS_INTERNAL_ERROR;
#endif
#if defined(BAD_NAME_HASH)
    *name = "NOT_THE_HASHED_NAME";
#elif defined(REPORTED_NAME)
    *name = REPORTED_NAME;
#else
    *name = ENGINE_NAME;
#endif
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}
#endif
#ifndef OWN_Create
P hipdnnEnginePluginCreate(hipdnnEnginePluginHandle_t* h) { *h = (hipdnnEnginePluginHandle_t)&g_handle; return HIPDNN_PLUGIN_STATUS_SUCCESS; }
#endif
P hipdnnEnginePluginDestroy(hipdnnEnginePluginHandle_t h) { (void)h; return HIPDNN_PLUGIN_STATUS_SUCCESS; }
#ifndef OWN_SetStream
P hipdnnEnginePluginSetStream(hipdnnEnginePluginHandle_t h, hipStream_t s) { (void)h; (void)s; return HIPDNN_PLUGIN_STATUS_SUCCESS; }
#endif
#ifndef OWN_GetApplicableEngineIds
P hipdnnEnginePluginGetApplicableEngineIds(hipdnnEnginePluginHandle_t h, const hipdnnPluginConstData_t* g,
                                           int64_t* ids, uint32_t max, uint32_t* n)
{
    (void)h; (void)g; (void)max;
#ifdef FAIL_APPLICABLE
    g_err = "mini: applicability check exploded";
    return HIPDNN_PLUGIN_STATUS_INTERNAL_ERROR;
#endif
    ids[0] = engine_id();
    *n = 1;
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}
#endif
#ifndef OWN_GetEngineDetails
P hipdnnEnginePluginGetEngineDetails(hipdnnEnginePluginHandle_t h, int64_t id, const hipdnnPluginConstData_t* g,
                                     hipdnnPluginConstData_t* d)
{
    (void)h; (void)id; (void)g;
    d->ptr = k_details;
    d->size = sizeof k_details;
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}
#endif
#ifndef OWN_DestroyEngineDetails
P hipdnnEnginePluginDestroyEngineDetails(hipdnnEnginePluginHandle_t h, hipdnnPluginConstData_t* d) { (void)h; (void)d; return HIPDNN_PLUGIN_STATUS_SUCCESS; }
#endif
#ifndef OWN_GetWorkspaceSize
P hipdnnEnginePluginGetWorkspaceSize(hipdnnEnginePluginHandle_t h, const hipdnnPluginConstData_t* c,
                                     const hipdnnPluginConstData_t* g, size_t* ws)
{
    (void)h; (void)c; (void)g;
    *ws = 64;
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}
#endif
#ifndef OWN_CreateExecutionContext
P hipdnnEnginePluginCreateExecutionContext(hipdnnEnginePluginHandle_t h, const hipdnnPluginConstData_t* c,
                                           const hipdnnPluginConstData_t* g, hipdnnEnginePluginExecutionContext_t* x)
{
    (void)h; (void)c; (void)g;
    *x = (hipdnnEnginePluginExecutionContext_t)&g_ctx;
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}
#endif
P hipdnnEnginePluginDestroyExecutionContext(hipdnnEnginePluginHandle_t h, hipdnnEnginePluginExecutionContext_t x) { (void)h; (void)x; return HIPDNN_PLUGIN_STATUS_SUCCESS; }
P hipdnnEnginePluginGetWorkspaceSizeFromExecutionContext(hipdnnEnginePluginHandle_t h,
                                                         hipdnnEnginePluginExecutionContext_t x, size_t* ws)
{
    (void)h; (void)x;
    *ws = 64;
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}
#ifndef OWN_ExecuteOpGraph
P hipdnnEnginePluginExecuteOpGraph(hipdnnEnginePluginHandle_t h, hipdnnEnginePluginExecutionContext_t x, void* ws,
                                   const hipdnnPluginDeviceBuffer_t* b, uint32_t n)
{
    (void)h; (void)x; (void)ws; (void)b; (void)n;
#ifdef EXEC_SLEEP_MS
    struct timespec ts = {EXEC_SLEEP_MS / 1000, (EXEC_SLEEP_MS % 1000) * 1000000L};
    nanosleep(&ts, NULL);
#endif
#ifdef FAIL_EXECUTE
    g_err = "mini: execution refused";
    return HIPDNN_PLUGIN_STATUS_BAD_PARAM;
#endif
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}
#endif
