/* The exported hipDNN backend functions of libhipdnn_backend.so.
 *
 * Every export is a C shim: it makes sure the embedded Python started (else it returns
 * HIPDNN_STATUS_INTERNAL_ERROR and stores the reason as the thread's last error), validates what
 * can be validated in C, converts pointers to int64 ids and calls an internal extern "Python"
 * function (declared in hipdnn_cabi/backend/_externs.py).  The last-error slot, the status strings
 * and the version string live here in C, so they work even when Python cannot start.
 *
 * This file is pasted into cffi's set_source() by cdef/build_backend.py, after the bootstrap
 * (cdef/bootstrap.c) and cffi's own declarations of the hpy_* functions.
 */
#include <string.h>
#include <stdio.h>
#include <stdlib.h>
#include "hipdnn_backend.h"

#define HX HIPDNN_BACKEND_EXPORT

#ifndef HIPDNN_CABI_BACKEND_VERSION
#define HIPDNN_CABI_BACKEND_VERSION "1.0.0.0"
#endif

/* ------------------------------------------------------------------ last error (per thread) */
static __thread char g_last_error[HIPDNN_ERROR_STRING_MAX_LENGTH];

static void hipdnn_cabi_set_last_error(const char* msg)
{
    if (msg == NULL)
        msg = "";
    size_t n = strlen(msg);
    if (n > HIPDNN_ERROR_STRING_MAX_LENGTH - 1)
        n = HIPDNN_ERROR_STRING_MAX_LENGTH - 1;
    memcpy(g_last_error, msg, n);
    g_last_error[n] = '\0';
}

static const char* hipdnn_cabi_peek_last_error(void) { return g_last_error; }

/* ------------------------------------------------------------------ readiness and logging */
static volatile int g_py_ready = 0;          /* set by Python once every body is attached */
static volatile int g_ready = 0;             /* fast path: everything checked once */
static volatile int g_log_level = HIPDNN_SEV_OFF; /* mirror of the Python-side global level */
static char g_init_error[1024] = "";

static void hipdnn_cabi_mark_ready(void) { g_py_ready = 1; }
static void hipdnn_cabi_set_log_level_cache(int level) { g_log_level = level; }
static void hipdnn_cabi_set_init_error(const char* msg)
{
    snprintf(g_init_error, sizeof g_init_error, "%s", msg ? msg : "");
}

static void hipdnn_cabi_call_user_log_cb(uint64_t cb, uint64_t user, int sev, const char* msg)
{
    hipdnnUserLogCallback_t f = (hipdnnUserLogCallback_t)(uintptr_t)cb;
    if (f)
        f((hipdnnUserLogCallbackHandle_t)(uintptr_t)user, (hipdnnSeverity_t)sev, msg);
}

/* The process environment as it is now (Python's os.environ is a copy taken at interpreter start;
 * a C caller's setenv after that only shows here).  hipdnn_cabi/backend/env.py copies the value
 * at once. */
static const char* hipdnn_cabi_getenv(const char* name) { return name ? getenv(name) : NULL; }

static void hipdnn_cabi_call_plugin_log_cb(uint64_t cb, int sev, const char* msg)
{
    hipdnnCallback_t f = (hipdnnCallback_t)(uintptr_t)cb;
    if (f)
        f((hipdnnSeverity_t)sev, msg);
}

/* Returns 0 when the Python side is usable, else a status (with the last error set). */
static int hipdnn_cabi_enter_slow(void)
{
    char msg[1200];
    if (hipdnn_cabi_bootstrap() != 0) {
        snprintf(msg, sizeof msg, "hipdnn-cabi: the embedded Python interpreter failed to start: %s",
                 g_boot_error);
        hipdnn_cabi_set_last_error(msg);
        return HIPDNN_STATUS_INTERNAL_ERROR;
    }
    if (hipdnn_cabi_start_embedded() != 0) {
        hipdnn_cabi_set_last_error("hipdnn-cabi: the embedded Python module failed to initialise "
                                   "(see stderr for the Python traceback)");
        return HIPDNN_STATUS_INTERNAL_ERROR;
    }
    if (!g_py_ready) {
        snprintf(msg, sizeof msg, "hipdnn-cabi: the Python implementation failed to load: %s",
                 g_init_error[0] ? g_init_error : "unknown error");
        hipdnn_cabi_set_last_error(msg);
        return HIPDNN_STATUS_INTERNAL_ERROR;
    }
    g_ready = 1;
    return 0;
}

#define ENTER(fn)                                                   \
    do {                                                            \
        if (__builtin_expect(!g_ready, 0)) {                        \
            int rc_ = hipdnn_cabi_enter_slow();                     \
            if (rc_)                                                \
                return (hipdnnStatus_t)rc_;                         \
        }                                                           \
        if (__builtin_expect(g_log_level == HIPDNN_SEV_INFO, 0))    \
            hpy_log_api(fn, 0, 0);                                  \
    } while (0)

static inline hipdnnStatus_t leave(const char* fn, int st)
{
    if (__builtin_expect(g_log_level == HIPDNN_SEV_INFO, 0) && st == 0)
        hpy_log_api(fn, 1, st);
    return (hipdnnStatus_t)st;
}
#define LEAVE(fn, st) return leave(fn, (st))

/* A failure decided in C: store the message (and log it when logging is on). */
static hipdnnStatus_t cfail(const char* fn, hipdnnStatus_t st, const char* msg)
{
    hipdnn_cabi_set_last_error(msg);
    if (g_ready && g_log_level <= HIPDNN_SEV_ERROR)
        hpy_log_api(msg, 2, st);
    (void)fn;
    return st;
}

#define NULLCHK(fn, p, what)                                                           \
    do {                                                                               \
        if ((p) == NULL)                                                               \
            return cfail(fn, HIPDNN_STATUS_BAD_PARAM_NULL_POINTER,                     \
                         "Null pointer provided to " fn ": " what " is nullptr");      \
    } while (0)

#define ID(p) ((int64_t)(intptr_t)(p))

/* Element size of each attribute type in bytes (0 = no defined C element type). */
static int64_t attr_elem_size(hipdnnBackendAttributeType_t t)
{
    switch (t) {
    case HIPDNN_TYPE_HANDLE: return (int64_t)sizeof(hipdnnHandle_t);
    case HIPDNN_TYPE_BACKEND_DESCRIPTOR: return (int64_t)sizeof(hipdnnBackendDescriptor_t);
    case HIPDNN_TYPE_VOID_PTR: return (int64_t)sizeof(void*);
    case HIPDNN_TYPE_BOOLEAN: return 1;
    case HIPDNN_TYPE_CHAR: return 1;
    case HIPDNN_TYPE_INT64: return 8;
    case HIPDNN_TYPE_DOUBLE: return 8;
    case HIPDNN_TYPE_FLOAT: return 4;
    case HIPDNN_TYPE_INT32: return 4;
    case HIPDNN_TYPE_FLATBUFFER_DATA_STRUCT_EXT: return (int64_t)sizeof(hipdnnBackendFlatbufferData_t);
    case HIPDNN_TYPE_DATA_TYPE:
    case HIPDNN_TYPE_HEUR_MODE:
    case HIPDNN_TYPE_ATTRIB_NAME:
    case HIPDNN_TYPE_BEHAVIOR_NOTE:
    case HIPDNN_TYPE_CONVOLUTION_MODE:
    case HIPDNN_TYPE_POINTWISE_MODE:
    case HIPDNN_TYPE_DIAGONAL_ALIGNMENT_EXT:
    case HIPDNN_TYPE_ATTENTION_IMPLEMENTATION_EXT:
    case HIPDNN_TYPE_REDUCTION_OPERATOR_TYPE:
    case HIPDNN_TYPE_RESAMPLE_MODE:
    case HIPDNN_TYPE_PADDING_MODE:
    case HIPDNN_TYPE_MOE_GROUPED_MATMUL_MODE:
    case HIPDNN_TYPE_OPERATION_TYPE_EXT:
    /* undocumented element types of the enum: all C enums (4 bytes) in hipDNN's headers */
    case HIPDNN_TYPE_KNOB_TYPE:
    case HIPDNN_TYPE_NAN_PROPOGATION:
    case HIPDNN_TYPE_NUMERICAL_NOTE:
    case HIPDNN_TYPE_LAYOUT_TYPE:
    case HIPDNN_TYPE_GENSTATS_MODE:
    case HIPDNN_TYPE_BN_FINALIZE_STATS_MODE:
    case HIPDNN_TYPE_TENSOR_REORDERING_MODE:
    case HIPDNN_TYPE_SIGNAL_MODE:
    case HIPDNN_TYPE_NORM_FWD_PHASE:
    case HIPDNN_TYPE_RNG_DISTRIBUTION:
        return 4;
    case HIPDNN_TYPE_FRACTION:
        return 16; /* {int64 numerator; int64 denominator} as in cuDNN */
    default:
        return 0;
    }
}

