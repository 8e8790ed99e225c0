/* ==================================================================== C-resident variant packs
 * HIPDNN_BACKEND_VARIANT_PACK_DESCRIPTOR without entering Python (issue 15; docs/plugins.md,
 * "C-resident variant packs").
 *
 * Pasted by cdef/build_backend.py after cdef/shims.c: it uses the execute fast path's registry
 * (fx_obj, fx_find/fx_insert/fx_unlink, g_fx_lock) and its helpers (cfail).  A C-resident pack IS
 * an FX_VP entry of that registry, with `cvp` pointing at its attribute state, so
 * hipdnnBackendExecute with any finalized pack of a plan and handle already registered goes from
 * C to the plugin (.so plugins) or to the Python plugin's execute (one crossing).
 *
 * Create / Set / Get / Finalize / Destroy of a pack are answered here; every status and last-error
 * message is the one hipdnn_cabi/backend/descriptors/variant_pack.py (+ attrs.py, base.py,
 * entry.py) gives, in the same order of checks.  That Python class stays the reference: with
 * HIPDNN_CABI_PY_VARIANT_PACK=1 packs are created in Python again, and
 * tests/plugins/test_variant_pack_c.py runs one battery both ways and compares every answer.
 *
 * Ids: VP_ID_BASE + (counter << 4) — 16-byte aligned like the Python registry's ids, far from them,
 * never reused.  Any id not found here (destroyed, foreign, garbage, another kind) goes to the
 * Python path, whose registry answers "invalid or destroyed" / "type mismatch" as before; Python
 * sees a live C pack through registry.resolve() → CVariantPackView (a snapshot, for the slow
 * execute path and for kind checks).
 *
 * Threads: the registry's rwlock (read for set/get/finalize, write for create/destroy) plus a
 * per-pack spinlock for concurrent calls on the same pack.  Messages are formatted under the locks
 * and stored (cfail, which may log through Python) after both are released.  A finalized pack
 * never changes again (sets are refused, re-finalize is a no-op), so execute reads it unlocked
 * after an acquire load of `finalized`.
 */
#define VP_ID_BASE 0x7AC000000000LL
#define VP_INLINE 8
#define VP_MAX_ELEMENTS (1LL << 24) /* attrs.MAX_ELEMENTS */

enum { VPV_UIDS, VPV_PTRS, VPV_OUIDS, VPV_OSHAPES, VPV_OSTRIDES, VPV_OLENGTHS, VPV_COUNT };

typedef struct {
    int64_t n;
    int64_t* v;   /* inl, malloc'ed or NULL (n == 0) */
    int64_t* inl; /* inline storage of VP_INLINE elements (uids, pointers) or NULL */
    int set;
} vp_vec;

struct vp_state {
    volatile int lock; /* spinlock for calls on this pack */
    int finalized;     /* atomic; once 1 the pack never changes */
    int has_ovr;
    uint64_t ws;
    vp_vec vec[VPV_COUNT];
    hipdnnPluginDeviceBuffer_t inl_bufs[VP_INLINE];
    int64_t inl_uids[VP_INLINE], inl_ptrs[VP_INLINE];
};

typedef struct {
    fx_obj o;
    struct vp_state s;
} vp_block;

static int vp_executable(const struct vp_state* s)
{
    return __atomic_load_n(&s->finalized, __ATOMIC_ACQUIRE) && !s->has_ovr;
}

static volatile int g_vp_resident = 1;
static uint64_t g_vp_counter = 0; /* under the write lock */
static long g_vp_live = 0;

static void hipdnn_cabi_vp_set_resident(int on) { g_vp_resident = on ? 1 : 0; }
static int hipdnn_cabi_vp_resident(void) { return g_vp_resident; }
static long hipdnn_cabi_vp_live(void) { return __atomic_load_n(&g_vp_live, __ATOMIC_RELAXED); }

static inline void vp_lock(struct vp_state* s)
{
    while (__atomic_exchange_n(&s->lock, 1, __ATOMIC_ACQUIRE))
        while (__atomic_load_n(&s->lock, __ATOMIC_RELAXED))
            sched_yield();
}
static inline void vp_unlock(struct vp_state* s) { __atomic_store_n(&s->lock, 0, __ATOMIC_RELEASE); }

static void vp_free(fx_obj* o)
{
    struct vp_state* s = o->cvp;
    for (int i = 0; i < VPV_COUNT; ++i)
        if (s->vec[i].v != s->vec[i].inl)
            free(s->vec[i].v); /* free(NULL) is fine */
    if (o->bufs != s->inl_bufs)
        free(o->bufs);
    free(o); /* the vp_block */
}

