/*
 * c_sample_plugin.c -- a small hipDNN engine plugin written in C11 against include/hipdnn_plugin_sdk/.
 *
 * One engine, HIPDNN_CABI_C_SAMPLE_ENGINE (id = FNV-1a-64 of the name), that runs graphs made only of
 * pointwise ADD / MUL / RELU_FWD nodes on FLOAT tensors, on the host (the "device" pointers it gets are
 * dereferenced as host memory). It stands in for a third-party plugin in hipdnn-cabi's tests.
 *
 * Conventions: every failure sets the calling thread's last error and returns a non-success status;
 * NULL arguments give HIPDNN_PLUGIN_STATUS_BAD_PARAM; handles, execution contexts and the buffers the
 * plugin hands out are kept in a registry and unknown/destroyed ones are rejected. All shared state is
 * behind locks; the registry's lookups (every execute) take a per-thread reader slot, so executions on
 * different threads do not serialise.
 */
#define _POSIX_C_SOURCE 200809L

#include <hipdnn_plugin_sdk/EnginePluginApi.h>

#include "cs_graph.h"
#include "fb_reader.h"

#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CS_PLUGIN_NAME "hipdnn_c_sample_plugin"
#define CS_PLUGIN_VERSION "0.1.0"
/* 1.1.0: implements ExecuteOpGraphWithOverrides; no runtime pass-by-value (1.2.0) or ragged (1.3.0). */
#define CS_PLUGIN_API_VERSION "1.1.0"
#define CS_ENGINE_NAME "HIPDNN_CABI_C_SAMPLE_ENGINE"

/* Serialized execution context payload (plugin-owned format, little-endian):
     [0]  magic "HCSP"   [4] u16 major   [6] u16 minor   [8] u32 kind
   kind 1 (graph):
     [12] i64 engine_id  [20] u64 FNV-1a-64 of the graph bytes  [28] u32 graph_size  [32] u32 reserved (0)
     [36] graph_size bytes: the hipDNN Graph FlatBuffer the context was compiled from. */
static const uint8_t CS_PAYLOAD_MAGIC[4] = {'H', 'C', 'S', 'P'};
#define CS_PAYLOAD_MAJOR 1u
#define CS_PAYLOAD_MINOR 0u
#define CS_PAYLOAD_KIND_GRAPH 1u
#define CS_PAYLOAD_HEADER_SIZE 12u
#define CS_PAYLOAD_GRAPH_PREFIX 24u

/* EngineDetails slots (engine_details.fbs) and EngineConfig slots (engine_config.fbs). */
#define CS_ENGINE_DETAILS_SLOTS 4 /* engine_id, knobs, behavior_notes, name */
#define CS_ENGINE_CONFIG_ENGINE_ID 0
#define CS_ENGINE_CONFIG_KNOBS 1
#define CS_ENGINE_CONFIG_RANKING_METRIC 2
#define CS_KNOB_SETTING_KNOB_ID 0

/* ---- helpers ----------------------------------------------------------------------------- */