/* ------------------------------------------------------------------ pure-C functions */
HX const char* hipdnnGetErrorString(hipdnnStatus_t status)
{
    switch (status) {
HIPDNN_CABI_STATUS_CASES
    default: return "HIPDNN_STATUS_UNKNOWN";
    }
}

/* Copy the thread's last error (at most maxSize-1 bytes + NUL); a NULL buffer or maxSize 0 records
 * a new last error instead (spec §4). */
static void copy_last_error(const char* fn, char* message, size_t maxSize, int clear)
{
    char msg[128];
    if (message == NULL || maxSize == 0) {
        snprintf(msg, sizeof msg, message == NULL ? "Null pointer provided to %s: message is nullptr"
                                                  : "%s: maxSize is 0", fn);
        hipdnn_cabi_set_last_error(msg);
        return;
    }
    size_t n = strlen(g_last_error);
    if (n > maxSize - 1)
        n = maxSize - 1;
    memcpy(message, g_last_error, n);
    message[n] = '\0';
    if (clear)
        g_last_error[0] = '\0';
}

HX void hipdnnGetLastErrorString(char* message, size_t maxSize)
{
    copy_last_error("hipdnnGetLastErrorString", message, maxSize, 1);
}

HX void hipdnnPeekLastErrorString_ext(char* message, size_t maxSize)
{
    copy_last_error("hipdnnPeekLastErrorString_ext", message, maxSize, 0);
}

HX const char* hipdnnVersionString_ext() { return HIPDNN_CABI_BACKEND_VERSION; }

HX hipdnnStatus_t hipdnnGetVersion_ext(const char** version)
{
    if (version == NULL)
        return cfail("hipdnnGetVersion_ext", HIPDNN_STATUS_BAD_PARAM_NULL_POINTER,
                     "Null pointer provided to hipdnnGetVersion_ext: version is nullptr");
    *version = HIPDNN_CABI_BACKEND_VERSION;
    return HIPDNN_STATUS_SUCCESS;
}

HX hipdnnStatus_t hipdnnBackendGetGlobalLogLevel_ext(hipdnnSeverity_t* level)
{
    ENTER("hipdnnBackendGetGlobalLogLevel_ext");
    if (level == NULL)
        return cfail("hipdnnBackendGetGlobalLogLevel_ext", HIPDNN_STATUS_BAD_PARAM,
                     "hipdnnBackendGetGlobalLogLevel_ext: level is nullptr");
    *level = (hipdnnSeverity_t)g_log_level;
    return HIPDNN_STATUS_SUCCESS;
}

/* ------------------------------------------------------------------ handles */
HX hipdnnStatus_t hipdnnCreate(hipdnnHandle_t* handle)
{
    ENTER("hipdnnCreate");
    NULLCHK("hipdnnCreate", handle, "handle");
    int64_t r = hpy_create_handle();
    if (r <= 0)
        LEAVE("hipdnnCreate", (int)-r);
    *handle = (hipdnnHandle_t)(intptr_t)r;
    LEAVE("hipdnnCreate", HIPDNN_STATUS_SUCCESS);
}

HX hipdnnStatus_t hipdnnDestroy(hipdnnHandle_t handle)
{
    ENTER("hipdnnDestroy");
    NULLCHK("hipdnnDestroy", handle, "handle");
    LEAVE("hipdnnDestroy", hpy_destroy_handle(ID(handle)));
}

HX hipdnnStatus_t hipdnnSetStream(hipdnnHandle_t handle, hipStream_t streamId)
{
    ENTER("hipdnnSetStream");
    NULLCHK("hipdnnSetStream", handle, "handle");
    LEAVE("hipdnnSetStream", hpy_set_stream(ID(handle), (uint64_t)(uintptr_t)streamId));
}

HX hipdnnStatus_t hipdnnGetStream(hipdnnHandle_t handle, hipStream_t* streamId)
{
    ENTER("hipdnnGetStream");
    NULLCHK("hipdnnGetStream", handle, "handle");
    NULLCHK("hipdnnGetStream", streamId, "streamId");
    uint64_t s = 0;
    int st = hpy_get_stream(ID(handle), &s);
    if (st == 0)
        *streamId = (hipStream_t)(uintptr_t)s;
    LEAVE("hipdnnGetStream", st);
}

/* ------------------------------------------------------------------ descriptors */
/* C-resident variant packs (cdef/vpack.c): each returns -1 when the pack is not theirs (the
 * descriptor is not a live C-resident pack, or packs are created in Python) → the Python path. */
static int vp_create(hipdnnBackendDescriptor_t* out);
static int vp_destroy(int64_t id);
static int vp_finalize(int64_t id);
static int vp_set(int64_t id, int name, int type, int64_t count, const void* arr);
static int vp_get(int64_t id, int name, int type, int64_t req, int64_t* count, void* arr);
/* The C attribute store (cdef/astore.c): TENSOR and operation descriptors live there; each returns
 * -1 when Python answers (the id is not a live record, or Python must answer the call — then the
 * record's Python object exists when it returns), else a status. */
static int as_create(int dtype, hipdnnBackendDescriptor_t* out);
static int as_destroy(int64_t id);
static int as_prepare(int64_t id);
static int as_set(int64_t id, int name, int type, int64_t count, const void* arr);
static int as_get(int64_t id, int name, int type, int64_t req, int64_t* count, void* arr);

HX hipdnnStatus_t hipdnnBackendCreateDescriptor(hipdnnBackendDescriptorType_t descriptorType,
                                                 hipdnnBackendDescriptor_t* descriptor)
{
    ENTER("hipdnnBackendCreateDescriptor");
    if (descriptor == NULL)
        return cfail("hipdnnBackendCreateDescriptor", HIPDNN_STATUS_BAD_PARAM_NULL_POINTER,
                     "hipdnnBackendDescriptor_t* is null.");
    if (descriptorType == HIPDNN_BACKEND_VARIANT_PACK_DESCRIPTOR) {
        int vst = vp_create(descriptor);
        if (vst >= 0)
            LEAVE("hipdnnBackendCreateDescriptor", vst);
    }
    int ast = as_create((int)descriptorType, descriptor);
    if (ast >= 0)
        LEAVE("hipdnnBackendCreateDescriptor", ast);
    int64_t r = hpy_create_descriptor((int)descriptorType);
    if (r <= 0)
        LEAVE("hipdnnBackendCreateDescriptor", (int)-r);
    *descriptor = (hipdnnBackendDescriptor_t)(intptr_t)r;
    LEAVE("hipdnnBackendCreateDescriptor", HIPDNN_STATUS_SUCCESS);
}

#define DESCCHK(fn, d)                                                                 \
    do {                                                                               \
        if ((d) == NULL)                                                               \
            return cfail(fn, HIPDNN_STATUS_BAD_PARAM_NULL_POINTER,                     \
                         "hipdnnBackendDescriptor_t is nullptr");                      \
    } while (0)

HX hipdnnStatus_t hipdnnBackendDestroyDescriptor(hipdnnBackendDescriptor_t descriptor)
{
    ENTER("hipdnnBackendDestroyDescriptor");
    DESCCHK("hipdnnBackendDestroyDescriptor", descriptor);
    int vst = vp_destroy(ID(descriptor));
    if (vst >= 0 || (vst = as_destroy(ID(descriptor))) >= 0)
        LEAVE("hipdnnBackendDestroyDescriptor", vst);
    LEAVE("hipdnnBackendDestroyDescriptor", hpy_destroy_descriptor(ID(descriptor)));
}

HX hipdnnStatus_t hipdnnBackendFinalize(hipdnnBackendDescriptor_t descriptor)
{
    ENTER("hipdnnBackendFinalize");
    DESCCHK("hipdnnBackendFinalize", descriptor);
    int vst = vp_finalize(ID(descriptor));
    if (vst >= 0 || (vst = as_prepare(ID(descriptor))) >= 0)
        LEAVE("hipdnnBackendFinalize", vst);
    LEAVE("hipdnnBackendFinalize", hpy_finalize(ID(descriptor)));
}

HX hipdnnStatus_t hipdnnBackendSetAttribute(hipdnnBackendDescriptor_t descriptor,
                                             hipdnnBackendAttributeName_t attributeName,
                                             hipdnnBackendAttributeType_t attributeType,
                                             int64_t elementCount, const void* arrayOfElements)
{
    ENTER("hipdnnBackendSetAttribute");
    DESCCHK("hipdnnBackendSetAttribute", descriptor);
    int vst = vp_set(ID(descriptor), (int)attributeName, (int)attributeType, elementCount, arrayOfElements);
    if (vst >= 0 || (vst = as_set(ID(descriptor), (int)attributeName, (int)attributeType, elementCount,
                                  arrayOfElements)) >= 0)
        LEAVE("hipdnnBackendSetAttribute", vst);
    int64_t nbytes = 0;
    if (arrayOfElements != NULL && elementCount > 0) {
        int64_t es = attr_elem_size(attributeType);
        if (es > 0 && elementCount <= (INT64_MAX / es))
            nbytes = elementCount * es;
    }
    LEAVE("hipdnnBackendSetAttribute",
          hpy_set_attribute(ID(descriptor), (int)attributeName, (int)attributeType, elementCount,
                            (const char*)arrayOfElements, nbytes));
}