/* ------------------------------------------------------------------ names for messages */
static const char* vp_attr_name(int name, char* buf, size_t n)
{
    switch (name) {
HIPDNN_CABI_ATTR_NAME_CASES
    default: snprintf(buf, n, "attribute %d", name); return buf;
    }
}

static const char* vp_type_name(int t, char* buf, size_t n)
{
    switch (t) {
HIPDNN_CABI_ATTR_TYPE_CASES
    default: snprintf(buf, n, "type %d", t); return buf;
    }
}

/* An error decided under the locks: status + message, stored after they are released. */
typedef struct {
    int st;
    char msg[HIPDNN_ERROR_STRING_MAX_LENGTH];
} vp_err;

#define VP_FAIL(e, status, ...)                                  \
    do {                                                         \
        (e)->st = (status);                                      \
        snprintf((e)->msg, sizeof (e)->msg, __VA_ARGS__);        \
    } while (0)

/* "VariantPackDescriptor::<verb>(<attribute name>): <message>" (attrs.py's `ctx` prefix) */
#include <stdarg.h>
static void vp_failc(vp_err* e, int status, const char* verb, int name, const char* fmt, ...)
{
    char nb[32];
    int k = snprintf(e->msg, sizeof e->msg, "VariantPackDescriptor::%s(%s): ", verb,
                     vp_attr_name(name, nb, sizeof nb));
    va_list ap;
    va_start(ap, fmt);
    if (k > 0 && (size_t)k < sizeof e->msg)
        vsnprintf(e->msg + k, sizeof e->msg - (size_t)k, fmt, ap);
    va_end(ap);
    e->st = status;
}

static void vp_type_mismatch(vp_err* e, const char* verb, int name, int want, int got)
{
    char a[32], b[32];
    vp_failc(e, HIPDNN_STATUS_BAD_PARAM, verb, name, "attributeType mismatch (expected %s, got %s)",
             vp_type_name(want, a, sizeof a), vp_type_name(got, b, sizeof b));
}

/* ------------------------------------------------------------------ lookup */
/* With the read lock held: the live C-resident pack `id`, or NULL. */
static inline fx_obj* vp_find(int64_t id)
{
    fx_obj* o = fx_find(id);
    return (o != NULL && o->cvp != NULL) ? o : NULL;
}

/* ------------------------------------------------------------------ create / destroy */
/* Returns -1 when packs are not C-resident (→ Python), else a status. */
static int vp_create(hipdnnBackendDescriptor_t* out)
{
    if (!g_vp_resident)
        return -1;
    vp_block* b = (vp_block*)calloc(1, sizeof *b);
    if (b == NULL)
        return cfail("hipdnnBackendCreateDescriptor", HIPDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED,
                     "hipdnnBackendCreateDescriptor: out of host memory for a variant pack");
    b->o.kind = FX_VP;
    b->o.cvp = &b->s;
    b->s.vec[VPV_UIDS].v = b->s.vec[VPV_UIDS].inl = b->s.inl_uids;
    b->s.vec[VPV_PTRS].v = b->s.vec[VPV_PTRS].inl = b->s.inl_ptrs;
    b->o.bufs = b->s.inl_bufs;
    pthread_rwlock_wrlock(&g_fx_lock);
    b->o.id = VP_ID_BASE + (int64_t)(++g_vp_counter << 4);
    int rc = fx_insert(&b->o);
    pthread_rwlock_unlock(&g_fx_lock);
    if (rc) {
        free(b);
        return cfail("hipdnnBackendCreateDescriptor", HIPDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED,
                     "hipdnnBackendCreateDescriptor: out of host memory for a variant pack");
    }
    __atomic_add_fetch(&g_vp_live, 1, __ATOMIC_RELAXED);
    *out = (hipdnnBackendDescriptor_t)(intptr_t)b->o.id;
    return HIPDNN_STATUS_SUCCESS;
}

/* -1: not a C-resident pack.  Waits for fast executes using the pack, like hipdnn_cabi_fx_remove. */
static int vp_destroy(int64_t id)
{
    pthread_rwlock_wrlock(&g_fx_lock);
    fx_obj* o = vp_find(id);
    if (o == NULL) {
        pthread_rwlock_unlock(&g_fx_lock);
        return -1;
    }
    fx_unlink(id);
    g_fx_epoch++;
    pthread_rwlock_unlock(&g_fx_lock);
    while (__atomic_load_n(&o->refs, __ATOMIC_ACQUIRE) != 0)
        sched_yield();
    vp_free(o);
    __atomic_sub_fetch(&g_vp_live, 1, __ATOMIC_RELAXED);
    return HIPDNN_STATUS_SUCCESS;
}

