/*
 * c_sample_heuristic.c -- the C11 sample hipDNN heuristic plugin (HeuristicsPluginApi.h).
 *
 * One policy, "HipdnnCabiSample::DeviceAware": it reads the DeviceProperties FlatBuffer the host
 * installs on the plugin handle and puts the engine that fits the device first -- the HIP kernels
 * engine when the properties describe a GPU (device_id >= 0), the CPU reference engine when they
 * describe the host (device_id -1) -- keeping the other candidates in their order.  When neither
 * engine is a candidate the policy declines (applied = 0) and the next policy decides.
 *
 * It shows the whole plugin shape: module metadata, one plugin handle per hipdnn handle, one
 * policy descriptor per ENGINEHEUR finalize, the two-call GetSortedEngineIds, a per-thread last
 * error, and a JSON trace per engine (GetTrace).  Build: make -C engine_plugins/c_sample.
 */
#include <hipdnn_plugin_sdk/HeuristicsPluginApi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fb_reader.h"

#define EXPORT HIPDNN_PLUGIN_EXPORT hipdnnPluginStatus_t
#define POLICY_NAME "HipdnnCabiSample::DeviceAware"
#define MAX_IDS 1024

static _Thread_local char g_err[256];

static hipdnnPluginStatus_t fail(hipdnnPluginStatus_t st, const char* msg)
{
    snprintf(g_err, sizeof g_err, "%s", msg);
    return st;
}

static int64_t fnv1a64(const char* s)
{
    uint64_t h = 0xCBF29CE484222325ull;
    for(; *s; ++s)
    {
        h ^= (unsigned char)*s;
        h *= 0x100000001B3ull;
    }
    return (int64_t)h;
}

typedef struct
{
    int have_device;
    int64_t device_id;
    char arch[64];
} SampleHandle;

typedef struct
{
    SampleHandle* handle;
    int64_t ids[MAX_IDS];
    size_t n;
    int64_t sorted[MAX_IDS];
    size_t ns;
    int have_graph;
    int finalized;
    char trace[256];
} SamplePolicy;

/* ------------------------------------------------------------------ module metadata */
EXPORT hipdnnPluginGetName(const char** name)
{
    if(!name)
        return fail(HIPDNN_PLUGIN_STATUS_BAD_PARAM, "name is NULL");
    *name = "hipdnn_cabi_c_sample_heuristic";
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}
EXPORT hipdnnPluginGetVersion(const char** v)
{
    if(!v)
        return fail(HIPDNN_PLUGIN_STATUS_BAD_PARAM, "version is NULL");
    *v = "1.0.0";
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}
EXPORT hipdnnPluginGetApiVersion(const char** v)
{
    if(!v)
        return fail(HIPDNN_PLUGIN_STATUS_BAD_PARAM, "version is NULL");
    *v = HIPDNN_HEURISTIC_API_VERSION;
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}
EXPORT hipdnnPluginGetType(hipdnnPluginType_t* t)
{
    if(!t)
        return fail(HIPDNN_PLUGIN_STATUS_BAD_PARAM, "type is NULL");
    *t = HIPDNN_PLUGIN_TYPE_HEURISTIC;
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}
HIPDNN_PLUGIN_EXPORT void hipdnnPluginGetLastErrorString(const char** s)
{
    if(s)
        *s = g_err;
}
EXPORT hipdnnPluginSetLoggingCallback(hipdnnCallback_t cb)
{
    (void)cb;
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}
EXPORT hipdnnPluginSetLogLevel(hipdnnSeverity_t level)
{
    (void)level;
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}

/* ------------------------------------------------------------------ policies */
EXPORT hipdnnHeuristicPluginGetAllPolicyIds(int64_t* ids, uint32_t max, uint32_t* n)
{
    if(!n)
        return fail(HIPDNN_PLUGIN_STATUS_BAD_PARAM, "num_policies is NULL");
    if(!ids)
    {
        *n = 1;
        return HIPDNN_PLUGIN_STATUS_SUCCESS;
    }
    *n = 0;
    if(max >= 1)
    {
        ids[0] = fnv1a64(POLICY_NAME);
        *n = 1;
    }
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}
EXPORT hipdnnHeuristicPluginGetPolicyName(int64_t id, const char** name)
{
    if(!name)
        return fail(HIPDNN_PLUGIN_STATUS_BAD_PARAM, "name is NULL");
    if(id != fnv1a64(POLICY_NAME))
        return fail(HIPDNN_PLUGIN_STATUS_BAD_PARAM, "unknown policy id");
    *name = POLICY_NAME;
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}