HX hipdnnStatus_t hipdnnBackendGetAttribute(hipdnnBackendDescriptor_t descriptor,
                                             hipdnnBackendAttributeName_t attributeName,
                                             hipdnnBackendAttributeType_t attributeType,
                                             int64_t requestedElementCount, int64_t* elementCount,
                                             void* arrayOfElements)
{
    ENTER("hipdnnBackendGetAttribute");
    DESCCHK("hipdnnBackendGetAttribute", descriptor);
    int vst = vp_get(ID(descriptor), (int)attributeName, (int)attributeType, requestedElementCount,
                     elementCount, arrayOfElements);
    if (vst >= 0 || (vst = as_get(ID(descriptor), (int)attributeName, (int)attributeType,
                                  requestedElementCount, elementCount, arrayOfElements)) >= 0)
        LEAVE("hipdnnBackendGetAttribute", vst);
    LEAVE("hipdnnBackendGetAttribute",
          hpy_get_attribute(ID(descriptor), (int)attributeName, (int)attributeType,
                            requestedElementCount, elementCount, (char*)arrayOfElements));
}

/* ------------------------------------------------------------------ execute fast path
 * hipdnnBackendExecute without entering Python (docs/plugins.md, "The execute fast path").
 *
 * A registry keyed by the int64 ids the shims already use: a plan id → (engine id, execution
 * context, recorded tensor alignments); a variant-pack id → (packed hipdnnPluginDeviceBuffer_t
 * array, workspace); a handle id → (engine id → plugin handle, ExecuteOpGraph and
 * GetLastErrorString pointers of the plugin owning that engine in this handle).  Python fills it
 * (hipdnn_cabi/backend/execute.py) after an execute of that handle/plan/pack succeeded on the
 * ordinary path, and removes an id when the id is destroyed (entry.py).  Only finalized plans,
 * finalized packs without override attributes and live handles are ever registered; finalized
 * descriptors cannot change, ids are never reused, so an entry stays right for the id's life.
 *
 * The shim tries this path first; anything not registered (or a misaligned pointer, whose
 * message the Python path builds) goes to hpy_execute, which runs every §4.1 check in order —
 * so the statuses and last-error messages are the Python path's by construction.  The one
 * failure decided here is the plugin's own (§3.9 message, same text as EnginePlugin.fail).
 *
 * Threads: one rwlock around the table, never held while calling the plugin or Python.  Each
 * entry counts the fast executes using it; removal unlinks it under the write lock and then
 * waits for that count to drop before the caller (Python) destroys the plugin objects.  A
 * registration carries the removal epoch read before Python checked the ids were alive, and
 * is refused when any removal happened since (a racing destroy can never leave a stale entry).
 */
#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <stdlib.h>

typedef hipdnnPluginStatus_t (*fx_exec_fn)(hipdnnEnginePluginHandle_t, hipdnnEnginePluginExecutionContext_t,
                                           void*, const hipdnnPluginDeviceBuffer_t*, uint32_t);
typedef hipdnnPluginStatus_t (*fx_lasterr_fn)(const char**);

enum { FX_PLAN = 1, FX_VP = 2, FX_HANDLE = 3 };
/* C-resident packs (cdef/vpack.c): their own slot table, not this registry */
struct vp_state;
static struct vp_state* vp_acquire(int64_t id); /* NULL: not a live C-resident pack */
static void vp_release(struct vp_state* s);
static int64_t vp_device(struct vp_state* s);
/* 1 when finalized without override attributes; then its packed buffers, count, workspace and
 * the alignment-check cache slot */
static int vp_exec_view(struct vp_state* s, const hipdnnPluginDeviceBuffer_t** bufs, uint32_t* n, void** ws,
                        uint64_t** checked);
static long vp_live_count(void);

typedef struct {
    int64_t eid;
    hipdnnEnginePluginHandle_t ph;
    fx_exec_fn exec;
    fx_lasterr_fn lasterr;
} fx_engine;

typedef struct {
    int64_t id;
    int kind;
    long refs;                       /* fast executes in flight using this entry (atomic) */
    int64_t dev;                     /* device: of the handle / the plan / the pack's device
                                        memory (-1: none; docs/gpu.md "Many GPUs") */
    /* FX_PLAN */
    int64_t eid;
    hipdnnEnginePluginExecutionContext_t ctx;
    uint64_t serial;                 /* unique per plan entry: the packs' alignment cache key */
    uint32_t n_align;
    int64_t* align;                  /* n_align (uid, alignment > 0) pairs */
    /* FX_VP */
    uint32_t n;
    hipdnnPluginDeviceBuffer_t* bufs;
    void* ws;
    uint64_t checked;                /* serial of the last plan whose alignments this pack passed */
    /* FX_HANDLE */
    uint32_t n_eng, cap_eng;
    fx_engine* eng;
} fx_obj;

/* The table's lock: a sharded reader lock.  Readers (every fast execute) touch only their own
 * cache line (one shard per thread, 64 shards), so executes of different threads do not contend;
 * writers (registration and removal of plans and handles — rare) raise a flag and wait until every
 * shard has no reader.  The per-thread hit/miss counters live in the shards too. */
#define BR_SHARDS 64
/* Per-thread data written on every call sits on a 128-byte pair of cache lines of its own: x86's
 * adjacent-line prefetcher fetches 64-byte lines in pairs, so two threads writing neighbouring
 * 64-byte lines still move them between their cores. */
#define CL_PAIR 128
typedef struct {
    long readers;
    uint64_t hits, misses; /* the execute registry's counters (unused by other locks) */
    char pad[CL_PAIR - sizeof(long) - 2 * sizeof(uint64_t)];
} br_shard;
typedef struct {
    br_shard s[BR_SHARDS];
    int writer;
    pthread_mutex_t wmu;
} brlock;
#define BRLOCK_INIT {.wmu = PTHREAD_MUTEX_INITIALIZER}
static brlock g_fxl __attribute__((aligned(CL_PAIR))) = BRLOCK_INIT; /* the execute registry's lock */
static __thread int t_br = -1;
static int g_br_next = 0;

static inline int br_index(void)
{
    if (__builtin_expect(t_br < 0, 0))
        t_br = (int)((unsigned)__atomic_fetch_add(&g_br_next, 1, __ATOMIC_RELAXED) % BR_SHARDS);
    return t_br;
}

/* The reader lock on shard `i` (the caller's br_index(): one TLS lookup per call site). */
static inline void br_rdlock_at(brlock* L, int i)
{
    br_shard* s = &L->s[i];
    for (;;) {
        __atomic_add_fetch(&s->readers, 1, __ATOMIC_SEQ_CST);
        if (!__atomic_load_n(&L->writer, __ATOMIC_SEQ_CST))
            return;
        __atomic_sub_fetch(&s->readers, 1, __ATOMIC_SEQ_CST);
        while (__atomic_load_n(&L->writer, __ATOMIC_ACQUIRE))
            sched_yield();
    }
}

static inline void br_rdunlock_at(brlock* L, int i) { __atomic_sub_fetch(&L->s[i].readers, 1, __ATOMIC_RELEASE); }
static inline void br_rdlock(brlock* L) { br_rdlock_at(L, br_index()); }
static inline void br_rdunlock(brlock* L) { br_rdunlock_at(L, t_br); }

static void br_wrlock(brlock* L)
{
    pthread_mutex_lock(&L->wmu);
    __atomic_store_n(&L->writer, 1, __ATOMIC_SEQ_CST);
    for (int i = 0; i < BR_SHARDS; ++i)
        while (__atomic_load_n(&L->s[i].readers, __ATOMIC_SEQ_CST) != 0)
            sched_yield();
}

static void br_wrunlock(brlock* L)
{
    __atomic_store_n(&L->writer, 0, __ATOMIC_SEQ_CST);
    pthread_mutex_unlock(&L->wmu);
}

static void br_atfork_child(brlock* L)
{
    for (int i = 0; i < BR_SHARDS; ++i)
        L->s[i].readers = 0;
    L->writer = 0;
    pthread_mutex_init(&L->wmu, NULL);
}

static fx_obj** g_fx_tab = NULL;
static size_t g_fx_cap = 0, g_fx_count = 0;
static uint64_t g_fx_epoch = 1, g_fx_serial = 0;
static volatile int g_fx_enabled = 1;
static int g_fx_multi_device = 0; /* set by the backend when the process sees >= 2 GPUs */