/* ------------------------------------------------------------------ finalize */
static int vp_finalize(int64_t id)
{
    vp_err e;
    e.st = 0;
    pthread_rwlock_rdlock(&g_fx_lock);
    fx_obj* o = vp_find(id);
    if (o == NULL) {
        pthread_rwlock_unlock(&g_fx_lock);
        return -1;
    }
    struct vp_state* s = o->cvp;
    vp_lock(s);
    if (!s->finalized) { /* re-finalize: nothing can have changed (sets are refused) */
        int64_t n = s->vec[VPV_UIDS].n, np = s->vec[VPV_PTRS].n;
        if (np != n) {
            VP_FAIL(&e, HIPDNN_STATUS_BAD_PARAM,
                    "VariantPackDescriptor::finalize() failed: %lld data pointers but %lld unique ids",
                    (long long)np, (long long)n);
        } else if (n == 0) {
            VP_FAIL(&e, HIPDNN_STATUS_BAD_PARAM, "VariantPackDescriptor::finalize() failed: empty variant pack");
        } else {
            hipdnnPluginDeviceBuffer_t* bufs = s->inl_bufs;
            if (n > VP_INLINE && (bufs = (hipdnnPluginDeviceBuffer_t*)malloc(sizeof *bufs * (size_t)n)) == NULL) {
                VP_FAIL(&e, HIPDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED,
                        "VariantPackDescriptor::finalize() failed: out of host memory");
            } else {
                const int64_t* u = s->vec[VPV_UIDS].v;
                const int64_t* p = s->vec[VPV_PTRS].v;
                for (int64_t i = 0; i < n; ++i) {
                    bufs[i].uid = u[i];
                    bufs[i].ptr = (void*)(uintptr_t)p[i];
                }
                o->bufs = bufs;
                o->n = (uint32_t)n;
                o->ws = (void*)(uintptr_t)s->ws;
                s->has_ovr = s->vec[VPV_OUIDS].set || s->vec[VPV_OSHAPES].set || s->vec[VPV_OSTRIDES].set
                             || s->vec[VPV_OLENGTHS].set;
                __atomic_store_n(&s->finalized, 1, __ATOMIC_RELEASE);
            }
        }
    }
    vp_unlock(s);
    pthread_rwlock_unlock(&g_fx_lock);
    if (e.st)
        return cfail("hipdnnBackendFinalize", (hipdnnStatus_t)e.st, e.msg);
    return HIPDNN_STATUS_SUCCESS;
}

/* ------------------------------------------------------------------ set */
static int vp_vec_index(int name)
{
    switch (name) {
    case HIPDNN_ATTR_VARIANT_PACK_UNIQUE_IDS: return VPV_UIDS;
    case HIPDNN_ATTR_VARIANT_PACK_DATA_POINTERS: return VPV_PTRS;
    case HIPDNN_ATTR_VARIANT_PACK_OVERRIDE_UNIQUE_IDS_EXT: return VPV_OUIDS;
    case HIPDNN_ATTR_VARIANT_PACK_OVERRIDE_SHAPES_EXT: return VPV_OSHAPES;
    case HIPDNN_ATTR_VARIANT_PACK_OVERRIDE_STRIDES_EXT: return VPV_OSTRIDES;
    case HIPDNN_ATTR_VARIANT_PACK_OVERRIDE_LENGTHS_EXT: return VPV_OLENGTHS;
    default: return -1;
    }
}

static int vp_store(vp_vec* v, int64_t count, const void* arr)
{
    int64_t* dst = v->inl;
    if ((dst == NULL || count > VP_INLINE) && (dst = (int64_t*)malloc(8 * (size_t)(count ? count : 1))) == NULL)
        return -1;
    if (count)
        memcpy(dst, arr, 8 * (size_t)count);
    if (v->v != v->inl)
        free(v->v);
    v->v = dst;
    v->n = count;
    v->set = 1;
    return 0;
}

