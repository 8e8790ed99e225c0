/* ==================================================================== C-resident variant packs
 * HIPDNN_BACKEND_VARIANT_PACK_DESCRIPTOR without entering Python (docs/plugins.md,
 * "C-resident variant packs").
 *
 * Pasted by cdef/build_backend.py after cdef/shims.c (it uses cfail and the execute registry's
 * thread shards).  The execute fast path (shims.c, fx_execute) acquires a pack here, so
 * hipdnnBackendExecute with any finalized pack of a plan and handle already registered goes from
 * C to the plugin (.so plugins) or to the Python plugin's execute (one crossing).
 *
 * Create / Set / Get / Finalize / Destroy of a pack are answered here; every status and last-error
 * message is the one hipdnn_cabi/backend/descriptors/variant_pack.py (+ attrs.py, base.py,
 * entry.py) gives, in the same order of checks.  That Python class stays the reference: with
 * HIPDNN_CABI_PY_VARIANT_PACK=1 packs are created in Python again, and
 * tests/plugins/test_variant_pack_c.py runs one battery both ways and compares every answer.
 *
 * Ids: VP_ID_BASE + ((slot << 32 | generation) << 4) — 16-byte aligned like the Python registry's
 * ids, far above them.  A pack lives in a slot of its own table (not the execute registry, whose
 * writers would serialise every thread): a slot word holds the generation, a LIVE bit and the
 * count of calls using the pack; a call acquires the pack with one CAS on that word (generation
 * must match, LIVE must be set), destroy clears LIVE, waits for the count to drain, frees, and the
 * next pack in that slot gets the next generation — so a destroyed id never finds a pack again
 * (until 2^32 reuses of one slot).  Any id that is not a live pack here (destroyed, foreign,
 * garbage, another kind) goes to the Python path, whose registry answers "invalid or destroyed" /
 * "type mismatch" as before; Python sees a live C pack through registry.resolve() →
 * CVariantPackView (a snapshot, for the slow execute path and for kind checks).
 *
 * Threads: no global lock on any pack call.  Free slots are kept in one list per thread shard
 * (the execute registry's shard index), stolen from other shards before fresh slots are taken.
 * A per-pack spinlock serialises concurrent calls on the same pack; messages are formatted under
 * it and stored (cfail, which may log through Python) after it is released.  A finalized pack never
 * changes again (sets are refused, re-finalize is a no-op), so execute reads it without the
 * spinlock after an acquire load of `finalized`.
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
    int lock;      /* spinlock for calls on this pack */
    int finalized; /* atomic; once 1 the pack never changes */
    int has_ovr;
    uint32_t slot;
    uint64_t ws;
    vp_vec vec[VPV_COUNT];
    /* built at finalize */
    const hipdnnPluginDeviceBuffer_t* bufs;
    uint32_t n;
    uint64_t checked; /* serial of the last plan whose alignments this pack passed (fx_execute) */
    int64_t dev2;     /* device of its buffers + 2, found by the Python path (0: not known yet) */
    hipdnnPluginDeviceBuffer_t inl_bufs[VP_INLINE];
    int64_t inl_uids[VP_INLINE], inl_ptrs[VP_INLINE];
};

/* ------------------------------------------------------------------ the slot table */
#define VPS_CHUNK_BITS 12
#define VPS_CHUNK (1u << VPS_CHUNK_BITS)
#define VPS_CHUNKS 1024u /* 4M packs alive at most */
#define VPS_LIVE 0x80000000ull
#define VPS_REFS 0x7FFFFFFFull

typedef struct {
    uint64_t w; /* generation << 32 | LIVE | calls in flight */
    struct vp_state* obj;
    char pad[CL_PAIR - sizeof(uint64_t) - sizeof(void*)]; /* one cache-line pair per slot */
} vp_slot;

typedef struct {
    pthread_mutex_t mu;
    uint32_t* v;
    uint32_t n, cap;
    long live; /* packs created minus destroyed by this shard's threads (atomic) */
    char pad[64];
} __attribute__((aligned(CL_PAIR))) vp_freelist;

static vp_slot* g_vps[VPS_CHUNKS];
static uint32_t g_vps_next = 0;  /* next fresh slot (atomic) */
static pthread_mutex_t g_vps_grow = PTHREAD_MUTEX_INITIALIZER;
static vp_freelist g_vpf[BR_SHARDS];
static volatile int g_vp_resident = 1;