static inline size_t fx_slot(int64_t id, size_t cap)
{
    return (size_t)(((uint64_t)id >> 4) * 0x9E3779B97F4A7C15ull >> 17) & (cap - 1);
}

static inline fx_obj* fx_find(int64_t id)
{
    if (g_fx_cap == 0)
        return NULL;
    for (size_t i = fx_slot(id, g_fx_cap);; i = (i + 1) & (g_fx_cap - 1)) {
        fx_obj* o = g_fx_tab[i];
        if (o == NULL)
            return NULL;
        if (o->id == id)
            return o;
    }
}

static int fx_insert(fx_obj* o) /* write lock held; o->id not present */
{
    if ((g_fx_count + 1) * 2 > g_fx_cap) {
        size_t cap = g_fx_cap ? g_fx_cap * 2 : 64;
        fx_obj** t = (fx_obj**)calloc(cap, sizeof *t);
        if (t == NULL)
            return -1;
        for (size_t i = 0; i < g_fx_cap; ++i) {
            fx_obj* x = g_fx_tab[i];
            if (x == NULL)
                continue;
            size_t j = fx_slot(x->id, cap);
            while (t[j] != NULL)
                j = (j + 1) & (cap - 1);
            t[j] = x;
        }
        free(g_fx_tab);
        g_fx_tab = t;
        g_fx_cap = cap;
    }
    size_t j = fx_slot(o->id, g_fx_cap);
    while (g_fx_tab[j] != NULL)
        j = (j + 1) & (g_fx_cap - 1);
    g_fx_tab[j] = o;
    g_fx_count++;
    return 0;
}

static fx_obj* fx_unlink(int64_t id) /* write lock held; backward-shift deletion */
{
    if (g_fx_cap == 0)
        return NULL;
    size_t m = g_fx_cap - 1, i = fx_slot(id, g_fx_cap);
    for (;; i = (i + 1) & m) {
        if (g_fx_tab[i] == NULL)
            return NULL;
        if (g_fx_tab[i]->id == id)
            break;
    }
    fx_obj* o = g_fx_tab[i];
    g_fx_tab[i] = NULL;
    for (size_t j = (i + 1) & m; g_fx_tab[j] != NULL; j = (j + 1) & m) {
        size_t k = fx_slot(g_fx_tab[j]->id, g_fx_cap);
        /* move j back into the hole at i unless its home k lies cyclically in (i, j] */
        if ((j > i && (k <= i || k > j)) || (j < i && (k <= i && k > j))) {
            g_fx_tab[i] = g_fx_tab[j];
            g_fx_tab[j] = NULL;
            i = j;
        }
    }
    g_fx_count--;
    return o;
}

/* One entry per cache-line pair (or more): executes of different threads bump the `refs` of their own
 * plan and handle entries, which the registering thread allocated one after another. */
static fx_obj* fx_alloc(void)
{
    void* m = NULL;
    size_t size = (sizeof(fx_obj) + CL_PAIR - 1) & ~(size_t)(CL_PAIR - 1);
    if (posix_memalign(&m, CL_PAIR, size))
        return NULL;
    memset(m, 0, size);
    return (fx_obj*)m;
}

static void fx_free(fx_obj* o)
{
    free(o->align);
    free(o->bufs);
    free(o->eng);
    free(o);
}

/* ---- per-thread execute records (the cached path of fx_execute)
 * A thread that executes (h, p) again finds what the registry said last time in its own record:
 * the plan and handle entries, the plugin handle, its functions and the execution context.  No
 * registry lock, no table lookup and no reference count on the shared entries: the record's
 * `busy` word (on the record's own cache-line pair, written by its thread only) says "an execute
 * of this thread is using cP / cH now".  The cache is valid while the registry's removal epoch is
 * the one it was filled under; an execute publishes busy (a seq_cst exchange), then reads the
 * epoch (seq_cst), so a removal (unlink, epoch + 1, then a seq_cst scan of every record) either
 * makes the execute see the new epoch (it takes the locked path) or sees busy with cP / cH equal
 * to the removed entry and waits for that execute to end, exactly as it waits for `refs`.
 * Records are never freed: a thread's exit (a pthread key) hands its record to the next new
 * thread; the list only grows to the most threads that executed at one time. */
typedef struct fx_thread {
    int busy;                /* 1 while an execute of this thread uses cP / cH (seq_cst) */
    int in_use;              /* 1 while a thread owns the record */
    int64_t ch, cp;          /* the cached (handle id, plan id); 0: none */
    uint64_t cepoch;         /* g_fx_epoch the cache was filled under */
    const fx_obj* cP;
    const fx_obj* cH;
    hipdnnEnginePluginHandle_t ph;
    fx_exec_fn exec;
    fx_lasterr_fn lasterr;
    hipdnnEnginePluginExecutionContext_t ctx;
    uint64_t hits;           /* fast executes that took the cached path (this record's threads) */
    struct fx_thread* next;  /* the list of all records (push only) */
} __attribute__((aligned(CL_PAIR))) fx_thread;

static fx_thread* g_fxt_head = NULL; /* atomic; push only */
static __thread fx_thread* t_fxt = NULL;
static __thread int t_fxt_state = 0; /* 0: not tried, 1: t_fxt is ours, 2: none (no exit hook) */
static pthread_key_t g_fxt_key;
static pthread_once_t g_fxt_once = PTHREAD_ONCE_INIT;
static int g_fxt_key_ok = 0;

static void fxt_exit(void* p)
{
    fx_thread* r = (fx_thread*)p;
    r->ch = r->cp = 0;
    r->cP = r->cH = NULL;
    __atomic_store_n(&r->busy, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&r->in_use, 0, __ATOMIC_RELEASE);
}
static void fxt_key_init(void) { g_fxt_key_ok = pthread_key_create(&g_fxt_key, fxt_exit) == 0; }
/* dlclose of the library: no exiting thread may call fxt_exit after its code is gone */
__attribute__((destructor)) static void fxt_unload(void)
{
    if (g_fxt_key_ok) {
        g_fxt_key_ok = 0;
        pthread_key_delete(g_fxt_key);
    }
}