/* ------------------------------------------------------------------ plugin handle */
EXPORT hipdnnHeuristicHandleCreate(hipdnnHeuristicHandle_t* out)
{
    if(!out)
        return fail(HIPDNN_PLUGIN_STATUS_BAD_PARAM, "out_handle is NULL");
    SampleHandle* h = calloc(1, sizeof *h);
    if(!h)
        return fail(HIPDNN_PLUGIN_STATUS_ALLOC_FAILED, "out of memory");
    *out = (hipdnnHeuristicHandle_t)h;
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}
EXPORT hipdnnHeuristicHandleDestroy(hipdnnHeuristicHandle_t handle)
{
    if(!handle)
        return fail(HIPDNN_PLUGIN_STATUS_BAD_PARAM, "handle is NULL");
    free(handle);
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}
EXPORT hipdnnHeuristicHandleSetDeviceProperties(hipdnnHeuristicHandle_t handle,
                                                const hipdnnPluginConstData_t* props)
{
    SampleHandle* h = (SampleHandle*)handle;
    if(!h || !props || !props->ptr)
        return fail(HIPDNN_PLUGIN_STATUS_BAD_PARAM, "handle or device properties are NULL");
    /* DeviceProperties: slot 0 device_id (int, default -1), 3 architecture_name (string). */
    fb_buffer b;
    fb_table root;
    if(fb_init(&b, props->ptr, props->size, "DeviceProperties") != FB_OK
       || fb_root(&b, &root) != FB_OK)
        return fail(HIPDNN_PLUGIN_STATUS_BAD_PARAM, b.err[0] ? b.err : "bad DeviceProperties");
    /* device_id is a 32-bit int in the schema: read 4 bytes and sign-extend */
    uint64_t raw = 0;
    const int rc = fb_u64(&root, 0, 4, &raw);
    if(rc == FB_BAD)
        return fail(HIPDNN_PLUGIN_STATUS_BAD_PARAM, b.err);
    const int64_t id = rc == FB_OK ? (int64_t)(int32_t)(uint32_t)raw : -1;
    const char* arch = "";
    uint32_t len = 0;
    if(fb_string(&root, 3, &arch, &len) == FB_BAD)
        return fail(HIPDNN_PLUGIN_STATUS_BAD_PARAM, b.err);
    h->device_id = id;
    snprintf(h->arch, sizeof h->arch, "%.*s", (int)(len < 63 ? len : 63), len ? arch : "");
    h->have_device = 1;
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}