__attribute__((constructor)) static void vp_init(void)
{
    for (int i = 0; i < BR_SHARDS; ++i)
        pthread_mutex_init(&g_vpf[i].mu, NULL);
}

static void hipdnn_cabi_vp_set_resident(int on) { g_vp_resident = on ? 1 : 0; }
static int hipdnn_cabi_vp_resident(void) { return g_vp_resident; }
static long vp_live_count(void)
{
    long n = 0;
    for (int i = 0; i < BR_SHARDS; ++i)
        n += __atomic_load_n(&g_vpf[i].live, __ATOMIC_RELAXED);
    return n;
}
static long hipdnn_cabi_vp_live(void) { return vp_live_count(); }

/* Slot tables (this file's packs, astore.c's records): chunks of slots, ids
 * base + ((slot << 32 | generation) << 4).  A slot's word holds its generation, LIVE and the
 * calls in flight; acquire adds a call, retire clears LIVE and waits for the calls to end. */
static inline vp_slot* slot_at(vp_slot* const* tab, uint32_t slot)
{
    vp_slot* c = __atomic_load_n(&tab[slot >> VPS_CHUNK_BITS], __ATOMIC_ACQUIRE);
    return c ? &c[slot & (VPS_CHUNK - 1)] : NULL;
}

/* The slot and generation an id names, or NULL (not an id of this table). */
static inline vp_slot* slot_of(vp_slot* const* tab, int64_t base, int64_t id, uint32_t* gen)
{
    if (id < base)
        return NULL;
    uint64_t x = (uint64_t)id - (uint64_t)base;
    if (x & 15)
        return NULL;
    x >>= 4;
    uint64_t slot = x >> 32;
    if (slot >= (uint64_t)VPS_CHUNKS * VPS_CHUNK)
        return NULL;
    *gen = (uint32_t)x;
    return slot_at(tab, (uint32_t)slot);
}

/* One atomic step on a slot of generation gen that is live: one more call in flight (retire 0)
 * or no longer live (retire 1); 0 when the slot is not that live generation. */
static inline int slot_claim(vp_slot* sl, uint32_t gen, int retire)
{
    uint64_t w = __atomic_load_n(&sl->w, __ATOMIC_ACQUIRE);
    for (;;) {
        if ((uint32_t)(w >> 32) != gen || !(w & VPS_LIVE))
            return 0;
        if (__atomic_compare_exchange_n(&sl->w, &w, retire ? w & ~VPS_LIVE : w + 1, 1, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE))
            return 1;
    }
}

/* The live object an id names with one more call in flight, or NULL. */
static inline void* slot_acquire(vp_slot* const* tab, int64_t base, int64_t id)
{
    uint32_t gen;
    vp_slot* sl = slot_of(tab, base, id, &gen);
    return sl != NULL && slot_claim(sl, gen, 0) ? sl->obj : NULL;
}

/* Publish obj in a free slot under the next generation; returns its id. */
static inline int64_t slot_publish(vp_slot* const* tab, int64_t base, uint32_t slot, void* obj)
{
    vp_slot* sl = slot_at(tab, slot);
    sl->obj = obj;
    uint32_t gen = (uint32_t)(__atomic_load_n(&sl->w, __ATOMIC_RELAXED) >> 32) + 1;
    __atomic_store_n(&sl->w, ((uint64_t)gen << 32) | VPS_LIVE, __ATOMIC_RELEASE);
    return base + (int64_t)((((uint64_t)slot << 32) | gen) << 4);
}

/* Retire the live object an id names: no new calls, waits for those in flight; NULL when the id
 * is not live.  The caller frees the object and gives the slot back. */
static inline void* slot_retire(vp_slot* const* tab, int64_t base, int64_t id)
{
    uint32_t gen;
    vp_slot* sl = slot_of(tab, base, id, &gen);
    if (sl == NULL || !slot_claim(sl, gen, 1))
        return NULL;
    while (__atomic_load_n(&sl->w, __ATOMIC_ACQUIRE) & VPS_REFS)
        sched_yield();
    void* obj = sl->obj;
    sl->obj = NULL;
    return obj;
}

static inline vp_slot* vps_at(uint32_t slot) { return slot_at(g_vps, slot); }
static struct vp_state* vp_acquire(int64_t id) { return slot_acquire(g_vps, VP_ID_BASE, id); }
static void vp_release(struct vp_state* s) { __atomic_sub_fetch(&vps_at(s->slot)->w, 1, __ATOMIC_RELEASE); }