/* The calling thread's record, or NULL (none could be made: the locked path only). */
static fx_thread* fxt_self_slow(void)
{
    if (t_fxt_state != 0)
        return t_fxt_state == 1 ? t_fxt : NULL;
    t_fxt_state = 2;
    pthread_once(&g_fxt_once, fxt_key_init);
    if (!g_fxt_key_ok)
        return NULL;
    fx_thread* r = NULL;
    for (fx_thread* x = __atomic_load_n(&g_fxt_head, __ATOMIC_ACQUIRE); x != NULL; x = x->next) {
        int z = 0;
        if (__atomic_load_n(&x->in_use, __ATOMIC_RELAXED) == 0
            && __atomic_compare_exchange_n(&x->in_use, &z, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
            r = x;
            break;
        }
    }
    if (r == NULL) {
        void* m = NULL;
        if (posix_memalign(&m, CL_PAIR, sizeof(fx_thread)))
            return NULL;
        r = (fx_thread*)m;
        memset(r, 0, sizeof *r);
        r->in_use = 1;
        fx_thread* head = __atomic_load_n(&g_fxt_head, __ATOMIC_RELAXED);
        do
            r->next = head;
        while (!__atomic_compare_exchange_n(&g_fxt_head, &head, r, 1, __ATOMIC_RELEASE, __ATOMIC_RELAXED));
    }
    if (pthread_setspecific(g_fxt_key, r) != 0) {
        fxt_exit(r);
        return NULL;
    }
    t_fxt = r;
    t_fxt_state = 1;
    return r;
}

/* Wait until no record's execute uses entry o (after o was unlinked and the epoch moved on). */
static void fxt_wait_unused(const fx_obj* o)
{
    for (fx_thread* x = __atomic_load_n(&g_fxt_head, __ATOMIC_ACQUIRE); x != NULL; x = x->next)
        while (__atomic_load_n(&x->busy, __ATOMIC_SEQ_CST)
               && (__atomic_load_n(&x->cP, __ATOMIC_ACQUIRE) == o || __atomic_load_n(&x->cH, __ATOMIC_ACQUIRE) == o))
            sched_yield();
}

/* Unregister `id` (any kind; unknown ids are fine) and wait for fast executes using it. */
static void hipdnn_cabi_fx_remove(int64_t id)
{
    br_wrlock(&g_fxl);
    fx_obj* o = fx_unlink(id);
    __atomic_add_fetch(&g_fx_epoch, 1, __ATOMIC_SEQ_CST); /* every cached (h, p) is stale now */
    br_wrunlock(&g_fxl);
    if (o == NULL)
        return;
    fxt_wait_unused(o);
    while (__atomic_load_n(&o->refs, __ATOMIC_ACQUIRE) != 0)
        sched_yield();
    fx_free(o);
}

static uint64_t hipdnn_cabi_fx_epoch(void)
{
    br_rdlock(&g_fxl);
    uint64_t e = __atomic_load_n(&g_fx_epoch, __ATOMIC_ACQUIRE);
    br_rdunlock(&g_fxl);
    return e;
}

/* Register what one successful execute used.  Each of the three ids is added only when absent.
 * Returns 0 (registered or already there), 1 (refused: a removal happened since `epoch`, or a
 * registered id has another kind), -1 (out of memory; nothing half-registered is used). */
static int hipdnn_cabi_fx_register(uint64_t epoch, int64_t hid, int64_t eid, uint64_t ph, uint64_t exec_fn,
                                   uint64_t lasterr_fn, int64_t plan_id, uint64_t ctx, uint32_t n_align,
                                   const int64_t* align_pairs, int64_t vp_id, const char* packed,
                                   uint32_t n, uint64_t ws, int64_t hdev, int64_t pdev, int64_t vdev)
{
    int rc = 0;
    br_wrlock(&g_fxl);
    if (epoch != g_fx_epoch) {
        rc = 1;
        goto out;
    }
    fx_obj* P = fx_find(plan_id);
    fx_obj* V = packed == NULL ? NULL : fx_find(vp_id); /* NULL packed: a C-resident pack (vpack.c) */
    fx_obj* H = fx_find(hid);
    if ((P && P->kind != FX_PLAN) || (V && V->kind != FX_VP) || (H && H->kind != FX_HANDLE)) {
        rc = 1;
        goto out;
    }
    if (P == NULL) {
        P = fx_alloc();
        if (P == NULL || (n_align && (P->align = (int64_t*)malloc(16 * (size_t)n_align)) == NULL)) {
            free(P);
            rc = -1;
            goto out;
        }
        P->id = plan_id;
        P->kind = FX_PLAN;
        P->dev = pdev;
        P->eid = eid;
        P->ctx = (hipdnnEnginePluginExecutionContext_t)(uintptr_t)ctx;
        P->serial = ++g_fx_serial;
        P->n_align = n_align;
        if (n_align)
            memcpy(P->align, align_pairs, 16 * (size_t)n_align);
        if (fx_insert(P)) {
            fx_free(P);
            rc = -1;
            goto out;
        }
    }
    if (V == NULL && packed != NULL) {
        V = fx_alloc();
        if (V == NULL || (V->bufs = (hipdnnPluginDeviceBuffer_t*)malloc(16 * (size_t)(n ? n : 1))) == NULL) {
            free(V);
            rc = -1;
            goto out;
        }
        V->id = vp_id;
        V->kind = FX_VP;
        V->dev = vdev;
        V->n = n;
        memcpy(V->bufs, packed, 16 * (size_t)n);
        V->ws = (void*)(uintptr_t)ws;
        if (fx_insert(V)) {
            fx_free(V);
            rc = -1;
            goto out;
        }
    }
    if (H == NULL) {
        H = fx_alloc();
        if (H == NULL) {
            rc = -1;
            goto out;
        }
        H->id = hid;
        H->kind = FX_HANDLE;
        H->dev = hdev;
        if (fx_insert(H)) {
            fx_free(H);
            rc = -1;
            goto out;
        }
    }
    for (uint32_t i = 0; i < H->n_eng; ++i)
        if (H->eng[i].eid == eid)
            goto out;
    if (H->n_eng == H->cap_eng) {
        uint32_t cap = H->cap_eng ? 2 * H->cap_eng : 4;
        fx_engine* e = (fx_engine*)realloc(H->eng, cap * sizeof *e);
        if (e == NULL) {
            rc = -1;
            goto out;
        }
        H->eng = e;
        H->cap_eng = cap;
    }
    H->eng[H->n_eng].eid = eid;
    H->eng[H->n_eng].ph = (hipdnnEnginePluginHandle_t)(uintptr_t)ph;
    H->eng[H->n_eng].exec = (fx_exec_fn)(uintptr_t)exec_fn;
    H->eng[H->n_eng].lasterr = (fx_lasterr_fn)(uintptr_t)lasterr_fn;
    H->n_eng++;
out:
    br_wrunlock(&g_fxl);
    return rc;
}

/* fork(): the table is not mid-update (prepare takes the write lock); the child gets a fresh
 * lock (the forking thread's id differs there, so it cannot unlock the inherited one) and no
 * executes in flight (its only thread is the one that forked), so a removal there never waits
 * for a thread that does not exist. */
static void vp_atfork_child(void); /* vpack.c */
static void as_atfork_prepare(void); /* astore.c */
static void as_atfork_parent(void);
static void as_atfork_child(void);
/* The write lock also turns the records' cached path away (it checks `writer` after publishing
 * busy), so no new execute starts; the ones in flight get a bounded wait to leave the plugin (a
 * plugin execute that waits for the forking thread, e.g. for the GIL, must not hang fork). */
static void fxt_quiesce_for_fork(void)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (fx_thread* x = __atomic_load_n(&g_fxt_head, __ATOMIC_ACQUIRE); x != NULL; x = x->next)
        while (x != t_fxt && __atomic_load_n(&x->busy, __ATOMIC_SEQ_CST)) {
            clock_gettime(CLOCK_MONOTONIC, &t);
            if ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) > 20000000L)
                return; /* 20 ms: fork as before this wait existed */
            sched_yield();
        }
}
static void fx_atfork_prepare(void)
{
    br_wrlock(&g_fxl);
    fxt_quiesce_for_fork();
    as_atfork_prepare();
}
static void fx_atfork_parent(void)
{
    as_atfork_parent();
    br_wrunlock(&g_fxl);
}
static void fx_atfork_child(void)
{
    for (size_t i = 0; i < g_fx_cap; ++i)
        if (g_fx_tab[i] != NULL)
            g_fx_tab[i]->refs = 0;
    /* the other threads' records: their threads do not exist here */
    for (fx_thread* x = g_fxt_head; x != NULL; x = x->next) {
        x->busy = 0;
        if (x != t_fxt) {
            x->ch = x->cp = 0;
            x->cP = x->cH = NULL;
            x->in_use = 0;
        }
    }
    br_atfork_child(&g_fxl);
    vp_atfork_child();
    as_atfork_child();
}
__attribute__((constructor)) static void fx_init(void)
{
    pthread_atfork(fx_atfork_prepare, fx_atfork_parent, fx_atfork_child);
}

static void hipdnn_cabi_fx_set_enabled(int on) { g_fx_enabled = on ? 1 : 0; }
static void hipdnn_cabi_fx_set_multi_device(int on) { __atomic_store_n(&g_fx_multi_device, on ? 1 : 0, __ATOMIC_RELAXED); }
static int hipdnn_cabi_fx_enabled(void) { return g_fx_enabled; }

/* out[0] fast executes, out[1] executes that went to Python, out[2] registered ids, out[3] epoch */
static void hipdnn_cabi_fx_stats(uint64_t* out)
{
    uint64_t hits = 0, misses = 0;
    for (int i = 0; i < BR_SHARDS; ++i) {
        hits += __atomic_load_n(&g_fxl.s[i].hits, __ATOMIC_RELAXED);
        misses += __atomic_load_n(&g_fxl.s[i].misses, __ATOMIC_RELAXED);
    }
    for (fx_thread* x = __atomic_load_n(&g_fxt_head, __ATOMIC_ACQUIRE); x != NULL; x = x->next)
        hits += __atomic_load_n(&x->hits, __ATOMIC_RELAXED);
    br_rdlock(&g_fxl);
    out[0] = hits;
    out[1] = misses;
    out[2] = g_fx_count + (uint64_t)vp_live_count(); /* C-resident packs are always known to C */
    out[3] = g_fx_epoch;
    br_rdunlock(&g_fxl);
}

static const char* fx_plugin_status_name(int st)
{
    switch (st) {
    case 0: return "HIPDNN_PLUGIN_STATUS_SUCCESS";
    case 1: return "HIPDNN_PLUGIN_STATUS_BAD_PARAM";
    case 2: return "HIPDNN_PLUGIN_STATUS_INVALID_VALUE";
    case 3: return "HIPDNN_PLUGIN_STATUS_INTERNAL_ERROR";
    case 4: return "HIPDNN_PLUGIN_STATUS_ALLOC_FAILED";
    case 5: return "HIPDNN_PLUGIN_STATUS_NOT_APPLICABLE";
    case 6: return "HIPDNN_PLUGIN_STATUS_NOT_INITIALIZED";
    default: return "HIPDNN_PLUGIN_STATUS_UNKNOWN";
    }
}