static void vp_set_locked(struct vp_state* s, vp_err* e, int name, int type, int64_t count,
                          const void* arr)
{
    if (s->finalized) {
        VP_FAIL(e, HIPDNN_STATUS_NOT_INITIALIZED, "VariantPackDescriptor::setAttribute() failed: Already finalized.");
        return;
    }
    int vi = vp_vec_index(name);
    if (vi < 0 && name != HIPDNN_ATTR_VARIANT_PACK_WORKSPACE) {
        char nb[32];
        VP_FAIL(e, HIPDNN_STATUS_NOT_SUPPORTED, "VariantPackDescriptor::setAttribute() failed: %s is not supported.",
                vp_attr_name(name, nb, sizeof nb));
        return;
    }
    int want = (vi == VPV_PTRS || vi < 0) ? HIPDNN_TYPE_VOID_PTR : HIPDNN_TYPE_INT64;
    if (type != want) {
        vp_type_mismatch(e, "setAttribute", name, want, type);
        return;
    }
    if (arr == NULL) {
        vp_failc(e, HIPDNN_STATUS_BAD_PARAM_NULL_POINTER, "setAttribute", name, "arrayOfElements is nullptr");
        return;
    }
    if (vi < 0) { /* WORKSPACE: attrs.set_pointer */
        if (count != 1) {
            vp_failc(e, HIPDNN_STATUS_BAD_PARAM, "setAttribute", name, "elementCount is not 1");
            return;
        }
        memcpy(&s->ws, arr, 8);
        return;
    }
    if (vi == VPV_PTRS) { /* attrs.set_pointer_vector: count 0 allowed */
        if (count < 0) {
            vp_failc(e, HIPDNN_STATUS_BAD_PARAM, "setAttribute", name, "elementCount must not be negative");
            return;
        }
    } else if (count <= 0) { /* attrs.set_int64_vector */
        vp_failc(e, HIPDNN_STATUS_BAD_PARAM, "setAttribute", name, "elementCount must be positive");
        return;
    }
    if (count > VP_MAX_ELEMENTS) {
        vp_failc(e, HIPDNN_STATUS_BAD_PARAM, "setAttribute", name, "elementCount %lld is too large (at most %lld)",
                (long long)count, (long long)VP_MAX_ELEMENTS);
        return;
    }
    if (vp_store(&s->vec[vi], count, arr))
        vp_failc(e, HIPDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED, "setAttribute", name, "out of host memory");
}

static int vp_set(int64_t id, int name, int type, int64_t count, const void* arr)
{
    vp_err e;
    e.st = 0;
    pthread_rwlock_rdlock(&g_fx_lock);
    fx_obj* o = vp_find(id);
    if (o == NULL) {
        pthread_rwlock_unlock(&g_fx_lock);
        return -1;
    }
    vp_lock(o->cvp);
    vp_set_locked(o->cvp, &e, name, type, count, arr);
    vp_unlock(o->cvp);
    pthread_rwlock_unlock(&g_fx_lock);
    if (e.st)
        return cfail("hipdnnBackendSetAttribute", (hipdnnStatus_t)e.st, e.msg);
    return HIPDNN_STATUS_SUCCESS;
}