/* ------------------------------------------------------------------ policy descriptor */
EXPORT hipdnnHeuristicPolicyDescriptorCreate(hipdnnHeuristicHandle_t handle, int64_t id,
                                             hipdnnHeuristicPolicyDescriptor_t* out)
{
    if(!handle || !out)
        return fail(HIPDNN_PLUGIN_STATUS_BAD_PARAM, "handle or out_desc is NULL");
    if(id != fnv1a64(POLICY_NAME))
        return fail(HIPDNN_PLUGIN_STATUS_BAD_PARAM, "unknown policy id");
    SamplePolicy* p = calloc(1, sizeof *p);
    if(!p)
        return fail(HIPDNN_PLUGIN_STATUS_ALLOC_FAILED, "out of memory");
    p->handle = (SampleHandle*)handle;
    *out = (hipdnnHeuristicPolicyDescriptor_t)p;
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}
EXPORT hipdnnHeuristicPolicyDescriptorDestroy(hipdnnHeuristicPolicyDescriptor_t d)
{
    if(!d)
        return fail(HIPDNN_PLUGIN_STATUS_BAD_PARAM, "descriptor is NULL");
    free(d);
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}
EXPORT hipdnnHeuristicPolicySetEngineIds(hipdnnHeuristicPolicyDescriptor_t d, const int64_t* ids,
                                         size_t n)
{
    SamplePolicy* p = (SamplePolicy*)d;
    if(!p || (n && !ids))
        return fail(HIPDNN_PLUGIN_STATUS_BAD_PARAM, "descriptor or engine_ids is NULL");
    if(n > MAX_IDS)
        return fail(HIPDNN_PLUGIN_STATUS_BAD_PARAM, "too many engine ids");
    memcpy(p->ids, ids, n * sizeof *ids);
    p->n = n;
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}
EXPORT hipdnnHeuristicPolicySetSerializedGraph(hipdnnHeuristicPolicyDescriptor_t d,
                                               const hipdnnPluginConstData_t* g)
{
    SamplePolicy* p = (SamplePolicy*)d;
    if(!p || !g || !g->ptr || !g->size)
        return fail(HIPDNN_PLUGIN_STATUS_BAD_PARAM, "descriptor or graph is NULL");
    p->have_graph = 1; /* the order depends on the device only */
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}
EXPORT hipdnnHeuristicPolicyFinalize(hipdnnHeuristicPolicyDescriptor_t d, int32_t* applied)
{
    SamplePolicy* p = (SamplePolicy*)d;
    if(!p || !applied)
        return fail(HIPDNN_PLUGIN_STATUS_BAD_PARAM, "descriptor or out_applied is NULL");
    if(!p->have_graph || !p->handle->have_device)
        return fail(HIPDNN_PLUGIN_STATUS_NOT_INITIALIZED, "graph or device properties not set");
    const int gpu = p->handle->device_id >= 0;
    const int64_t want = fnv1a64(gpu ? "HIPDNN_CABI_HIP_KERNELS_ENGINE"
                                     : "HIPDNN_CABI_CPU_REFERENCE_ENGINE");
    size_t k = 0;
    for(size_t i = 0; i < p->n; ++i)
        if(p->ids[i] == want)
            p->sorted[k++] = want;
    if(k == 0)
    {
        *applied = 0; /* decline: the next policy decides */
        return HIPDNN_PLUGIN_STATUS_SUCCESS;
    }
    for(size_t i = 0; i < p->n; ++i)
        if(p->ids[i] != want)
            p->sorted[k++] = p->ids[i];
    p->ns = k;
    snprintf(p->trace, sizeof p->trace,
             "{\"policy\": \"%s\", \"device_id\": %lld, \"architecture\": \"%s\", \"first\": \"%s\"}",
             POLICY_NAME, (long long)p->handle->device_id, p->handle->arch,
             gpu ? "HIPDNN_CABI_HIP_KERNELS_ENGINE" : "HIPDNN_CABI_CPU_REFERENCE_ENGINE");
    p->finalized = 1;
    *applied = 1;
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}
EXPORT hipdnnHeuristicPolicyGetSortedEngineIds(hipdnnHeuristicPolicyDescriptor_t d, int64_t* ids,
                                               size_t* n)
{
    SamplePolicy* p = (SamplePolicy*)d;
    if(!p || !n)
        return fail(HIPDNN_PLUGIN_STATUS_BAD_PARAM, "descriptor or num_engines is NULL");
    if(!p->finalized)
        return fail(HIPDNN_PLUGIN_STATUS_NOT_INITIALIZED, "policy not finalized");
    if(!ids)
    {
        *n = p->ns;
        return HIPDNN_PLUGIN_STATUS_SUCCESS;
    }
    size_t k = *n < p->ns ? *n : p->ns; /* a prefix when the buffer is short */
    memcpy(ids, p->sorted, k * sizeof *ids);
    *n = k;
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}
EXPORT hipdnnHeuristicPolicyGetTrace(hipdnnHeuristicPolicyDescriptor_t d, int64_t engine_id,
                                     const char** trace_json)
{
    SamplePolicy* p = (SamplePolicy*)d;
    (void)engine_id;
    if(!p || !trace_json)
        return fail(HIPDNN_PLUGIN_STATUS_BAD_PARAM, "descriptor or trace_json is NULL");
    if(!p->finalized)
        return fail(HIPDNN_PLUGIN_STATUS_NOT_INITIALIZED, "policy not finalized");
    *trace_json = p->trace;
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}