/* The plugin's failure as the Python path reports it (§3.9 message, same text as EnginePlugin.fail). */
static int fx_plugin_failed(int st, fx_lasterr_fn lasterr)
{
    const char* err = NULL;
    if (lasterr != NULL && lasterr(&err) != 0)
        err = NULL;
    char msg[HIPDNN_ERROR_STRING_MAX_LENGTH];
    snprintf(msg, sizeof msg, "Failed to execute op graph. Status: %s(%d), Error: %s",
             fx_plugin_status_name(st), st, err ? err : "");
    return cfail("hipdnnBackendExecute", HIPDNN_STATUS_PLUGIN_ERROR, msg);
}

/* What a registered (plan, handle, pack) lets execute: 1 with the buffers, count, workspace of the
 * pack, 0 when the Python path must answer (another device's memory, not finalized / overrides,
 * a misaligned pointer: its checks and messages).  P and H are held (a lock, a reference or the
 * thread record's busy word). */
static int fx_exec_args(const fx_obj* P, const fx_obj* H, struct vp_state* cv, fx_obj* V,
                        const hipdnnPluginDeviceBuffer_t** bufs, uint32_t* n, void** ws)
{
    uint64_t* checked;
    /* With several GPUs in the process a C-resident pack runs here only once the Python path has
     * found where its buffers live (vp_device) and they are on the handle's device. */
    if (cv != NULL) {
        if (H->dev >= 0 && __atomic_load_n(&g_fx_multi_device, __ATOMIC_RELAXED)) {
            int64_t d = vp_device(cv);
            if (d == -2 || (d >= 0 && d != H->dev))
                return 0;
        }
        if (!vp_exec_view(cv, bufs, n, ws, &checked))
            return 0; /* the Python path reports "not finalized" / runs the override checks */
    } else {
        if (V->dev >= 0 && V->dev != H->dev) /* another device's memory: the Python path says so */
            return 0;
        *bufs = V->bufs;
        *n = V->n;
        *ws = V->ws;
        checked = &V->checked;
    }
    if (P->n_align && __atomic_load_n(checked, __ATOMIC_RELAXED) != P->serial) {
        for (uint32_t i = 0; i < *n; ++i) {
            uintptr_t ptr = (uintptr_t)(*bufs)[i].ptr;
            if (ptr == 0)
                continue;
            for (uint32_t k = 0; k < P->n_align; ++k)
                if (P->align[2 * k] == (*bufs)[i].uid) {
                    if (ptr % (uint64_t)P->align[2 * k + 1])
                        return 0; /* the Python path reports it */
                    break;
                }
        }
        __atomic_store_n(checked, P->serial, __ATOMIC_RELAXED);
    }
    return 1;
}

/* The locked path: the registry under its reader lock, references on the entries for the call.
 * A success with a C-resident pack fills the thread's record (T, when not busy) for next time. */
static int fx_execute_locked(int64_t h, int64_t p, int64_t v, struct vp_state* cv, fx_thread* T)
{
    int bi = br_index();
    br_shard* me = &g_fxl.s[bi];
    br_rdlock_at(&g_fxl, bi);
    fx_obj* P = fx_find(p);
    fx_obj* H = fx_find(h);
    fx_obj* V = NULL;
    if (P == NULL || H == NULL || P->kind != FX_PLAN || H->kind != FX_HANDLE)
        goto miss;
    /* a plan of another device: the Python path answers BAD_PARAM naming the devices */
    if (P->dev >= 0 && P->dev != H->dev)
        goto miss;
    const fx_engine* e = NULL;
    for (uint32_t i = 0; i < H->n_eng; ++i)
        if (H->eng[i].eid == P->eid) {
            e = &H->eng[i];
            break;
        }
    if (e == NULL)
        goto miss;
    if (cv == NULL) {
        V = fx_find(v);
        if (V == NULL || V->kind != FX_VP)
            goto miss;
    }
    const hipdnnPluginDeviceBuffer_t* bufs;
    uint32_t n;
    void* ws;
    if (!fx_exec_args(P, H, cv, V, &bufs, &n, &ws))
        goto miss;
    hipdnnEnginePluginHandle_t ph = e->ph;
    fx_exec_fn exec = e->exec;
    fx_lasterr_fn lasterr = e->lasterr;
    hipdnnEnginePluginExecutionContext_t ctx = P->ctx;
    if (cv != NULL && T != NULL && !T->busy) { /* entries and epoch as this lock sees them */
        T->ch = h;
        T->cp = p;
        T->cepoch = __atomic_load_n(&g_fx_epoch, __ATOMIC_RELAXED);
        T->ph = ph;
        T->exec = exec;
        T->lasterr = lasterr;
        T->ctx = ctx;
        __atomic_store_n(&T->cP, P, __ATOMIC_RELEASE);
        __atomic_store_n(&T->cH, H, __ATOMIC_RELEASE);
    }
    __atomic_add_fetch(&P->refs, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&H->refs, 1, __ATOMIC_RELAXED);
    if (V != NULL)
        __atomic_add_fetch(&V->refs, 1, __ATOMIC_RELAXED);
    br_rdunlock_at(&g_fxl, bi);

    int st = (int)exec(ph, ctx, ws, bufs, n);
    int rc = st != 0 ? fx_plugin_failed(st, lasterr) : HIPDNN_STATUS_SUCCESS;
    if (V != NULL)
        __atomic_sub_fetch(&V->refs, 1, __ATOMIC_RELEASE);
    __atomic_sub_fetch(&H->refs, 1, __ATOMIC_RELEASE);
    __atomic_sub_fetch(&P->refs, 1, __ATOMIC_RELEASE);
    if (cv != NULL)
        vp_release(cv);
    __atomic_add_fetch(&me->hits, 1, __ATOMIC_RELAXED);
    return rc;
miss:
    br_rdunlock_at(&g_fxl, bi);
    if (cv != NULL)
        vp_release(cv);
    __atomic_add_fetch(&me->misses, 1, __ATOMIC_RELAXED);
    return -1;
}

/* Returns -1 when (h, plan, vp) is not fully registered (→ the Python path), else the status.
 * The pack is a C-resident one (vpack.c, held by a slot reference for the call) or one Python
 * registered here (HIPDNN_CABI_PY_VARIANT_PACK=1).  The thread's record answers a repeated (h, p)
 * with a C-resident pack without the registry (see fx_thread); anything else takes the lock. */
static int fx_execute(int64_t h, int64_t p, int64_t v)
{
    if (!g_fx_enabled)
        return -1;
    struct vp_state* cv = vp_acquire(v);
    fx_thread* T = t_fxt;
    if (__builtin_expect(T == NULL, 0))
        T = fxt_self_slow();
    if (cv != NULL && T != NULL && T->cp == p && T->ch == h && !T->busy) {
        __atomic_exchange_n(&T->busy, 1, __ATOMIC_SEQ_CST);
        /* a writer (registration, removal, fork) holds the registry: the locked path waits */
        if (__atomic_load_n(&g_fx_epoch, __ATOMIC_SEQ_CST) == T->cepoch
            && !__atomic_load_n(&g_fxl.writer, __ATOMIC_SEQ_CST)) {
            /* cP / cH are held: a removal waits for busy to drop */
            const hipdnnPluginDeviceBuffer_t* bufs;
            uint32_t n;
            void* ws;
            if (!fx_exec_args(T->cP, T->cH, cv, NULL, &bufs, &n, &ws)) {
                __atomic_store_n(&T->busy, 0, __ATOMIC_RELEASE);
                vp_release(cv);
                return -1;
            }
            int st = (int)T->exec(T->ph, T->ctx, ws, bufs, n);
            /* the plugin's message while the handle entry is still held (its plugin loaded) */
            int rc = st != 0 ? fx_plugin_failed(st, T->lasterr) : HIPDNN_STATUS_SUCCESS;
            __atomic_store_n(&T->busy, 0, __ATOMIC_RELEASE);
            vp_release(cv);
            __atomic_store_n(&T->hits, T->hits + 1, __ATOMIC_RELAXED);
            return rc;
        }
        __atomic_store_n(&T->busy, 0, __ATOMIC_RELEASE);
    }
    return fx_execute_locked(h, p, v, cv, T);
}

HX hipdnnStatus_t hipdnnBackendExecute(hipdnnHandle_t handle, hipdnnBackendDescriptor_t executionPlan,
                                        hipdnnBackendDescriptor_t variantPack)
{
    ENTER("hipdnnBackendExecute");
    NULLCHK("hipdnnBackendExecute", handle, "handle");
    DESCCHK("hipdnnBackendExecute", executionPlan);
    DESCCHK("hipdnnBackendExecute", variantPack);
    int st = fx_execute(ID(handle), ID(executionPlan), ID(variantPack));
    if (st >= 0)
        LEAVE("hipdnnBackendExecute", st);
    LEAVE("hipdnnBackendExecute", hpy_execute(ID(handle), ID(executionPlan), ID(variantPack)));
}