/* ------------------------------------------------------------------ get */
static void vp_get_locked(struct vp_state* s, vp_err* e, int name, int type, int64_t req, int64_t* count,
                          void* arr)
{
    if (!s->finalized) {
        VP_FAIL(e, HIPDNN_STATUS_NOT_INITIALIZED, "VariantPackDescriptor::getAttribute() failed: Not finalized.");
        return;
    }
    int vi = vp_vec_index(name);
    if (vi < 0 && name != HIPDNN_ATTR_VARIANT_PACK_WORKSPACE) {
        char nb[32];
        VP_FAIL(e, HIPDNN_STATUS_NOT_SUPPORTED, "VariantPackDescriptor::getAttribute() failed: %s is not supported.",
                vp_attr_name(name, nb, sizeof nb));
        return;
    }
    if (vi < 0) { /* WORKSPACE: attrs.get_exact_one */
        if (type != HIPDNN_TYPE_VOID_PTR) {
            vp_type_mismatch(e, "getAttribute", name, HIPDNN_TYPE_VOID_PTR, type);
        } else if (req != 1) {
            vp_failc(e, HIPDNN_STATUS_BAD_PARAM, "getAttribute", name, "requestedElementCount must be 1");
        } else if (arr == NULL) {
            vp_failc(e, HIPDNN_STATUS_BAD_PARAM_NULL_POINTER, "getAttribute", name, "arrayOfElements is nullptr");
        } else {
            memcpy(arr, &s->ws, 8);
            if (count)
                *count = 1;
        }
        return;
    }
    const vp_vec* v = &s->vec[vi];
    if (vi == VPV_PTRS) { /* VariantPackDescriptor._get_ptrs */
        if (type != HIPDNN_TYPE_VOID_PTR) {
            vp_type_mismatch(e, "getAttribute", name, HIPDNN_TYPE_VOID_PTR, type);
        } else if (arr == NULL) {
            vp_failc(e, HIPDNN_STATUS_BAD_PARAM_NULL_POINTER, "getAttribute", name, "arrayOfElements is nullptr");
        } else if (count == NULL) {
            vp_failc(e, HIPDNN_STATUS_BAD_PARAM_NULL_POINTER, "getAttribute", name, "elementCount is nullptr");
        } else if (req < 0) {
            vp_failc(e, HIPDNN_STATUS_BAD_PARAM, "getAttribute", name, "requestedElementCount must not be negative");
        } else {
            int64_t k = req < v->n ? req : v->n;
            if (k)
                memcpy(arr, v->v, 8 * (size_t)k);
            *count = k;
        }
        return;
    }
    /* VariantPackDescriptor._vec: arr required, then attrs.get_int64_vector */
    if (arr == NULL) {
        vp_failc(e, HIPDNN_STATUS_BAD_PARAM_NULL_POINTER, "getAttribute", name, "arrayOfElements is nullptr");
    } else if (type != HIPDNN_TYPE_INT64) {
        vp_type_mismatch(e, "getAttribute", name, HIPDNN_TYPE_INT64, type);
    } else if (req == 0) { /* size query */
        if (count == NULL)
            vp_failc(e, HIPDNN_STATUS_BAD_PARAM_NULL_POINTER, "getAttribute", name, "elementCount is nullptr");
        else
            *count = v->n;
    } else if (req < 0) {
        vp_failc(e, HIPDNN_STATUS_BAD_PARAM, "getAttribute", name, "requestedElementCount must not be negative");
    } else {
        int64_t k = req < v->n ? req : v->n;
        if (k)
            memcpy(arr, v->v, 8 * (size_t)k);
        if (count)
            *count = k;
    }
}

static int vp_get(int64_t id, int name, int type, int64_t req, int64_t* count, void* arr)
{
    vp_err e;
    e.st = 0;
    pthread_rwlock_rdlock(&g_fx_lock);
    fx_obj* o = vp_find(id);
    if (o == NULL) {
        pthread_rwlock_unlock(&g_fx_lock);
        return -1;
    }
    vp_lock(o->cvp);
    vp_get_locked(o->cvp, &e, name, type, req, count, arr);
    vp_unlock(o->cvp);
    pthread_rwlock_unlock(&g_fx_lock);
    if (e.st)
        return cfail("hipdnnBackendGetAttribute", (hipdnnStatus_t)e.st, e.msg);
    return HIPDNN_STATUS_SUCCESS;
}

/* ------------------------------------------------------------------ Python's view
 * A snapshot of pack `id` for the Python side (registry.resolve → CVariantPackView).  Returns -1
 * when `id` is not a live C-resident pack, else the number of int64 the snapshot needs; fills `out`
 * when cap is enough:
 *   out[0] finalized, out[1] workspace, out[2 + i] length of vector i (-1 = never set), i in
 *   VPV order (uids, ptrs, override uids, shapes, strides, lengths), then the vectors' elements. */
static int64_t hipdnn_cabi_vp_export(int64_t id, int64_t* out, int64_t cap)
{
    pthread_rwlock_rdlock(&g_fx_lock);
    fx_obj* o = vp_find(id);
    if (o == NULL) {
        pthread_rwlock_unlock(&g_fx_lock);
        return -1;
    }
    struct vp_state* s = o->cvp;
    vp_lock(s);
    int64_t need = 2 + VPV_COUNT;
    for (int i = 0; i < VPV_COUNT; ++i)
        need += s->vec[i].n;
    if (out != NULL && cap >= need) {
        out[0] = s->finalized;
        out[1] = (int64_t)s->ws;
        int64_t k = 2 + VPV_COUNT;
        for (int i = 0; i < VPV_COUNT; ++i) {
            const vp_vec* v = &s->vec[i];
            out[2 + i] = v->set ? v->n : -1;
            if (v->n)
                memcpy(out + k, v->v, 8 * (size_t)v->n);
            k += v->n;
        }
    }
    vp_unlock(s);
    pthread_rwlock_unlock(&g_fx_lock);
    return need;
}