static uint64_t cs_fnv1a64(const void* data, size_t n)
{
    const uint8_t* p = (const uint8_t*)data;
    uint64_t h = 0xcbf29ce484222325ull;
    for(size_t i = 0; i < n; i++)
    {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static int64_t cs_engine_id(void)
{
    return (int64_t)cs_fnv1a64(CS_ENGINE_NAME, sizeof(CS_ENGINE_NAME) - 1);
}

static void cs_put16(uint8_t* p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static void cs_put32(uint8_t* p, uint32_t v)
{
    for(int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void cs_put64(uint8_t* p, uint64_t v)
{
    for(int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* ---- logging and last error -------------------------------------------------------------- */

static _Thread_local char t_last_error[HIPDNN_PLUGIN_ERROR_STRING_MAX_LENGTH];

static pthread_mutex_t g_log_lock = PTHREAD_MUTEX_INITIALIZER;
static hipdnnCallback_t g_log_callback = NULL; /* guarded by g_log_lock */
static hipdnnSeverity_t g_log_level = HIPDNN_SEV_WARN; /* guarded by g_log_lock */

#if defined(__GNUC__)
__attribute__((format(printf, 2, 0)))
#endif
static void cs_vlog(hipdnnSeverity_t severity, const char* fmt, va_list ap)
{
    pthread_mutex_lock(&g_log_lock);
    hipdnnCallback_t cb = g_log_callback;
    hipdnnSeverity_t level = g_log_level;
    pthread_mutex_unlock(&g_log_lock);
    if(cb == NULL || level == HIPDNN_SEV_OFF || severity < level)
        return;
    char msg[HIPDNN_PLUGIN_ERROR_STRING_MAX_LENGTH + 64];
    int n = snprintf(msg, sizeof msg, "[%s] ", CS_PLUGIN_NAME);
    if(n < 0)
        n = 0;
    vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
    cb(severity, msg);
}

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void cs_log(hipdnnSeverity_t severity, const char* fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cs_vlog(severity, fmt, ap);
    va_end(ap);
}

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static hipdnnPluginStatus_t cs_fail(hipdnnPluginStatus_t status, const char* func, const char* fmt, ...)
{
    int n = snprintf(t_last_error, sizeof t_last_error, "%s: ", func);
    if(n < 0 || (size_t)n >= sizeof t_last_error)
        n = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t_last_error + n, sizeof t_last_error - (size_t)n, fmt, ap);
    va_end(ap);
    cs_log(HIPDNN_SEV_ERROR, "%s", t_last_error);
    return status;
}

#define FAIL(status, ...) cs_fail((status), __func__, __VA_ARGS__)

/* ---- objects and the registry ------------------------------------------------------------ */

enum
{
    CS_KIND_HANDLE = 1,
    CS_KIND_CONTEXT = 2,
    CS_KIND_DETAILS = 3,
    CS_KIND_PAYLOAD = 4
};

/* Common header of reference-counted objects (handles, execution contexts).  `refs` is atomic: the
   count of in-flight users plus CS_DEAD once the object left the registry; whoever takes it to exactly
   CS_DEAD (the last release after retire, or retire itself when no one holds it) frees it. */
#define CS_DEAD 0x80000000u
typedef struct cs_obj
{
    int kind;
    unsigned refs;
    int dead;
} cs_obj;

struct HipdnnEnginePluginHandle
{
    cs_obj obj;
    pthread_mutex_t lock;
    hipStream_t stream; /* guarded by lock; stored only (execution is on the host) */
};

struct HipdnnEnginePluginExecutionContext
{
    cs_obj obj;
    cs_program prog; /* immutable after creation */
    uint8_t* graph; /* copy of the Graph FlatBuffer, for serialization */
    size_t graph_size;
    float** scratch; /* per tensor: plugin-owned storage of virtual intermediates */
    int has_scratch; /* some used tensor is virtual: executes without overrides share scratch */
    pthread_mutex_t run_lock; /* serializes use of scratch (only taken when has_scratch) */
};

typedef struct cs_reg_entry
{
    const void* ptr;
    int kind;
} cs_reg_entry;

/* The registry's lock: lookups (every execute) take a reader slot of their own thread's cache line, so
   executions on different threads never contend; writers (create/destroy: rare) take g_reg_wmu, raise
   g_reg_writer and wait until no reader is inside. */
#define CS_RD_SHARDS 64
/* 128 bytes: x86's adjacent-line prefetcher moves 64-byte lines in pairs, so neighbouring 64-byte
   lines written by two threads would still travel between their cores. */
#define CS_CL_PAIR 128
typedef struct
{
    long readers;
    char pad[CS_CL_PAIR - sizeof(long)];
} cs_rd_shard;
static cs_rd_shard g_reg_rd[CS_RD_SHARDS] __attribute__((aligned(CS_CL_PAIR)));
static int g_reg_writer = 0;
static int g_reg_next_shard = 0;
static _Thread_local int t_reg_shard = -1;
static pthread_mutex_t g_reg_wmu = PTHREAD_MUTEX_INITIALIZER;
static cs_reg_entry* g_reg = NULL; /* guarded by the registry lock */
static size_t g_reg_count = 0;
static size_t g_reg_cap = 0;

static cs_rd_shard* cs_rdlock(void)
{
    if(t_reg_shard < 0)
        t_reg_shard = (int)((unsigned)__atomic_fetch_add(&g_reg_next_shard, 1, __ATOMIC_RELAXED) % CS_RD_SHARDS);
    cs_rd_shard* s = &g_reg_rd[t_reg_shard];
    for(;;)
    {
        __atomic_add_fetch(&s->readers, 1, __ATOMIC_SEQ_CST);
        if(!__atomic_load_n(&g_reg_writer, __ATOMIC_SEQ_CST))
            return s;
        __atomic_sub_fetch(&s->readers, 1, __ATOMIC_SEQ_CST);
        while(__atomic_load_n(&g_reg_writer, __ATOMIC_ACQUIRE))
            sched_yield();
    }
}

static void cs_rdunlock(cs_rd_shard* s) { __atomic_sub_fetch(&s->readers, 1, __ATOMIC_RELEASE); }

static void cs_wrlock(void)
{
    pthread_mutex_lock(&g_reg_wmu);
    __atomic_store_n(&g_reg_writer, 1, __ATOMIC_SEQ_CST);
    for(int i = 0; i < CS_RD_SHARDS; i++)
        while(__atomic_load_n(&g_reg_rd[i].readers, __ATOMIC_SEQ_CST) != 0)
            sched_yield();
}

static void cs_wrunlock(void)
{
    __atomic_store_n(&g_reg_writer, 0, __ATOMIC_SEQ_CST);
    pthread_mutex_unlock(&g_reg_wmu);
}

/* fork(): only the forking thread lives on in the child, so no reader is inside the registry there
   (a thread that was inside an execute at the fork left its shard counted); the child starts with
   empty shards and a fresh writer mutex.  pthread_atfork ties the handler to this library (glibc
   drops it at dlclose). */
static void cs_atfork_child(void)
{
    for(int i = 0; i < CS_RD_SHARDS; i++)
        g_reg_rd[i].readers = 0;
    g_reg_writer = 0;
    pthread_mutex_init(&g_reg_wmu, NULL);
    pthread_mutex_init(&g_log_lock, NULL);
}

#if defined(__GNUC__)
__attribute__((constructor))
#endif
static void cs_registry_load(void)
{
    pthread_atfork(NULL, NULL, cs_atfork_child);
}

/* Release the registry's array when the library is unloaded (dlclose). Objects a host leaked stay leaked. */
#if defined(__GNUC__)
__attribute__((destructor))
#endif
static void cs_registry_unload(void)
{
    cs_wrlock();
    free(g_reg);
    g_reg = NULL;
    g_reg_count = 0;
    g_reg_cap = 0;
    cs_wrunlock();
}

static long cs_reg_find_locked(const void* ptr, int kind)
{
    for(size_t i = 0; i < g_reg_count; i++)
        if(g_reg[i].ptr == ptr && g_reg[i].kind == kind)
            return (long)i;
    return -1;
}

static int cs_reg_add(const void* ptr, int kind)
{
    int ok = 1;
    cs_wrlock();
    if(g_reg_count == g_reg_cap)
    {
        size_t cap = g_reg_cap ? 2 * g_reg_cap : 16;
        cs_reg_entry* grown = realloc(g_reg, cap * sizeof *grown);
        if(grown == NULL)
            ok = 0;
        else
        {
            g_reg = grown;
            g_reg_cap = cap;
        }
    }
    if(ok)
    {
        g_reg[g_reg_count].ptr = ptr;
        g_reg[g_reg_count].kind = kind;
        g_reg_count++;
    }
    cs_wrunlock();
    return ok;
}

static void cs_reg_remove_locked(long i)
{
    g_reg[i] = g_reg[g_reg_count - 1];
    g_reg_count--;
}

static int cs_reg_contains(const void* ptr, int kind)
{
    cs_rd_shard* s = cs_rdlock();
    int found = cs_reg_find_locked(ptr, kind) >= 0;
    cs_rdunlock(s);
    return found;
}

/* Remove a plain buffer from the registry; 1 if it was registered. */
static int cs_reg_take(const void* ptr, int kind)
{
    cs_wrlock();
    long i = cs_reg_find_locked(ptr, kind);
    if(i >= 0)
        cs_reg_remove_locked(i);
    cs_wrunlock();
    return i >= 0;
}

static void cs_context_free(struct HipdnnEnginePluginExecutionContext* ctx)
{
    if(ctx == NULL)
        return;
    if(ctx->scratch != NULL)
        for(int32_t i = 0; i < ctx->prog.n_tensors; i++)
            free(ctx->scratch[i]);
    free(ctx->scratch);
    cs_program_free(&ctx->prog);
    free(ctx->graph);
    pthread_mutex_destroy(&ctx->run_lock);
    free(ctx);
}

static void cs_obj_free(cs_obj* o)
{
    if(o->kind == CS_KIND_HANDLE)
    {
        struct HipdnnEnginePluginHandle* h = (struct HipdnnEnginePluginHandle*)o;
        pthread_mutex_destroy(&h->lock);
        free(h);
    }
    else
        cs_context_free((struct HipdnnEnginePluginExecutionContext*)o);
}

/* A zeroed object on cache lines of its own (executions on other threads bump their objects' refs). */
static void* cs_obj_alloc(size_t size)
{
    size = (size + CS_CL_PAIR - 1) & ~(size_t)(CS_CL_PAIR - 1);
    void* p = aligned_alloc(CS_CL_PAIR, size);
    if(p != NULL)
        memset(p, 0, size);
    return p;
}

/* Take a reference on a live object; NULL if `ptr` is not a live object of that kind. The pointer is
   only dereferenced once it has been found in the registry (a registered object is never CS_DEAD). */
static cs_obj* cs_acquire(const void* ptr, int kind)
{
    cs_obj* o = NULL;
    cs_rd_shard* s = cs_rdlock();
    if(cs_reg_find_locked(ptr, kind) >= 0)
    {
        o = (cs_obj*)(void*)(uintptr_t)ptr;
        __atomic_add_fetch(&o->refs, 1u, __ATOMIC_ACQ_REL);
    }
    cs_rdunlock(s);
    return o;
}

static void cs_release(cs_obj* o)
{
    if(__atomic_sub_fetch(&o->refs, 1u, __ATOMIC_ACQ_REL) == CS_DEAD)
        cs_obj_free(o);
}

/* Unregister and free (now, or when the last in-flight user releases it). 0 if unknown. */
static int cs_retire(const void* ptr, int kind)
{
    cs_obj* o = NULL;
    int free_now = 0;
    cs_wrlock();
    long i = cs_reg_find_locked(ptr, kind);
    if(i >= 0)
    {
        cs_reg_remove_locked(i);
        o = (cs_obj*)(void*)(uintptr_t)ptr;
        o->dead = 1;
        free_now = __atomic_fetch_or(&o->refs, CS_DEAD, __ATOMIC_ACQ_REL) == 0;
    }
    cs_wrunlock();
    if(free_now)
        cs_obj_free(o);
    return i >= 0;
}

/* Common argument checks. */
static hipdnnPluginStatus_t cs_check_handle(const char* func, hipdnnEnginePluginHandle_t handle)
{
    if(handle == NULL)
        return cs_fail(HIPDNN_PLUGIN_STATUS_BAD_PARAM, func, "engine plugin handle is NULL");
    if(!cs_reg_contains(handle, CS_KIND_HANDLE))
        return cs_fail(HIPDNN_PLUGIN_STATUS_BAD_PARAM, func, "unknown or destroyed engine plugin handle %p",
                       (void*)handle);
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}

static hipdnnPluginStatus_t cs_check_data(const char* func, const char* what, const hipdnnPluginConstData_t* d)
{
    if(d == NULL)
        return cs_fail(HIPDNN_PLUGIN_STATUS_BAD_PARAM, func, "%s is NULL", what);
    if(d->ptr == NULL || d->size == 0)
        return cs_fail(HIPDNN_PLUGIN_STATUS_BAD_PARAM, func, "%s is empty (ptr %p, size %zu)", what, d->ptr,
                       d->size);
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}

static hipdnnPluginStatus_t cs_check_engine_id(const char* func, int64_t engine_id)
{
    if(engine_id != cs_engine_id())
        return cs_fail(HIPDNN_PLUGIN_STATUS_INVALID_VALUE, func,
                       "unknown engine id %lld (this plugin provides only %s, id %lld)", (long long)engine_id,
                       CS_ENGINE_NAME, (long long)cs_engine_id());
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}

/* Parse + check an op graph; maps parse results to statuses. */
static hipdnnPluginStatus_t cs_compile(const char* func, const hipdnnPluginConstData_t* op_graph, cs_program* prog)
{
    char why[CS_WHY_LEN];
    int rc = cs_program_from_graph(op_graph->ptr, op_graph->size, prog, why, sizeof why);
    switch(rc)
    {
    case CS_OK: return HIPDNN_PLUGIN_STATUS_SUCCESS;
    case CS_MALFORMED: return cs_fail(HIPDNN_PLUGIN_STATUS_BAD_PARAM, func, "invalid op graph: %s", why);
    case CS_NOMEM: return cs_fail(HIPDNN_PLUGIN_STATUS_ALLOC_FAILED, func, "%s", why);
    default:
        return cs_fail(HIPDNN_PLUGIN_STATUS_NOT_APPLICABLE, func, "engine %s does not support this graph: %s",
                       CS_ENGINE_NAME, why);
    }
}

/* EngineConfig: engine_id must be ours; this engine has no knobs. */
static hipdnnPluginStatus_t cs_check_engine_config(const char* func, const hipdnnPluginConstData_t* cfg)
{
    hipdnnPluginStatus_t st = cs_check_data(func, "engine config", cfg);
    if(st != HIPDNN_PLUGIN_STATUS_SUCCESS)
        return st;
    fb_buffer b;
    fb_table t;
    int64_t engine_id = 0;
    fb_vector knobs;
    const char* metric = NULL;
    uint32_t metric_len = 0;
    if(fb_init(&b, cfg->ptr, cfg->size, "EngineConfig") != FB_OK || fb_root(&b, &t) != FB_OK
       || fb_i64(&t, CS_ENGINE_CONFIG_ENGINE_ID, 0, &engine_id) == FB_BAD
       || fb_string(&t, CS_ENGINE_CONFIG_RANKING_METRIC, &metric, &metric_len) == FB_BAD)
        return cs_fail(HIPDNN_PLUGIN_STATUS_BAD_PARAM, func, "invalid engine config: %s", b.err);
    int krc = fb_vector_field(&t, CS_ENGINE_CONFIG_KNOBS, 4, &knobs);
    if(krc == FB_BAD)
        return cs_fail(HIPDNN_PLUGIN_STATUS_BAD_PARAM, func, "invalid engine config: %s", b.err);
    if(engine_id != cs_engine_id())
        return cs_fail(HIPDNN_PLUGIN_STATUS_INVALID_VALUE, func,
                       "engine config is for engine id %lld, not %s (id %lld)", (long long)engine_id, CS_ENGINE_NAME,
                       (long long)cs_engine_id());
    if(krc == FB_OK && knobs.len > 0)
    {
        fb_table k;
        const char* knob = NULL;
        uint32_t knob_len = 0;
        if(fb_vec_table(&knobs, 0, &k) != FB_OK || fb_string(&k, CS_KNOB_SETTING_KNOB_ID, &knob, &knob_len) == FB_BAD)
            return cs_fail(HIPDNN_PLUGIN_STATUS_BAD_PARAM, func, "invalid engine config: %s", b.err);
        return cs_fail(HIPDNN_PLUGIN_STATUS_INVALID_VALUE, func, "engine %s has no knobs, but the config sets '%.*s'",
                       CS_ENGINE_NAME, (int)(knob ? knob_len : 0), knob ? knob : "");
    }
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}

/* ---- base plugin API --------------------------------------------------------------------- */

HIPDNN_PLUGIN_EXPORT hipdnnPluginStatus_t hipdnnPluginGetName(const char** name)
{
    if(name == NULL)
        return FAIL(HIPDNN_PLUGIN_STATUS_BAD_PARAM, "name is NULL");
    *name = CS_PLUGIN_NAME;
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}

HIPDNN_PLUGIN_EXPORT hipdnnPluginStatus_t hipdnnPluginGetVersion(const char** version)
{
    if(version == NULL)
        return FAIL(HIPDNN_PLUGIN_STATUS_BAD_PARAM, "version is NULL");
    *version = CS_PLUGIN_VERSION;
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}

HIPDNN_PLUGIN_EXPORT hipdnnPluginStatus_t hipdnnPluginGetApiVersion(const char** version)
{
    if(version == NULL)
        return FAIL(HIPDNN_PLUGIN_STATUS_BAD_PARAM, "version is NULL");
    *version = CS_PLUGIN_API_VERSION;
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}

HIPDNN_PLUGIN_EXPORT hipdnnPluginStatus_t hipdnnPluginGetType(hipdnnPluginType_t* type)
{
    if(type == NULL)
        return FAIL(HIPDNN_PLUGIN_STATUS_BAD_PARAM, "type is NULL");
    *type = HIPDNN_PLUGIN_TYPE_ENGINE;
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}

HIPDNN_PLUGIN_EXPORT void hipdnnPluginGetLastErrorString(const char** error_str)
{
    if(error_str != NULL)
        *error_str = t_last_error;
}

HIPDNN_PLUGIN_EXPORT hipdnnPluginStatus_t hipdnnPluginSetLoggingCallback(hipdnnCallback_t callback)
{
    if(callback == NULL)
        return FAIL(HIPDNN_PLUGIN_STATUS_BAD_PARAM, "callback is NULL");
    pthread_mutex_lock(&g_log_lock);
    g_log_callback = callback;
    pthread_mutex_unlock(&g_log_lock);
    cs_log(HIPDNN_SEV_INFO, "logging callback installed (plugin %s, engine API %s)", CS_PLUGIN_VERSION,
           CS_PLUGIN_API_VERSION);
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}

HIPDNN_PLUGIN_EXPORT hipdnnPluginStatus_t hipdnnPluginSetLogLevel(hipdnnSeverity_t level)
{
    if((int)level < (int)HIPDNN_SEV_INFO || (int)level > (int)HIPDNN_SEV_OFF)
        return FAIL(HIPDNN_PLUGIN_STATUS_INVALID_VALUE, "invalid log level %d", (int)level);
    pthread_mutex_lock(&g_log_lock);
    g_log_level = level;
    pthread_mutex_unlock(&g_log_lock);
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}

/* ---- engine plugin API ------------------------------------------------------------------- */

HIPDNN_PLUGIN_EXPORT hipdnnPluginStatus_t hipdnnEnginePluginGetAllEngineIds(int64_t* engine_ids, uint32_t max_engines,
                                                                            uint32_t* num_engines)
{
    if(num_engines == NULL)
        return FAIL(HIPDNN_PLUGIN_STATUS_BAD_PARAM, "num_engines is NULL");
    if(engine_ids == NULL && max_engines > 0)
        return FAIL(HIPDNN_PLUGIN_STATUS_BAD_PARAM, "engine_ids is NULL but max_engines is %u", (unsigned)max_engines);
    if(max_engines >= 1)
        engine_ids[0] = cs_engine_id();
    *num_engines = 1;
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}

HIPDNN_PLUGIN_EXPORT hipdnnPluginStatus_t hipdnnEnginePluginGetEngineName(int64_t engine_id, const char** name)
{
    if(name == NULL)
        return FAIL(HIPDNN_PLUGIN_STATUS_BAD_PARAM, "name is NULL");
    hipdnnPluginStatus_t st = cs_check_engine_id(__func__, engine_id);
    if(st != HIPDNN_PLUGIN_STATUS_SUCCESS)
        return st;
    *name = CS_ENGINE_NAME;
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}

HIPDNN_PLUGIN_EXPORT hipdnnPluginStatus_t hipdnnEnginePluginCreate(hipdnnEnginePluginHandle_t* handle)
{
    if(handle == NULL)
        return FAIL(HIPDNN_PLUGIN_STATUS_BAD_PARAM, "handle is NULL");
    struct HipdnnEnginePluginHandle* h = cs_obj_alloc(sizeof *h);
    if(h == NULL)
        return FAIL(HIPDNN_PLUGIN_STATUS_ALLOC_FAILED, "out of memory");
    h->obj.kind = CS_KIND_HANDLE;
    h->stream = NULL;
    if(pthread_mutex_init(&h->lock, NULL) != 0)
    {
        free(h);
        return FAIL(HIPDNN_PLUGIN_STATUS_INTERNAL_ERROR, "pthread_mutex_init failed");
    }
    if(!cs_reg_add(h, CS_KIND_HANDLE))
    {
        pthread_mutex_destroy(&h->lock);
        free(h);
        return FAIL(HIPDNN_PLUGIN_STATUS_ALLOC_FAILED, "out of memory");
    }
    *handle = h;
    cs_log(HIPDNN_SEV_INFO, "created engine plugin handle %p", (void*)h);
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}

HIPDNN_PLUGIN_EXPORT hipdnnPluginStatus_t hipdnnEnginePluginDestroy(hipdnnEnginePluginHandle_t handle)
{
    if(handle == NULL)
        return FAIL(HIPDNN_PLUGIN_STATUS_BAD_PARAM, "handle is NULL");
    if(!cs_retire(handle, CS_KIND_HANDLE))
        return FAIL(HIPDNN_PLUGIN_STATUS_BAD_PARAM, "unknown or destroyed engine plugin handle %p", (void*)handle);
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}

HIPDNN_PLUGIN_EXPORT hipdnnPluginStatus_t hipdnnEnginePluginSetStream(hipdnnEnginePluginHandle_t handle,
                                                                      hipStream_t stream)
{
    if(handle == NULL)
        return FAIL(HIPDNN_PLUGIN_STATUS_BAD_PARAM, "handle is NULL");
    cs_obj* o = cs_acquire(handle, CS_KIND_HANDLE);
    if(o == NULL)
        return FAIL(HIPDNN_PLUGIN_STATUS_BAD_PARAM, "unknown or destroyed engine plugin handle %p", (void*)handle);
    struct HipdnnEnginePluginHandle* h = (struct HipdnnEnginePluginHandle*)o;
    pthread_mutex_lock(&h->lock);
    h->stream = stream; /* NULL = default stream */
    pthread_mutex_unlock(&h->lock);
    cs_release(o);
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}

HIPDNN_PLUGIN_EXPORT hipdnnPluginStatus_t hipdnnEnginePluginGetApplicableEngineIds(
    hipdnnEnginePluginHandle_t handle, const hipdnnPluginConstData_t* op_graph, int64_t* engine_ids,
    uint32_t max_engines, uint32_t* num_engines)
{
    hipdnnPluginStatus_t st = cs_check_handle(__func__, handle);
    if(st != HIPDNN_PLUGIN_STATUS_SUCCESS)
        return st;
    if(num_engines == NULL)
        return FAIL(HIPDNN_PLUGIN_STATUS_BAD_PARAM, "num_engines is NULL");
    if(engine_ids == NULL && max_engines > 0)
        return FAIL(HIPDNN_PLUGIN_STATUS_BAD_PARAM, "engine_ids is NULL but max_engines is %u", (unsigned)max_engines);
    if((st = cs_check_data(__func__, "op graph", op_graph)) != HIPDNN_PLUGIN_STATUS_SUCCESS)
        return st;
    char why[CS_WHY_LEN];
    cs_program prog;
    int rc = cs_program_from_graph(op_graph->ptr, op_graph->size, &prog, why, sizeof why);
    if(rc == CS_MALFORMED)
        return FAIL(HIPDNN_PLUGIN_STATUS_BAD_PARAM, "invalid op graph: %s", why);
    if(rc == CS_NOMEM)
        return FAIL(HIPDNN_PLUGIN_STATUS_ALLOC_FAILED, "%s", why);
    if(rc == CS_UNSUPPORTED)
    {
        cs_log(HIPDNN_SEV_INFO, "engine %s is not applicable: %s", CS_ENGINE_NAME, why);
        *num_engines = 0;
        return HIPDNN_PLUGIN_STATUS_SUCCESS;
    }
    cs_program_free(&prog);
    if(max_engines >= 1)
        engine_ids[0] = cs_engine_id();
    *num_engines = 1;
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}

/* EngineDetails FlatBuffer, laid out front to back (offsets from the buffer start, all aligned):
     0  u32 root offset -> 16
     4  vtable: u16 size 12, u16 inline size 24, slot offsets: engine_id 8, knobs 0 (absent),
        behavior_notes 16, name 20
    16  table: i32 soffset 12 (-> vtable at 4), 4 bytes padding, i64 engine_id at 24,
        u32 uoffset at 32 -> notes vector (40), u32 uoffset at 36 -> name string (48)
    40  [int] behavior_notes: u32 len 1, i32 SUPPORTS_EXECUTION_PLAN_SERIALIZATION
    48  string name: u32 len, bytes, NUL, zero padding to a multiple of 8 */
static uint8_t* cs_build_engine_details(size_t* size_out)
{
    const char* name = CS_ENGINE_NAME;
    size_t name_len = strlen(name);
    size_t size = 48 + 4 + name_len + 1;
    size = (size + 7) & ~(size_t)7;
    uint8_t* p = calloc(1, size);
    if(p == NULL)
        return NULL;
    cs_put32(p + 0, 16);
    cs_put16(p + 4, 4 + 2 * CS_ENGINE_DETAILS_SLOTS);
    cs_put16(p + 6, 24);
    cs_put16(p + 8, 8); /* engine_id */
    cs_put16(p + 10, 0); /* knobs: none */
    cs_put16(p + 12, 16); /* behavior_notes */
    cs_put16(p + 14, 20); /* name */
    cs_put32(p + 16, 16 - 4); /* soffset: table - vtable */
    cs_put64(p + 24, (uint64_t)cs_engine_id());
    cs_put32(p + 32, 40 - 32);
    cs_put32(p + 36, 48 - 36);
    cs_put32(p + 40, 1);
    cs_put32(p + 44, (uint32_t)HIPDNN_BEHAVIOR_NOTE_SUPPORTS_EXECUTION_PLAN_SERIALIZATION);
    cs_put32(p + 48, (uint32_t)name_len);
    memcpy(p + 52, name, name_len);
    *size_out = size;
    return p;
}

HIPDNN_PLUGIN_EXPORT hipdnnPluginStatus_t hipdnnEnginePluginGetEngineDetails(hipdnnEnginePluginHandle_t handle,
                                                                             int64_t engine_id,
                                                                             const hipdnnPluginConstData_t* op_graph,
                                                                             hipdnnPluginConstData_t* engine_details)
{
    hipdnnPluginStatus_t st = cs_check_handle(__func__, handle);
    if(st != HIPDNN_PLUGIN_STATUS_SUCCESS)
        return st;
    if(engine_details == NULL)
        return FAIL(HIPDNN_PLUGIN_STATUS_BAD_PARAM, "engine_details is NULL");
    if((st = cs_check_data(__func__, "op graph", op_graph)) != HIPDNN_PLUGIN_STATUS_SUCCESS)
        return st;
    if((st = cs_check_engine_id(__func__, engine_id)) != HIPDNN_PLUGIN_STATUS_SUCCESS)
        return st;
    char why[CS_WHY_LEN];
    int rc = cs_graph_well_formed(op_graph->ptr, op_graph->size, why, sizeof why);
    if(rc == CS_MALFORMED)
        return FAIL(HIPDNN_PLUGIN_STATUS_BAD_PARAM, "invalid op graph: %s", why);
    if(rc == CS_NOMEM)
        return FAIL(HIPDNN_PLUGIN_STATUS_ALLOC_FAILED, "%s", why);
    size_t size = 0;
    uint8_t* p = cs_build_engine_details(&size);
    if(p == NULL || !cs_reg_add(p, CS_KIND_DETAILS))
    {
        free(p);
        return FAIL(HIPDNN_PLUGIN_STATUS_ALLOC_FAILED, "out of memory");
    }
    engine_details->ptr = p;
    engine_details->size = size;
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}

HIPDNN_PLUGIN_EXPORT hipdnnPluginStatus_t hipdnnEnginePluginDestroyEngineDetails(hipdnnEnginePluginHandle_t handle,
                                                                                 hipdnnPluginConstData_t* engine_details)
{
    hipdnnPluginStatus_t st = cs_check_handle(__func__, handle);
    if(st != HIPDNN_PLUGIN_STATUS_SUCCESS)
        return st;
    if(engine_details == NULL)
        return FAIL(HIPDNN_PLUGIN_STATUS_BAD_PARAM, "engine_details is NULL");
    if(engine_details->ptr == NULL)
    {
        engine_details->size = 0; /* nothing to free */
        return HIPDNN_PLUGIN_STATUS_SUCCESS;
    }
    if(!cs_reg_take(engine_details->ptr, CS_KIND_DETAILS))
        return FAIL(HIPDNN_PLUGIN_STATUS_BAD_PARAM, "engine details %p were not created by this plugin (or already destroyed)",
                    engine_details->ptr);
    free((void*)(uintptr_t)engine_details->ptr);
    engine_details->ptr = NULL;
    engine_details->size = 0;
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}

HIPDNN_PLUGIN_EXPORT hipdnnPluginStatus_t hipdnnEnginePluginGetWorkspaceSize(hipdnnEnginePluginHandle_t handle,
                                                                             const hipdnnPluginConstData_t* engine_config,
                                                                             const hipdnnPluginConstData_t* op_graph,
                                                                             size_t* workspace_size)
{
    hipdnnPluginStatus_t st = cs_check_handle(__func__, handle);
    if(st != HIPDNN_PLUGIN_STATUS_SUCCESS)
        return st;
    if(workspace_size == NULL)
        return FAIL(HIPDNN_PLUGIN_STATUS_BAD_PARAM, "workspace_size is NULL");
    if((st = cs_check_data(__func__, "op graph", op_graph)) != HIPDNN_PLUGIN_STATUS_SUCCESS)
        return st;
    if((st = cs_check_engine_config(__func__, engine_config)) != HIPDNN_PLUGIN_STATUS_SUCCESS)
        return st;
    cs_program prog;
    if((st = cs_compile(__func__, op_graph, &prog)) != HIPDNN_PLUGIN_STATUS_SUCCESS)
        return st;
    cs_program_free(&prog);
    *workspace_size = 0; /* intermediates live in the execution context */
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}

/* Build a context from a graph; *out is written only on success. */
static hipdnnPluginStatus_t cs_context_new(const char* func, const hipdnnPluginConstData_t* op_graph,
                                           hipdnnEnginePluginExecutionContext_t* out)
{
    struct HipdnnEnginePluginExecutionContext* ctx = cs_obj_alloc(sizeof *ctx);
    if(ctx == NULL)
        return cs_fail(HIPDNN_PLUGIN_STATUS_ALLOC_FAILED, func, "out of memory");
    hipdnnPluginStatus_t st = cs_compile(func, op_graph, &ctx->prog);
    if(st != HIPDNN_PLUGIN_STATUS_SUCCESS)
    {
        free(ctx);
        return st;
    }
    ctx->obj.kind = CS_KIND_CONTEXT;
    if(pthread_mutex_init(&ctx->run_lock, NULL) != 0)
    {
        cs_program_free(&ctx->prog);
        free(ctx);
        return cs_fail(HIPDNN_PLUGIN_STATUS_INTERNAL_ERROR, func, "pthread_mutex_init failed");
    }
    ctx->graph = malloc(op_graph->size);
    ctx->graph_size = op_graph->size;
    ctx->scratch = calloc((size_t)ctx->prog.n_tensors, sizeof *ctx->scratch);
    if(ctx->graph == NULL || ctx->scratch == NULL)
    {
        cs_context_free(ctx);
        return cs_fail(HIPDNN_PLUGIN_STATUS_ALLOC_FAILED, func, "out of memory");
    }
    memcpy(ctx->graph, op_graph->ptr, op_graph->size);
    for(int32_t i = 0; i < ctx->prog.n_tensors; i++)
    {
        const cs_tensor* t = &ctx->prog.tensors[i];
        if(!t->is_virtual || !t->used)
            continue;
        int64_t n = cs_elements(t);
        int64_t uid = t->uid;
        ctx->scratch[i] = malloc((size_t)n * sizeof(float));
        ctx->has_scratch = 1;
        if(ctx->scratch[i] == NULL)
        {
            cs_context_free(ctx); /* t points into ctx: use the copies below */
            return cs_fail(HIPDNN_PLUGIN_STATUS_ALLOC_FAILED, func,
                           "cannot allocate %lld floats for virtual tensor uid %lld", (long long)n, (long long)uid);
        }
    }
    if(!cs_reg_add(ctx, CS_KIND_CONTEXT))
    {
        cs_context_free(ctx);
        return cs_fail(HIPDNN_PLUGIN_STATUS_ALLOC_FAILED, func, "out of memory");
    }
    *out = ctx;
    cs_log(HIPDNN_SEV_INFO, "created execution context %p (%d nodes, %d tensors)", (void*)ctx,
           (int)ctx->prog.n_nodes, (int)ctx->prog.n_tensors);
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}

HIPDNN_PLUGIN_EXPORT hipdnnPluginStatus_t hipdnnEnginePluginCreateExecutionContext(
    hipdnnEnginePluginHandle_t handle, const hipdnnPluginConstData_t* engine_config,
    const hipdnnPluginConstData_t* op_graph, hipdnnEnginePluginExecutionContext_t* execution_context)
{
    hipdnnPluginStatus_t st = cs_check_handle(__func__, handle);
    if(st != HIPDNN_PLUGIN_STATUS_SUCCESS)
        return st;
    if(execution_context == NULL)
        return FAIL(HIPDNN_PLUGIN_STATUS_BAD_PARAM, "execution_context is NULL");
    if((st = cs_check_data(__func__, "op graph", op_graph)) != HIPDNN_PLUGIN_STATUS_SUCCESS)
        return st;
    if((st = cs_check_engine_config(__func__, engine_config)) != HIPDNN_PLUGIN_STATUS_SUCCESS)
        return st;
    return cs_context_new(__func__, op_graph, execution_context);
}

HIPDNN_PLUGIN_EXPORT hipdnnPluginStatus_t hipdnnEnginePluginDestroyExecutionContext(
    hipdnnEnginePluginHandle_t handle, hipdnnEnginePluginExecutionContext_t execution_context)
{
    hipdnnPluginStatus_t st = cs_check_handle(__func__, handle);
    if(st != HIPDNN_PLUGIN_STATUS_SUCCESS)
        return st;
    if(execution_context == NULL)
        return FAIL(HIPDNN_PLUGIN_STATUS_BAD_PARAM, "execution_context is NULL");
    if(!cs_retire(execution_context, CS_KIND_CONTEXT))
        return FAIL(HIPDNN_PLUGIN_STATUS_BAD_PARAM, "unknown or destroyed execution context %p",
                    (void*)execution_context);
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}

HIPDNN_PLUGIN_EXPORT hipdnnPluginStatus_t hipdnnEnginePluginGetWorkspaceSizeFromExecutionContext(
    hipdnnEnginePluginHandle_t handle, hipdnnEnginePluginExecutionContext_t execution_context, size_t* workspace_size)
{
    hipdnnPluginStatus_t st = cs_check_handle(__func__, handle);
    if(st != HIPDNN_PLUGIN_STATUS_SUCCESS)
        return st;
    if(execution_context == NULL)
        return FAIL(HIPDNN_PLUGIN_STATUS_BAD_PARAM, "execution_context is NULL");
    if(workspace_size == NULL)
        return FAIL(HIPDNN_PLUGIN_STATUS_BAD_PARAM, "workspace_size is NULL");
    if(!cs_reg_contains(execution_context, CS_KIND_CONTEXT))
        return FAIL(HIPDNN_PLUGIN_STATUS_BAD_PARAM, "unknown or destroyed execution context %p",
                    (void*)execution_context);
    *workspace_size = 0;
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}

/* ---- execution --------------------------------------------------------------------------- */

static hipdnnPluginStatus_t cs_apply_overrides(const char* func, const cs_program* prog, cs_tensor* tensors,
                                               uint32_t num_overrides, const int64_t* uids, const uint32_t* lengths,
                                               const int64_t* const* shapes, const int64_t* const* strides)
{
    unsigned char* overridden = calloc((size_t)prog->n_tensors + 1, 1);
    if(overridden == NULL)
        return cs_fail(HIPDNN_PLUGIN_STATUS_ALLOC_FAILED, func, "out of memory");
    hipdnnPluginStatus_t st = HIPDNN_PLUGIN_STATUS_SUCCESS;
    for(uint32_t j = 0; j < num_overrides && st == HIPDNN_PLUGIN_STATUS_SUCCESS; j++)
    {
        int32_t idx = -1;
        for(int32_t i = 0; i < prog->n_tensors; i++)
            if(tensors[i].uid == uids[j])
            {
                idx = i;
                break;
            }
        uint32_t len = lengths[j];
        if(idx < 0)
            st = cs_fail(HIPDNN_PLUGIN_STATUS_INVALID_VALUE, func, "override for tensor uid %lld, which is not in the graph",
                         (long long)uids[j]);
        else if(overridden[idx])
            st = cs_fail(HIPDNN_PLUGIN_STATUS_INVALID_VALUE, func, "tensor uid %lld is overridden twice",
                         (long long)uids[j]);
        else if(tensors[idx].is_const)
            st = cs_fail(HIPDNN_PLUGIN_STATUS_INVALID_VALUE, func, "tensor uid %lld is a by-value constant",
                         (long long)uids[j]);
        else if(len == 0 || len > CS_MAX_DIMS)
            st = cs_fail(HIPDNN_PLUGIN_STATUS_INVALID_VALUE, func, "override for tensor uid %lld has %u dims (1..%d)",
                         (long long)uids[j], (unsigned)len, CS_MAX_DIMS);
        else if(shapes[j] == NULL)
            st = cs_fail(HIPDNN_PLUGIN_STATUS_BAD_PARAM, func, "override shape %u (tensor uid %lld) is NULL",
                         (unsigned)j, (long long)uids[j]);
        if(st != HIPDNN_PLUGIN_STATUS_SUCCESS)
            break;
        cs_tensor* t = &tensors[idx];
        const int64_t* s = (strides != NULL && !t->is_virtual) ? strides[j] : NULL;
        t->ndims = (int32_t)len;
        int64_t elems = 1, span = 1;
        for(uint32_t d = 0; d < len && st == HIPDNN_PLUGIN_STATUS_SUCCESS; d++)
        {
            int64_t dim = shapes[j][d];
            if(dim < 1 || dim > CS_MAX_ELEMENTS || elems > CS_MAX_ELEMENTS / dim)
                st = cs_fail(HIPDNN_PLUGIN_STATUS_INVALID_VALUE, func, "override for tensor uid %lld: bad dim %u = %lld",
                             (long long)t->uid, (unsigned)d, (long long)dim);
            else
            {
                elems *= dim;
                t->dims[d] = dim;
            }
        }
        if(st != HIPDNN_PLUGIN_STATUS_SUCCESS)
            break;
        if(s == NULL)
            cs_packed_strides(t);
        else
            for(uint32_t d = 0; d < len && st == HIPDNN_PLUGIN_STATUS_SUCCESS; d++)
            {
                int64_t sd = s[d];
                if(sd < 0 || sd > CS_MAX_SPAN || (t->dims[d] > 1 && sd > (CS_MAX_SPAN - span) / (t->dims[d] - 1)))
                    st = cs_fail(HIPDNN_PLUGIN_STATUS_INVALID_VALUE, func,
                                 "override for tensor uid %lld: bad stride %u = %lld", (long long)t->uid, (unsigned)d,
                                 (long long)sd);
                else
                {
                    span += (t->dims[d] - 1) * sd;
                    t->strides[d] = sd;
                }
            }
        overridden[idx] = 1;
    }
    /* Virtual intermediates that were not overridden follow their inputs. */
    for(int32_t i = 0; i < prog->n_nodes && st == HIPDNN_PLUGIN_STATUS_SUCCESS; i++)
    {
        const cs_node* n = &prog->nodes[i];
        cs_tensor* y = &tensors[n->out];
        if(!y->is_virtual || overridden[n->out])
            continue;
        int32_t ins[2] = {n->in0, n->in1};
        const cs_tensor* ref = NULL;
        for(int k = 0; k < 2; k++)
            if(ins[k] >= 0 && cs_elements(&tensors[ins[k]]) != 1 && ref == NULL)
                ref = &tensors[ins[k]];
        if(ref == NULL)
            continue; /* all inputs are single elements: keep the declared shape */
        y->ndims = ref->ndims;
        for(int32_t d = 0; d < ref->ndims; d++)
        {
            int64_t m = 1;
            for(int k = 0; k < 2; k++)
            {
                if(ins[k] < 0 || cs_elements(&tensors[ins[k]]) == 1)
                    continue;
                const cs_tensor* x = &tensors[ins[k]];
                if(d < x->ndims && x->dims[d] > m)
                    m = x->dims[d];
            }
            y->dims[d] = m;
        }
        cs_packed_strides(y);
    }
    if(st == HIPDNN_PLUGIN_STATUS_SUCCESS)
    {
        char why[CS_WHY_LEN];
        if(cs_check_shapes(prog, tensors, why, sizeof why) != CS_OK)
            st = cs_fail(HIPDNN_PLUGIN_STATUS_INVALID_VALUE, func, "override shapes are inconsistent: %s", why);
    }
    free(overridden);
    return st;
}

#define CS_SMALL_TENSORS 16 /* graphs with at most this many tensors bind their pointers on the stack */

static hipdnnPluginStatus_t cs_execute(const char* func, hipdnnEnginePluginHandle_t handle,
                                       hipdnnEnginePluginExecutionContext_t execution_context,
                                       const hipdnnPluginDeviceBuffer_t* device_buffers, uint32_t num_device_buffers,
                                       uint32_t num_overrides, const int64_t* override_unique_ids,
                                       const uint32_t* override_lengths, const int64_t* const* override_shapes,
                                       const int64_t* const* override_strides)
{
    hipdnnPluginStatus_t st = HIPDNN_PLUGIN_STATUS_SUCCESS;
    if(handle == NULL)
        return cs_fail(HIPDNN_PLUGIN_STATUS_BAD_PARAM, func, "engine plugin handle is NULL");
    /* One reader section for both lookups (the handle, then the context with a reference); the
       checks below still answer in the order of the messages: handle, context NULL, buffers,
       overrides, context unknown. */
    cs_obj* o = NULL;
    cs_rd_shard* rs = cs_rdlock();
    int handle_ok = cs_reg_find_locked(handle, CS_KIND_HANDLE) >= 0;
    if(handle_ok && execution_context != NULL && cs_reg_find_locked(execution_context, CS_KIND_CONTEXT) >= 0)
    {
        o = (cs_obj*)(void*)execution_context;
        __atomic_add_fetch(&o->refs, 1u, __ATOMIC_ACQ_REL);
    }
    cs_rdunlock(rs);
    if(!handle_ok)
        st = cs_fail(HIPDNN_PLUGIN_STATUS_BAD_PARAM, func, "unknown or destroyed engine plugin handle %p",
                     (void*)handle);
    else if(execution_context == NULL)
        st = cs_fail(HIPDNN_PLUGIN_STATUS_BAD_PARAM, func, "execution_context is NULL");
    else if(device_buffers == NULL && num_device_buffers > 0)
        st = cs_fail(HIPDNN_PLUGIN_STATUS_BAD_PARAM, func, "device_buffers is NULL but num_device_buffers is %u",
                     (unsigned)num_device_buffers);
    else if(num_overrides > 0 && (override_unique_ids == NULL || override_lengths == NULL || override_shapes == NULL))
        st = cs_fail(HIPDNN_PLUGIN_STATUS_BAD_PARAM, func, "override arrays are NULL but num_overrides is %u",
                     (unsigned)num_overrides);
    else if(o == NULL)
        st = cs_fail(HIPDNN_PLUGIN_STATUS_BAD_PARAM, func, "unknown or destroyed execution context %p",
                     (void*)execution_context);
    if(st != HIPDNN_PLUGIN_STATUS_SUCCESS)
    {
        if(o != NULL)
            cs_release(o);
        return st;
    }
    struct HipdnnEnginePluginExecutionContext* ctx = (struct HipdnnEnginePluginExecutionContext*)o;
    const cs_program* prog = &ctx->prog;
    int32_t nt = prog->n_tensors;

    cs_tensor* own_tensors = NULL;
    float** own_scratch = NULL;
    float* ptrs_small[CS_SMALL_TENSORS] = {0}; /* small graphs: no allocation per execute */
    float** ptrs = nt <= CS_SMALL_TENSORS ? ptrs_small : calloc((size_t)nt, sizeof *ptrs);
    const cs_tensor* tensors = prog->tensors;
    int locked = 0;
    if(ptrs == NULL)
    {
        st = cs_fail(HIPDNN_PLUGIN_STATUS_ALLOC_FAILED, func, "out of memory");
        goto done;
    }
    if(num_overrides > 0)
    {
        own_tensors = malloc((size_t)nt * sizeof *own_tensors);
        own_scratch = calloc((size_t)nt, sizeof *own_scratch);
        if(own_tensors == NULL || own_scratch == NULL)
        {
            st = cs_fail(HIPDNN_PLUGIN_STATUS_ALLOC_FAILED, func, "out of memory");
            goto done;
        }
        memcpy(own_tensors, prog->tensors, (size_t)nt * sizeof *own_tensors);
        st = cs_apply_overrides(func, prog, own_tensors, num_overrides, override_unique_ids, override_lengths,
                                override_shapes, override_strides);
        if(st != HIPDNN_PLUGIN_STATUS_SUCCESS)
            goto done;
        tensors = own_tensors;
    }

    /* Bind every tensor the nodes touch. */
    for(int32_t i = 0; i < nt; i++)
    {
        const cs_tensor* t = &tensors[i];
        if(!t->used)
            continue;
        if(t->is_const)
        {
            ptrs[i] = (float*)(uintptr_t)&prog->tensors[i].const_value; /* read-only: constants are never outputs */
            continue;
        }
        if(t->is_virtual)
        {
            if(own_scratch != NULL)
            {
                own_scratch[i] = malloc((size_t)cs_elements(t) * sizeof(float));
                if(own_scratch[i] == NULL)
                {
                    st = cs_fail(HIPDNN_PLUGIN_STATUS_ALLOC_FAILED, func,
                                 "cannot allocate %lld floats for virtual tensor uid %lld", (long long)cs_elements(t),
                                 (long long)t->uid);
                    goto done;
                }
                ptrs[i] = own_scratch[i];
            }
            else
                ptrs[i] = ctx->scratch[i];
            continue;
        }
        const hipdnnPluginDeviceBuffer_t* found = NULL;
        for(uint32_t k = 0; k < num_device_buffers; k++)
            if(device_buffers[k].uid == t->uid)
            {
                found = &device_buffers[k];
                break;
            }
        if(found == NULL)
        {
            st = cs_fail(HIPDNN_PLUGIN_STATUS_INVALID_VALUE, func, "no device buffer for tensor uid %lld",
                         (long long)t->uid);
            goto done;
        }
        if(found->ptr == NULL)
        {
            st = cs_fail(HIPDNN_PLUGIN_STATUS_INVALID_VALUE, func, "device buffer for tensor uid %lld is NULL",
                         (long long)t->uid);
            goto done;
        }
        ptrs[i] = (float*)found->ptr;
    }

    if(own_scratch == NULL && ctx->has_scratch)
    {
        pthread_mutex_lock(&ctx->run_lock); /* the context's scratch is shared by concurrent executions */
        locked = 1;
    }
    cs_run(prog, tensors, ptrs);

done:
    if(locked)
        pthread_mutex_unlock(&ctx->run_lock);
    if(own_scratch != NULL)
        for(int32_t i = 0; i < nt; i++)
            free(own_scratch[i]);
    free(own_scratch);
    free(own_tensors);
    if(ptrs != ptrs_small)
        free(ptrs);
    cs_release(o);
    return st;
}

HIPDNN_PLUGIN_EXPORT hipdnnPluginStatus_t hipdnnEnginePluginExecuteOpGraph(
    hipdnnEnginePluginHandle_t handle, hipdnnEnginePluginExecutionContext_t execution_context, void* workspace,
    const hipdnnPluginDeviceBuffer_t* device_buffers, uint32_t num_device_buffers)
{
    (void)workspace; /* workspace size is 0 */
    return cs_execute(__func__, handle, execution_context, device_buffers, num_device_buffers, 0, NULL, NULL, NULL,
                      NULL);
}

HIPDNN_PLUGIN_EXPORT hipdnnPluginStatus_t hipdnnEnginePluginExecuteOpGraphWithOverrides(
    hipdnnEnginePluginHandle_t handle, hipdnnEnginePluginExecutionContext_t execution_context, void* workspace,
    const hipdnnPluginDeviceBuffer_t* device_buffers, uint32_t num_device_buffers, uint32_t num_overrides,
    const int64_t* override_unique_ids, const uint32_t* override_lengths, const int64_t* const* override_shapes,
    const int64_t* const* override_strides)
{
    (void)workspace;
    return cs_execute(__func__, handle, execution_context, device_buffers, num_device_buffers, num_overrides,
                      override_unique_ids, override_lengths, override_shapes, override_strides);
}

/* ---- serialization ----------------------------------------------------------------------- */

static hipdnnPluginStatus_t cs_serialize(const char* func, hipdnnEnginePluginHandle_t handle, int64_t engine_id,
                                         hipdnnEnginePluginExecutionContext_t execution_context,
                                         hipdnnPluginConstData_t* serialized_context)
{
    hipdnnPluginStatus_t st = cs_check_handle(func, handle);
    if(st != HIPDNN_PLUGIN_STATUS_SUCCESS)
        return st;
    if(execution_context == NULL)
        return cs_fail(HIPDNN_PLUGIN_STATUS_BAD_PARAM, func, "execution_context is NULL");
    if(serialized_context == NULL)
        return cs_fail(HIPDNN_PLUGIN_STATUS_BAD_PARAM, func, "serialized_context is NULL");
    if((st = cs_check_engine_id(func, engine_id)) != HIPDNN_PLUGIN_STATUS_SUCCESS)
        return st;
    cs_obj* o = cs_acquire(execution_context, CS_KIND_CONTEXT);
    if(o == NULL)
        return cs_fail(HIPDNN_PLUGIN_STATUS_BAD_PARAM, func, "unknown or destroyed execution context %p",
                       (void*)execution_context);
    struct HipdnnEnginePluginExecutionContext* ctx = (struct HipdnnEnginePluginExecutionContext*)o;
    size_t size = CS_PAYLOAD_HEADER_SIZE + CS_PAYLOAD_GRAPH_PREFIX + ctx->graph_size;
    uint8_t* p = ctx->graph_size <= UINT32_MAX ? malloc(size) : NULL;
    if(p == NULL || !cs_reg_add(p, CS_KIND_PAYLOAD))
    {
        free(p);
        cs_release(o);
        return cs_fail(HIPDNN_PLUGIN_STATUS_ALLOC_FAILED, func, "cannot allocate a %zu-byte payload", size);
    }
    memcpy(p, CS_PAYLOAD_MAGIC, 4);
    cs_put16(p + 4, CS_PAYLOAD_MAJOR);
    cs_put16(p + 6, CS_PAYLOAD_MINOR);
    cs_put32(p + 8, CS_PAYLOAD_KIND_GRAPH);
    uint8_t* body = p + CS_PAYLOAD_HEADER_SIZE;
    cs_put64(body + 0, (uint64_t)cs_engine_id());
    cs_put64(body + 8, cs_fnv1a64(ctx->graph, ctx->graph_size));
    cs_put32(body + 16, (uint32_t)ctx->graph_size);
    cs_put32(body + 20, 0);
    memcpy(body + CS_PAYLOAD_GRAPH_PREFIX, ctx->graph, ctx->graph_size);
    cs_release(o);
    serialized_context->ptr = p;
    serialized_context->size = size;
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}

HIPDNN_PLUGIN_EXPORT hipdnnPluginStatus_t hipdnnEnginePluginSerializeExecutionContextWithEngineId(
    hipdnnEnginePluginHandle_t handle, int64_t engine_id, hipdnnEnginePluginExecutionContext_t execution_context,
    hipdnnPluginConstData_t* serialized_context)
{
    return cs_serialize(__func__, handle, engine_id, execution_context, serialized_context);
}

/* Earlier three-argument form (resolved by older backends). */
HIPDNN_PLUGIN_EXPORT hipdnnPluginStatus_t hipdnnEnginePluginSerializeExecutionContext(
    hipdnnEnginePluginHandle_t handle, hipdnnEnginePluginExecutionContext_t execution_context,
    hipdnnPluginConstData_t* serialized_context)
{
    return cs_serialize(__func__, handle, cs_engine_id(), execution_context, serialized_context);
}

HIPDNN_PLUGIN_EXPORT hipdnnPluginStatus_t hipdnnEnginePluginDestroySerializedExecutionContext(
    hipdnnEnginePluginHandle_t handle, hipdnnPluginConstData_t* serialized_context)
{
    hipdnnPluginStatus_t st = cs_check_handle(__func__, handle);
    if(st != HIPDNN_PLUGIN_STATUS_SUCCESS)
        return st;
    if(serialized_context == NULL)
        return FAIL(HIPDNN_PLUGIN_STATUS_BAD_PARAM, "serialized_context is NULL");
    if(serialized_context->ptr == NULL)
    {
        serialized_context->size = 0; /* e.g. after a failed serialize: nothing to free */
        return HIPDNN_PLUGIN_STATUS_SUCCESS;
    }
    if(!cs_reg_take(serialized_context->ptr, CS_KIND_PAYLOAD))
        return FAIL(HIPDNN_PLUGIN_STATUS_BAD_PARAM,
                    "serialized context %p was not created by this plugin (or already destroyed)",
                    serialized_context->ptr);
    free((void*)(uintptr_t)serialized_context->ptr);
    serialized_context->ptr = NULL;
    serialized_context->size = 0;
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}

HIPDNN_PLUGIN_EXPORT hipdnnPluginStatus_t hipdnnEnginePluginCreateExecutionContextFromSerialized(
    hipdnnEnginePluginHandle_t handle, const hipdnnPluginConstData_t* serialized_context,
    hipdnnEnginePluginExecutionContext_t* execution_context)
{
    hipdnnPluginStatus_t st = cs_check_handle(__func__, handle);
    if(st != HIPDNN_PLUGIN_STATUS_SUCCESS)
        return st;
    if(execution_context == NULL)
        return FAIL(HIPDNN_PLUGIN_STATUS_BAD_PARAM, "execution_context is NULL");
    if((st = cs_check_data(__func__, "serialized context", serialized_context)) != HIPDNN_PLUGIN_STATUS_SUCCESS)
        return st;

    /* Validate the whole payload before building anything. */
    const uint8_t* p = (const uint8_t*)serialized_context->ptr;
    size_t size = serialized_context->size;
    if(size < CS_PAYLOAD_HEADER_SIZE)
        return FAIL(HIPDNN_PLUGIN_STATUS_BAD_PARAM, "serialized context is truncated: %zu bytes, header needs %u", size,
                    CS_PAYLOAD_HEADER_SIZE);
    if(memcmp(p, CS_PAYLOAD_MAGIC, 4) != 0)
        return FAIL(HIPDNN_PLUGIN_STATUS_INVALID_VALUE,
                    "serialized context has magic %02x %02x %02x %02x, expected \"HCSP\" (not a %s payload)", p[0],
                    p[1], p[2], p[3], CS_PLUGIN_NAME);
    unsigned major = fb_le16(p + 4), minor = fb_le16(p + 6), kind = fb_le32(p + 8);
    if(major != CS_PAYLOAD_MAJOR)
        return FAIL(HIPDNN_PLUGIN_STATUS_INVALID_VALUE,
                    "serialized context format %u.%u is not supported (this plugin reads major %u)", major, minor,
                    CS_PAYLOAD_MAJOR);
    if(kind != CS_PAYLOAD_KIND_GRAPH)
        return FAIL(HIPDNN_PLUGIN_STATUS_INVALID_VALUE, "serialized context has unknown payload kind %u", kind);
    size_t body = size - CS_PAYLOAD_HEADER_SIZE;
    if(body == 0)
        return FAIL(HIPDNN_PLUGIN_STATUS_BAD_PARAM, "serialized context has an empty payload");
    if(body < CS_PAYLOAD_GRAPH_PREFIX)
        return FAIL(HIPDNN_PLUGIN_STATUS_BAD_PARAM, "serialized context payload is truncated: %zu bytes, needs %u",
                    body, CS_PAYLOAD_GRAPH_PREFIX);
    const uint8_t* b = p + CS_PAYLOAD_HEADER_SIZE;
    int64_t engine_id = (int64_t)fb_le64(b);
    uint64_t checksum = fb_le64(b + 8);
    uint32_t graph_size = fb_le32(b + 16);
    uint32_t reserved = fb_le32(b + 20);
    size_t avail = body - CS_PAYLOAD_GRAPH_PREFIX;
    if(graph_size == 0)
        return FAIL(HIPDNN_PLUGIN_STATUS_BAD_PARAM, "serialized context carries an empty graph");
    if((size_t)graph_size > avail)
        return FAIL(HIPDNN_PLUGIN_STATUS_BAD_PARAM, "serialized context is truncated: graph of %u bytes, %zu present",
                    (unsigned)graph_size, avail);
    if(minor <= CS_PAYLOAD_MINOR && ((size_t)graph_size != avail || reserved != 0))
        return FAIL(HIPDNN_PLUGIN_STATUS_BAD_PARAM,
                    "serialized context is malformed: %zu trailing bytes, reserved field %u", avail - graph_size,
                    (unsigned)reserved);
    if(engine_id != cs_engine_id())
        return FAIL(HIPDNN_PLUGIN_STATUS_INVALID_VALUE, "serialized context is for engine id %lld, not %s (id %lld)",
                    (long long)engine_id, CS_ENGINE_NAME, (long long)cs_engine_id());
    const uint8_t* graph = b + CS_PAYLOAD_GRAPH_PREFIX;
    if(cs_fnv1a64(graph, graph_size) != checksum)
        return FAIL(HIPDNN_PLUGIN_STATUS_BAD_PARAM, "serialized context is corrupted (graph checksum mismatch)");
    hipdnnPluginConstData_t g = {graph, graph_size};
    return cs_context_new(__func__, &g, execution_context);
}