/* ------------------------------------------------------------------ serialization */
HX hipdnnStatus_t hipdnnBackendCreateAndDeserializeGraph_ext(hipdnnBackendDescriptor_t* descriptor,
                                                              const uint8_t* serializedGraph,
                                                              size_t graphByteSize)
{
    ENTER("hipdnnBackendCreateAndDeserializeGraph_ext");
    NULLCHK("hipdnnBackendCreateAndDeserializeGraph_ext", descriptor, "descriptor");
    NULLCHK("hipdnnBackendCreateAndDeserializeGraph_ext", serializedGraph, "serializedGraph");
    if (graphByteSize == 0)
        return cfail("hipdnnBackendCreateAndDeserializeGraph_ext", HIPDNN_STATUS_BAD_PARAM,
                     "hipdnnBackendCreateAndDeserializeGraph_ext: graphByteSize is 0");
    LEAVE("hipdnnBackendCreateAndDeserializeGraph_ext",
          hpy_create_and_deserialize_graph((int64_t*)descriptor, (const char*)serializedGraph,
                                           graphByteSize));
}

HX hipdnnStatus_t hipdnnBackendCreateAndDeserializeJsonGraph_ext(hipdnnBackendDescriptor_t* descriptor,
                                                                  const char* jsonGraph,
                                                                  size_t jsonByteSize)
{
    ENTER("hipdnnBackendCreateAndDeserializeJsonGraph_ext");
    NULLCHK("hipdnnBackendCreateAndDeserializeJsonGraph_ext", descriptor, "descriptor");
    NULLCHK("hipdnnBackendCreateAndDeserializeJsonGraph_ext", jsonGraph, "jsonGraph");
    if (jsonByteSize == 0)
        return cfail("hipdnnBackendCreateAndDeserializeJsonGraph_ext", HIPDNN_STATUS_BAD_PARAM,
                     "hipdnnBackendCreateAndDeserializeJsonGraph_ext: jsonByteSize is 0");
    LEAVE("hipdnnBackendCreateAndDeserializeJsonGraph_ext",
          hpy_create_and_deserialize_json_graph((int64_t*)descriptor, jsonGraph, jsonByteSize));
}

HX hipdnnStatus_t hipdnnBackendGetSerializedBinaryGraph_ext(hipdnnBackendDescriptor_t descriptor,
                                                             size_t requestedByteSize,
                                                             size_t* graphByteSize,
                                                             uint8_t* serializedGraph)
{
    ENTER("hipdnnBackendGetSerializedBinaryGraph_ext");
    DESCCHK("hipdnnBackendGetSerializedBinaryGraph_ext", descriptor);
    NULLCHK("hipdnnBackendGetSerializedBinaryGraph_ext", graphByteSize, "graphByteSize");
    LEAVE("hipdnnBackendGetSerializedBinaryGraph_ext",
          hpy_get_serialized_binary_graph(ID(descriptor), requestedByteSize, graphByteSize,
                                          (char*)serializedGraph));
}

HX hipdnnStatus_t hipdnnBackendGetSerializedJsonGraph_ext(hipdnnBackendDescriptor_t descriptor,
                                                           size_t requestedByteSize,
                                                           size_t* graphByteSize,
                                                           char* serializedJsonGraph)
{
    ENTER("hipdnnBackendGetSerializedJsonGraph_ext");
    DESCCHK("hipdnnBackendGetSerializedJsonGraph_ext", descriptor);
    NULLCHK("hipdnnBackendGetSerializedJsonGraph_ext", graphByteSize, "graphByteSize");
    LEAVE("hipdnnBackendGetSerializedJsonGraph_ext",
          hpy_get_serialized_json_graph(ID(descriptor), requestedByteSize, graphByteSize,
                                        serializedJsonGraph));
}

HX hipdnnStatus_t hipdnnBackendGetSerializedExecutionPlan_ext(hipdnnBackendDescriptor_t descriptor,
                                                               size_t requestedByteSize,
                                                               size_t* planByteSize,
                                                               uint8_t* serializedPlan)
{
    ENTER("hipdnnBackendGetSerializedExecutionPlan_ext");
    DESCCHK("hipdnnBackendGetSerializedExecutionPlan_ext", descriptor);
    LEAVE("hipdnnBackendGetSerializedExecutionPlan_ext",
          hpy_get_serialized_execution_plan(ID(descriptor), requestedByteSize, planByteSize,
                                            (char*)serializedPlan));
}

HX hipdnnStatus_t hipdnnBackendCreateAndDeserializeExecutionPlan_ext(hipdnnHandle_t handle,
                                                                      hipdnnBackendDescriptor_t* descriptor,
                                                                      const uint8_t* serializedPlan,
                                                                      size_t planByteSize)
{
    ENTER("hipdnnBackendCreateAndDeserializeExecutionPlan_ext");
    NULLCHK("hipdnnBackendCreateAndDeserializeExecutionPlan_ext", handle, "handle");
    NULLCHK("hipdnnBackendCreateAndDeserializeExecutionPlan_ext", descriptor, "descriptor");
    NULLCHK("hipdnnBackendCreateAndDeserializeExecutionPlan_ext", serializedPlan, "serializedPlan");
    if (planByteSize == 0)
        return cfail("hipdnnBackendCreateAndDeserializeExecutionPlan_ext", HIPDNN_STATUS_BAD_PARAM,
                     "hipdnnBackendCreateAndDeserializeExecutionPlan_ext: planByteSize is 0");
    LEAVE("hipdnnBackendCreateAndDeserializeExecutionPlan_ext",
          hpy_create_and_deserialize_execution_plan(ID(handle), (int64_t*)descriptor,
                                                    (const char*)serializedPlan, planByteSize));
}

HX hipdnnStatus_t hipdnnBackendGetSerializedBinaryGraphAndPlan_ext(
    hipdnnBackendDescriptor_t graphDescriptor, hipdnnBackendDescriptor_t executionPlanDescriptor,
    size_t requestedByteSize, size_t* blobByteSize, uint8_t* serializedBlob)
{
    ENTER("hipdnnBackendGetSerializedBinaryGraphAndPlan_ext");
    DESCCHK("hipdnnBackendGetSerializedBinaryGraphAndPlan_ext", graphDescriptor);
    NULLCHK("hipdnnBackendGetSerializedBinaryGraphAndPlan_ext", blobByteSize, "blobByteSize");
    LEAVE("hipdnnBackendGetSerializedBinaryGraphAndPlan_ext",
          hpy_get_serialized_binary_graph_and_plan(ID(graphDescriptor), ID(executionPlanDescriptor),
                                                   requestedByteSize, blobByteSize,
                                                   (char*)serializedBlob));
}

HX hipdnnStatus_t hipdnnBackendGetSerializedBinaryContents_ext(const uint8_t* serializedBlob,
                                                                size_t blobByteSize, int* contentFlags)
{
    ENTER("hipdnnBackendGetSerializedBinaryContents_ext");
    NULLCHK("hipdnnBackendGetSerializedBinaryContents_ext", serializedBlob, "serializedBlob");
    NULLCHK("hipdnnBackendGetSerializedBinaryContents_ext", contentFlags, "contentFlags");
    LEAVE("hipdnnBackendGetSerializedBinaryContents_ext",
          hpy_get_serialized_binary_contents((const char*)serializedBlob, blobByteSize, contentFlags));
}

/* ------------------------------------------------------------------ logging */
HX void hipdnnLoggingCallback_ext(hipdnnSeverity_t severity, const char* msg)
{
    if (msg == NULL)
        return;
    if (!g_ready && hipdnn_cabi_enter_slow() != 0)
        return;
    hpy_logging_callback((int)severity, msg);
}

HX hipdnnStatus_t hipdnnSetUserLogCallback_ext(hipdnnUserLogCallback_t callback, hipdnnSeverity_t minLevel,
                                                hipdnnLogCallbackMode_t mode,
                                                hipdnnUserLogCallbackHandle_t userHandle)
{
    ENTER("hipdnnSetUserLogCallback_ext");
    LEAVE("hipdnnSetUserLogCallback_ext",
          hpy_set_user_log_callback((uint64_t)(uintptr_t)callback, (int)minLevel, (int)mode,
                                    (uint64_t)(uintptr_t)userHandle));
}

HX hipdnnStatus_t hipdnnBackendSetGlobalLogLevel_ext(hipdnnSeverity_t level)
{
    ENTER("hipdnnBackendSetGlobalLogLevel_ext");
    return (hipdnnStatus_t)hpy_set_global_log_level((int)level);
}