/* A free slot (-1: none left) from the shard free lists: the thread's own first, then the others'
 * (stolen), then a fresh slot. */
static int64_t slots_take_shared(vp_freelist* fl, vp_slot** tab, uint32_t* next, pthread_mutex_t* grow)
{
    int me = br_index();
    for (int k = 0; k < BR_SHARDS; ++k) {
        vp_freelist* f = &fl[(me + k) % BR_SHARDS];
        if (__atomic_load_n(&f->n, __ATOMIC_RELAXED) == 0)
            continue;
        pthread_mutex_lock(&f->mu);
        if (f->n) {
            uint32_t s = f->v[f->n - 1];
            __atomic_store_n(&f->n, f->n - 1, __ATOMIC_RELAXED);
            pthread_mutex_unlock(&f->mu);
            return s;
        }
        pthread_mutex_unlock(&f->mu);
    }
    uint32_t s = __atomic_fetch_add(next, 1, __ATOMIC_RELAXED);
    if (s >= VPS_CHUNKS * VPS_CHUNK) {
        __atomic_sub_fetch(next, 1, __ATOMIC_RELAXED);
        return -1;
    }
    uint32_t c = s >> VPS_CHUNK_BITS;
    if (__atomic_load_n(&tab[c], __ATOMIC_ACQUIRE) == NULL) {
        pthread_mutex_lock(grow);
        if (tab[c] == NULL) {
            void* mem = NULL; /* one cache-line pair per slot: 128-byte aligned */
            vp_slot* chunk = posix_memalign(&mem, CL_PAIR, VPS_CHUNK * sizeof(vp_slot)) ? NULL : (vp_slot*)mem;
            if (chunk == NULL) {
                pthread_mutex_unlock(grow);
                return -1; /* this slot is lost; others may still come */
            }
            memset(chunk, 0, VPS_CHUNK * sizeof(vp_slot));
            __atomic_store_n(&tab[c], chunk, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(grow);
    }
    return s;
}

/* Give `n` free slots to this thread's shard free list (a slot that finds no room is lost: its
 * generation moved on, so no id finds it). */
static void slots_give_shared(vp_freelist* fl, const uint32_t* s, uint32_t n)
{
    vp_freelist* f = &fl[br_index()];
    pthread_mutex_lock(&f->mu);
    if (f->n + n > f->cap) {
        uint32_t cap = f->cap ? 2 * f->cap : 64;
        while (cap < f->n + n)
            cap *= 2;
        uint32_t* v = (uint32_t*)realloc(f->v, cap * sizeof *v);
        if (v == NULL) {
            pthread_mutex_unlock(&f->mu);
            return;
        }
        f->v = v;
        f->cap = cap;
    }
    memcpy(f->v + f->n, s, n * sizeof *s);
    __atomic_store_n(&f->n, f->n + n, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&f->mu);
}

/* ---- per-thread caches (no atomic, no lock): free slots of both tables (this file's packs,
 * astore.c's records) and freed pack / record objects.  A create after a destroy on one thread
 * touches nothing another thread writes (and no malloc).  The shard free lists are the fallback
 * (a cache refills from them when empty, spills half to them when full) and receive everything a
 * thread still holds when it exits (a pthread key's destructor). */
#define TC_SLOTS 64
#define TC_OBJS 8
typedef struct {
    uint32_t n;
    uint32_t s[TC_SLOTS];
} slot_cache;
typedef struct {
    int state; /* 0: unused, 1: exit hook registered, 2: no hook (caches off), 3: exiting */
    int br;    /* the thread's shard (br_index()) */
    slot_cache vp, as;
    uint32_t n_vobj, n_aobj;
    struct vp_state* vobj[TC_OBJS];
    void* aobj[TC_OBJS]; /* astore.c's as_rec, each with room for `cap` fields */
} thread_cache;
static __thread thread_cache t_tc;
static pthread_key_t g_tc_key;
static pthread_once_t g_tc_once = PTHREAD_ONCE_INIT;
static int g_tc_key_ok = 0;
static vp_freelist g_asf[BR_SHARDS]; /* astore.c's shard free lists */

static void tc_exit(void* p);
static void tc_key_init(void) { g_tc_key_ok = pthread_key_create(&g_tc_key, tc_exit) == 0; }

/* The thread's cache, or NULL (no exit hook could be registered: the shared lists only). */
static inline thread_cache* tc_get(void)
{
    thread_cache* c = &t_tc;
    if (__builtin_expect(c->state == 1, 1))
        return c;
    if (c->state != 0)
        return NULL;
    pthread_once(&g_tc_once, tc_key_init);
    if (g_tc_key_ok && pthread_setspecific(g_tc_key, c) == 0) {
        c->br = br_index();
        c->state = 1;
        return c;
    }
    c->state = 2;
    return NULL;
}

static void vp_free(struct vp_state* s);
static void as_rec_free_mem(void* r);
static void tc_exit(void* p)
{
    thread_cache* c = (thread_cache*)p;
    c->state = 3; /* a create/destroy in a later key destructor uses the shared lists */
    if (c->vp.n)
        slots_give_shared(g_vpf, c->vp.s, c->vp.n);
    if (c->as.n)
        slots_give_shared(g_asf, c->as.s, c->as.n);
    c->vp.n = c->as.n = 0;
    for (uint32_t i = 0; i < c->n_vobj; ++i)
        free(c->vobj[i]);
    for (uint32_t i = 0; i < c->n_aobj; ++i)
        as_rec_free_mem(c->aobj[i]);
    c->n_vobj = c->n_aobj = 0;
}

static inline int64_t tc_take(slot_cache* sc, vp_freelist* fl, vp_slot** tab, uint32_t* next,
                              pthread_mutex_t* grow)
{
    if (sc != NULL && sc->n)
        return sc->s[--sc->n];
    return slots_take_shared(fl, tab, next, grow);
}

static inline void tc_give(slot_cache* sc, vp_freelist* fl, uint32_t s)
{
    if (sc == NULL) {
        slots_give_shared(fl, &s, 1);
        return;
    }
    if (sc->n == TC_SLOTS) { /* spill the older half */
        slots_give_shared(fl, sc->s, TC_SLOTS / 2);
        memmove(sc->s, sc->s + TC_SLOTS / 2, (TC_SLOTS / 2) * sizeof sc->s[0]);
        sc->n = TC_SLOTS / 2;
    }
    sc->s[sc->n++] = s;
}

static int64_t vps_take(thread_cache* c) { return tc_take(c ? &c->vp : NULL, g_vpf, g_vps, &g_vps_next, &g_vps_grow); }
static void vps_give(thread_cache* c, uint32_t s) { tc_give(c ? &c->vp : NULL, g_vpf, s); }

/* fork(): only the forking thread lives on in the child — no call is in flight there. */
static void vp_atfork_child(void)
{
    uint32_t n = g_vps_next;
    for (uint32_t s = 0; s < n && s < VPS_CHUNKS * VPS_CHUNK; ++s) {
        vp_slot* sl = vps_at(s);
        if (sl == NULL)
            continue;
        sl->w &= ~VPS_REFS;
        if (sl->obj)
            sl->obj->lock = 0;
    }
    for (int i = 0; i < BR_SHARDS; ++i)
        pthread_mutex_init(&g_vpf[i].mu, NULL);
    pthread_mutex_init(&g_vps_grow, NULL);
}

static int vp_exec_view(struct vp_state* s, const hipdnnPluginDeviceBuffer_t** bufs, uint32_t* n, void** ws,
                        uint64_t** checked)
{
    if (!__atomic_load_n(&s->finalized, __ATOMIC_ACQUIRE) || s->has_ovr)
        return 0;
    *bufs = s->bufs;
    *n = s->n;
    *ws = (void*)(uintptr_t)s->ws;
    *checked = &s->checked;
    return 1;
}

/* The device of a finalized pack's buffers as the Python checking path found it (-1: host/none);
 * VP_DEV_UNKNOWN until that path has seen the pack.  A finalized pack never changes. */
#define VP_DEV_UNKNOWN (-2)
static int64_t vp_device(struct vp_state* s) { return __atomic_load_n(&s->dev2, __ATOMIC_RELAXED) - 2; }
static int hipdnn_cabi_vp_set_device(int64_t id, int64_t dev)
{
    struct vp_state* s = vp_acquire(id);
    if (s == NULL)
        return -1;
    __atomic_store_n(&s->dev2, dev + 2, __ATOMIC_RELAXED);
    vp_release(s);
    return 0;
}

static inline void vp_lock(struct vp_state* s)
{
    while (__atomic_exchange_n(&s->lock, 1, __ATOMIC_ACQUIRE))
        while (__atomic_load_n(&s->lock, __ATOMIC_RELAXED))
            sched_yield();
}
static inline void vp_unlock(struct vp_state* s) { __atomic_store_n(&s->lock, 0, __ATOMIC_RELEASE); }

static void vp_free(struct vp_state* s)
{
    for (int i = 0; i < VPV_COUNT; ++i)
        if (s->vec[i].v != s->vec[i].inl)
            free(s->vec[i].v); /* free(NULL) is fine */
    if (s->bufs != s->inl_bufs)
        free((void*)s->bufs);
    free(s);
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

/* ------------------------------------------------------------------ create / destroy */
/* Returns -1 when packs are not C-resident (→ Python), else a status. */
static int vp_create(hipdnnBackendDescriptor_t* out)
{
    if (!g_vp_resident)
        return -1;
    thread_cache* tc = tc_get();
    struct vp_state* b;
    if (tc != NULL && tc->n_vobj) { /* a pack this thread destroyed: clear what calloc would */
        b = tc->vobj[--tc->n_vobj];
        b->lock = b->finalized = b->has_ovr = 0;
        b->ws = 0;
        for (int i = 0; i < VPV_COUNT; ++i)
            b->vec[i] = (vp_vec){0, NULL, NULL, 0};
        b->n = 0;
        b->checked = 0;
        b->dev2 = 0;
    } else {
        b = (struct vp_state*)calloc(1, sizeof *b);
    }
    int64_t slot = b ? vps_take(tc) : -1;
    if (slot < 0) {
        free(b);
        return cfail("hipdnnBackendCreateDescriptor", HIPDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED,
                     "hipdnnBackendCreateDescriptor: out of host memory for a variant pack");
    }
    b->slot = (uint32_t)slot;
    b->vec[VPV_UIDS].v = b->vec[VPV_UIDS].inl = b->inl_uids;
    b->vec[VPV_PTRS].v = b->vec[VPV_PTRS].inl = b->inl_ptrs;
    b->bufs = b->inl_bufs;
    int64_t id = slot_publish(g_vps, VP_ID_BASE, (uint32_t)slot, b);
    __atomic_add_fetch(&g_vpf[tc ? tc->br : br_index()].live, 1, __ATOMIC_RELAXED);
    *out = (hipdnnBackendDescriptor_t)(intptr_t)id;
    return HIPDNN_STATUS_SUCCESS;
}

/* -1: not a live C-resident pack.  Waits for calls (fast executes) using the pack. */
static int vp_destroy(int64_t id)
{
    struct vp_state* s = slot_retire(g_vps, VP_ID_BASE, id);
    if (s == NULL)
        return -1;
    uint32_t slot = s->slot;
    thread_cache* tc = tc_get();
    if (tc != NULL && tc->n_vobj < TC_OBJS) { /* keep the object for this thread's next create */
        for (int i = 0; i < VPV_COUNT; ++i)
            if (s->vec[i].v != s->vec[i].inl)
                free(s->vec[i].v);
        if (s->bufs != s->inl_bufs)
            free((void*)s->bufs);
        tc->vobj[tc->n_vobj++] = s;
    } else {
        vp_free(s);
    }
    vps_give(tc, slot);
    __atomic_sub_fetch(&g_vpf[tc ? tc->br : br_index()].live, 1, __ATOMIC_RELAXED);
    return HIPDNN_STATUS_SUCCESS;
}

/* ------------------------------------------------------------------ finalize */
static int vp_finalize(int64_t id)
{
    vp_err e;
    e.st = 0;
    struct vp_state* s = vp_acquire(id);
    if (s == NULL)
        return -1;
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
                s->bufs = bufs;
                s->n = (uint32_t)n;
                s->has_ovr = s->vec[VPV_OUIDS].set || s->vec[VPV_OSHAPES].set || s->vec[VPV_OSTRIDES].set
                             || s->vec[VPV_OLENGTHS].set;
                __atomic_store_n(&s->finalized, 1, __ATOMIC_RELEASE);
            }
        }
    }
    vp_unlock(s);
    vp_release(s);
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
    struct vp_state* s = vp_acquire(id);
    if (s == NULL)
        return -1;
    vp_lock(s);
    vp_set_locked(s, &e, name, type, count, arr);
    vp_unlock(s);
    vp_release(s);
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
    struct vp_state* s = vp_acquire(id);
    if (s == NULL)
        return -1;
    vp_lock(s);
    vp_get_locked(s, &e, name, type, req, count, arr);
    vp_unlock(s);
    vp_release(s);
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
    struct vp_state* s = vp_acquire(id);
    if (s == NULL)
        return -1;
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
    vp_release(s);
    return need;
}
