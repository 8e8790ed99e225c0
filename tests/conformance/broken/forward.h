/* Broken-plugin scaffolding for tests/conformance: every plugin API function forwards to a
 * conformant base plugin (the C sample, path baked in with -DBASE_PLUGIN="/abs/lib.so"), except
 * the ones a broken plugin overrides.  Define OVERRIDE_<function> before including this file and
 * then define that function yourself; define OMIT_<function> to not export it at all.
 * REAL(fn) is the base plugin's function pointer. */
#ifndef CONFORM_BROKEN_FORWARD_H
#define CONFORM_BROKEN_FORWARD_H
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hipdnn_plugin_sdk/EnginePluginApi.h"

#define P HIPDNN_PLUGIN_EXPORT hipdnnPluginStatus_t
typedef hipdnnPluginStatus_t St;
typedef hipdnnEnginePluginHandle_t H;
typedef hipdnnEnginePluginExecutionContext_t Ctx;
typedef hipdnnPluginConstData_t CD;
typedef hipdnnPluginDeviceBuffer_t DB;

static void* base_lib(void)
{
    static void* lib;
    if (!lib) {
        lib = dlopen(BASE_PLUGIN, RTLD_NOW | RTLD_LOCAL);
        if (!lib) { fprintf(stderr, "broken plugin: cannot load base %s: %s\n", BASE_PLUGIN, dlerror()); abort(); }
    }
    return lib;
}
#define REAL(fn) ((__typeof__(&fn))dlsym(base_lib(), #fn))

#ifndef OVERRIDE_hipdnnPluginGetName
P hipdnnPluginGetName(const char** a) { return REAL(hipdnnPluginGetName)(a); }
#endif
#ifndef OVERRIDE_hipdnnPluginGetVersion
P hipdnnPluginGetVersion(const char** a) { return REAL(hipdnnPluginGetVersion)(a); }
#endif
#ifndef OVERRIDE_hipdnnPluginGetApiVersion
P hipdnnPluginGetApiVersion(const char** a) { return REAL(hipdnnPluginGetApiVersion)(a); }
#endif
#ifndef OVERRIDE_hipdnnPluginGetType
P hipdnnPluginGetType(hipdnnPluginType_t* a) { return REAL(hipdnnPluginGetType)(a); }
#endif
#ifndef OVERRIDE_hipdnnPluginGetLastErrorString
HIPDNN_PLUGIN_EXPORT void hipdnnPluginGetLastErrorString(const char** a) { REAL(hipdnnPluginGetLastErrorString)(a); }
#endif
#ifndef OVERRIDE_hipdnnPluginSetLoggingCallback
P hipdnnPluginSetLoggingCallback(hipdnnCallback_t a) { return REAL(hipdnnPluginSetLoggingCallback)(a); }
#endif
#ifndef OVERRIDE_hipdnnPluginSetLogLevel
P hipdnnPluginSetLogLevel(hipdnnSeverity_t a) { return REAL(hipdnnPluginSetLogLevel)(a); }
#endif
#ifndef OVERRIDE_hipdnnEnginePluginGetAllEngineIds
P hipdnnEnginePluginGetAllEngineIds(int64_t* a, uint32_t b, uint32_t* c) { return REAL(hipdnnEnginePluginGetAllEngineIds)(a, b, c); }
#endif
#ifndef OVERRIDE_hipdnnEnginePluginCreate
P hipdnnEnginePluginCreate(H* a) { return REAL(hipdnnEnginePluginCreate)(a); }
#endif
#ifndef OVERRIDE_hipdnnEnginePluginDestroy
P hipdnnEnginePluginDestroy(H a) { return REAL(hipdnnEnginePluginDestroy)(a); }
#endif
#ifndef OMIT_hipdnnEnginePluginSetStream
P hipdnnEnginePluginSetStream(H a, hipStream_t b) { return REAL(hipdnnEnginePluginSetStream)(a, b); }
#endif
#ifndef OVERRIDE_hipdnnEnginePluginGetApplicableEngineIds
P hipdnnEnginePluginGetApplicableEngineIds(H a, const CD* b, int64_t* c, uint32_t d, uint32_t* e) { return REAL(hipdnnEnginePluginGetApplicableEngineIds)(a, b, c, d, e); }
#endif
#ifndef OVERRIDE_hipdnnEnginePluginGetEngineDetails
P hipdnnEnginePluginGetEngineDetails(H a, int64_t b, const CD* c, CD* d) { return REAL(hipdnnEnginePluginGetEngineDetails)(a, b, c, d); }
#endif
#ifndef OVERRIDE_hipdnnEnginePluginDestroyEngineDetails
P hipdnnEnginePluginDestroyEngineDetails(H a, CD* b) { return REAL(hipdnnEnginePluginDestroyEngineDetails)(a, b); }
#endif
#ifndef OVERRIDE_hipdnnEnginePluginGetWorkspaceSize
P hipdnnEnginePluginGetWorkspaceSize(H a, const CD* b, const CD* c, size_t* d) { return REAL(hipdnnEnginePluginGetWorkspaceSize)(a, b, c, d); }
#endif
#ifndef OVERRIDE_hipdnnEnginePluginCreateExecutionContext
P hipdnnEnginePluginCreateExecutionContext(H a, const CD* b, const CD* c, Ctx* d) { return REAL(hipdnnEnginePluginCreateExecutionContext)(a, b, c, d); }
#endif
P hipdnnEnginePluginDestroyExecutionContext(H a, Ctx b) { return REAL(hipdnnEnginePluginDestroyExecutionContext)(a, b); }
P hipdnnEnginePluginGetWorkspaceSizeFromExecutionContext(H a, Ctx b, size_t* c) { return REAL(hipdnnEnginePluginGetWorkspaceSizeFromExecutionContext)(a, b, c); }
#ifndef OVERRIDE_hipdnnEnginePluginExecuteOpGraph
P hipdnnEnginePluginExecuteOpGraph(H a, Ctx b, void* c, const DB* d, uint32_t e) { return REAL(hipdnnEnginePluginExecuteOpGraph)(a, b, c, d, e); }
#endif
#ifndef OVERRIDE_hipdnnEnginePluginExecuteOpGraphWithOverrides
P hipdnnEnginePluginExecuteOpGraphWithOverrides(H a, Ctx b, void* c, const DB* d, uint32_t e, uint32_t f, const int64_t* g,
                                                const uint32_t* h, const int64_t* const* i, const int64_t* const* j)
{
    return REAL(hipdnnEnginePluginExecuteOpGraphWithOverrides)(a, b, c, d, e, f, g, h, i, j);
}
#endif
P hipdnnEnginePluginGetEngineName(int64_t a, const char** b) { return REAL(hipdnnEnginePluginGetEngineName)(a, b); }
P hipdnnEnginePluginSerializeExecutionContext(H a, Ctx b, CD* c) { return REAL(hipdnnEnginePluginSerializeExecutionContext)(a, b, c); }
P hipdnnEnginePluginSerializeExecutionContextWithEngineId(H a, int64_t b, Ctx c, CD* d) { return REAL(hipdnnEnginePluginSerializeExecutionContextWithEngineId)(a, b, c, d); }
P hipdnnEnginePluginDestroySerializedExecutionContext(H a, CD* b) { return REAL(hipdnnEnginePluginDestroySerializedExecutionContext)(a, b); }
P hipdnnEnginePluginCreateExecutionContextFromSerialized(H a, const CD* b, Ctx* c) { return REAL(hipdnnEnginePluginCreateExecutionContextFromSerialized)(a, b, c); }
#endif