/* ------------------------------------------------------------------ plugins */
HX hipdnnStatus_t hipdnnSetEnginePluginPaths_ext(size_t numPaths, const char* const* pluginPaths,
                                                  hipdnnPluginLoadingMode_ext_t loadingMode)
{
    ENTER("hipdnnSetEnginePluginPaths_ext");
    if (numPaths > 0 && pluginPaths == NULL)
        return cfail("hipdnnSetEnginePluginPaths_ext", HIPDNN_STATUS_BAD_PARAM_NULL_POINTER,
                     "Null pointer provided to hipdnnSetEnginePluginPaths_ext: pluginPaths is nullptr");
    for (size_t i = 0; i < numPaths; ++i)
        if (pluginPaths[i] == NULL)
            return cfail("hipdnnSetEnginePluginPaths_ext", HIPDNN_STATUS_BAD_PARAM_NULL_POINTER,
                         "Null pointer provided to hipdnnSetEnginePluginPaths_ext: a plugin path is nullptr");
    LEAVE("hipdnnSetEnginePluginPaths_ext",
          hpy_set_engine_plugin_paths(numPaths, (char**)pluginPaths, (int)loadingMode));
}

HX hipdnnStatus_t hipdnnSetHeuristicPluginPaths_ext(size_t numPaths, const char* const* pluginPaths,
                                                     hipdnnPluginLoadingMode_ext_t loadingMode)
{
    ENTER("hipdnnSetHeuristicPluginPaths_ext");
    if (numPaths > 0 && pluginPaths == NULL)
        return cfail("hipdnnSetHeuristicPluginPaths_ext", HIPDNN_STATUS_BAD_PARAM_NULL_POINTER,
                     "Null pointer provided to hipdnnSetHeuristicPluginPaths_ext: pluginPaths is nullptr");
    for (size_t i = 0; i < numPaths; ++i)
        if (pluginPaths[i] == NULL)
            return cfail("hipdnnSetHeuristicPluginPaths_ext", HIPDNN_STATUS_BAD_PARAM_NULL_POINTER,
                         "Null pointer provided to hipdnnSetHeuristicPluginPaths_ext: a plugin path is nullptr");
    LEAVE("hipdnnSetHeuristicPluginPaths_ext",
          hpy_set_heuristic_plugin_paths(numPaths, (char**)pluginPaths, (int)loadingMode));
}

HX hipdnnStatus_t hipdnnSetPluginUnloadMode_ext(hipdnnPluginUnloadingMode_ext_t unloadingMode)
{
    ENTER("hipdnnSetPluginUnloadMode_ext");
    LEAVE("hipdnnSetPluginUnloadMode_ext", hpy_set_plugin_unload_mode((int)unloadingMode));
}

HX hipdnnStatus_t hipdnnGetLoadedEnginePluginPaths_ext(hipdnnHandle_t handle, size_t* numPluginPaths,
                                                        char** pluginPaths, size_t* maxStringLen)
{
    ENTER("hipdnnGetLoadedEnginePluginPaths_ext");
    NULLCHK("hipdnnGetLoadedEnginePluginPaths_ext", handle, "handle");
    NULLCHK("hipdnnGetLoadedEnginePluginPaths_ext", numPluginPaths, "numPluginPaths");
    NULLCHK("hipdnnGetLoadedEnginePluginPaths_ext", maxStringLen, "maxStringLen");
    LEAVE("hipdnnGetLoadedEnginePluginPaths_ext",
          hpy_get_loaded_engine_plugin_paths(ID(handle), numPluginPaths, pluginPaths, maxStringLen));
}

/* ------------------------------------------------------------------ engines and policies */
HX hipdnnStatus_t hipdnnGetEngineCount_ext(hipdnnHandle_t handle, size_t* numEngines)
{
    ENTER("hipdnnGetEngineCount_ext");
    NULLCHK("hipdnnGetEngineCount_ext", handle, "handle");
    NULLCHK("hipdnnGetEngineCount_ext", numEngines, "numEngines");
    LEAVE("hipdnnGetEngineCount_ext", hpy_get_engine_count(ID(handle), numEngines));
}

HX hipdnnStatus_t hipdnnGetEngineInfo_ext(hipdnnHandle_t handle, size_t engineIndex, int64_t* engineId,
                                           char* engineName, size_t* engineNameLen, char* pluginName,
                                           size_t* pluginNameLen, char* version, size_t* versionLen,
                                           char* type, size_t* typeLen)
{
    ENTER("hipdnnGetEngineInfo_ext");
    NULLCHK("hipdnnGetEngineInfo_ext", handle, "handle");
    NULLCHK("hipdnnGetEngineInfo_ext", engineNameLen, "engineNameLen");
    NULLCHK("hipdnnGetEngineInfo_ext", pluginNameLen, "pluginNameLen");
    NULLCHK("hipdnnGetEngineInfo_ext", versionLen, "versionLen");
    NULLCHK("hipdnnGetEngineInfo_ext", typeLen, "typeLen");
    LEAVE("hipdnnGetEngineInfo_ext",
          hpy_get_engine_info(ID(handle), engineIndex, engineId, engineName, engineNameLen, pluginName,
                              pluginNameLen, version, versionLen, type, typeLen));
}

HX hipdnnStatus_t hipdnnGetEngineIdByName_ext(hipdnnHandle_t handle, const char* engineName,
                                               int64_t* engineId)
{
    ENTER("hipdnnGetEngineIdByName_ext");
    NULLCHK("hipdnnGetEngineIdByName_ext", handle, "handle");
    NULLCHK("hipdnnGetEngineIdByName_ext", engineName, "engineName");
    NULLCHK("hipdnnGetEngineIdByName_ext", engineId, "engineId");
    LEAVE("hipdnnGetEngineIdByName_ext", hpy_get_engine_id_by_name(ID(handle), engineName, engineId));
}

HX hipdnnStatus_t hipdnnGetEngineNameById_ext(hipdnnHandle_t handle, int64_t engineId, char* engineName,
                                               size_t* engineNameLen)
{
    ENTER("hipdnnGetEngineNameById_ext");
    NULLCHK("hipdnnGetEngineNameById_ext", handle, "handle");
    NULLCHK("hipdnnGetEngineNameById_ext", engineNameLen, "engineNameLen");
    LEAVE("hipdnnGetEngineNameById_ext",
          hpy_get_engine_name_by_id(ID(handle), engineId, engineName, engineNameLen));
}

HX hipdnnStatus_t hipdnnGetHeuristicPolicyCount_ext(hipdnnHandle_t handle, size_t* numPolicies)
{
    ENTER("hipdnnGetHeuristicPolicyCount_ext");
    NULLCHK("hipdnnGetHeuristicPolicyCount_ext", handle, "handle");
    NULLCHK("hipdnnGetHeuristicPolicyCount_ext", numPolicies, "numPolicies");
    LEAVE("hipdnnGetHeuristicPolicyCount_ext", hpy_get_heuristic_policy_count(ID(handle), numPolicies));
}

HX hipdnnStatus_t hipdnnGetHeuristicPolicyInfo_ext(hipdnnHandle_t handle, size_t policyIndex,
                                                    int64_t* policyId, char* policyName,
                                                    size_t* policyNameLen, char* pluginName,
                                                    size_t* pluginNameLen, char* pluginVersion,
                                                    size_t* pluginVersionLen, char* apiVersion,
                                                    size_t* apiVersionLen)
{
    ENTER("hipdnnGetHeuristicPolicyInfo_ext");
    NULLCHK("hipdnnGetHeuristicPolicyInfo_ext", handle, "handle");
    NULLCHK("hipdnnGetHeuristicPolicyInfo_ext", policyNameLen, "policyNameLen");
    NULLCHK("hipdnnGetHeuristicPolicyInfo_ext", pluginNameLen, "pluginNameLen");
    NULLCHK("hipdnnGetHeuristicPolicyInfo_ext", pluginVersionLen, "pluginVersionLen");
    NULLCHK("hipdnnGetHeuristicPolicyInfo_ext", apiVersionLen, "apiVersionLen");
    LEAVE("hipdnnGetHeuristicPolicyInfo_ext",
          hpy_get_heuristic_policy_info(ID(handle), policyIndex, policyId, policyName, policyNameLen,
                                        pluginName, pluginNameLen, pluginVersion, pluginVersionLen,
                                        apiVersion, apiVersionLen));
}

HX hipdnnStatus_t hipdnnBackendWriteEngineRankingResults_ext(hipdnnHandle_t handle,
                                                              hipdnnBackendDescriptor_t graphDescriptor,
                                                              const int64_t* engineIdsInRankOrder,
                                                              size_t engineIdCount,
                                                              hipdnnAutotuneCacheWriteOutcome_ext_t* outcome)
{
    ENTER("hipdnnBackendWriteEngineRankingResults_ext");
    NULLCHK("hipdnnBackendWriteEngineRankingResults_ext", handle, "handle");
    int oc = 0;
    int st = hpy_write_engine_ranking_results(ID(handle), ID(graphDescriptor),
                                              (int64_t*)engineIdsInRankOrder, engineIdCount, &oc);
    if (st == 0 && outcome != NULL)
        *outcome = (hipdnnAutotuneCacheWriteOutcome_ext_t)oc;
    LEAVE("hipdnnBackendWriteEngineRankingResults_ext", st);
}
