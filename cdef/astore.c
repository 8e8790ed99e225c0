/* ==================================================================== the C attribute store
 * Hot Set/Get of plain descriptor fields without entering Python (issue 15, item 2; docs/abi-choices.md
 * "C attribute store").
 *
 * Pasted by cdef/build_backend.py after cdef/vpack.c.  The fields are each descriptor class's
 * FAST_FIELDS (hipdnn_cabi/backend/descriptors: {attribute: (attribute type, kind, field)}), the
 * tables below are generated from them at build time (build_backend.astore_source), slot i = the i-th
 * FAST_FIELDS entry — one source of truth.  Kinds: 0 int64 scalar, 1 int64 vector, 2 boolean.
 *
 * Ownership: for a descriptor created through hipdnnBackendCreateDescriptor whose class has
 * FAST_FIELDS, the shim adds a record after Python returned the new id; the Python object knows it
 * (`_cid`) and its FAST_FIELDS attributes are data descriptors that read the record while the
 * descriptor is not finalized and write through to it (descriptors/base.py, CField).  This store is
 * the one place an unfinalized descriptor's fast fields live, so nothing is ever written twice.
 * Finalize (Python) first pulls the record's values into the object, which reads them locally
 * from then on (a finalized descriptor never changes), and marks the record finalized; Destroy
 * (Python first: the object keeps its values, other wrapper ids may still reach it) removes it.
 *
 * What C answers is exactly what entry.py's fast paths answer (hpy_set_attribute /
 * hpy_get_attribute with FAST_FIELDS): a Set before finalize with the field's attribute type, a
 * non-NULL array and a valid count (1; 1..2^24 for vectors); a Get after finalize with the field's
 * type and req >= 0 (size query with a count pointer, or a fetch).  Everything else — every error,
 * every other attribute, every other descriptor — goes to Python unchanged, so statuses and
 * messages are the Python ones by construction.  HIPDNN_CABI_PY_ATTRS=1 (read at library start)
 * turns the store off; tests/foundation/test_attr_store.py compares both.
 *
 * Threads: the table is split into AS_SHARDS tables by id hash, each under its own rwlock (Set/Get
 * read-lock one shard; record creation/removal, inside Create/Destroy, write-lock one shard), and a
 * per-record spinlock serialises calls on the same descriptor.
 */
#define AS_INLINE 8
#define AS_MAX_FIELDS 16

typedef struct {
    int name, atype, kind;
} as_field;

HIPDNN_CABI_ASTORE_TABLES

typedef struct {
    int64_t n;   /* element count (scalars: 1) */
    int64_t* v;  /* inl or malloc'ed */
    int64_t inl[AS_INLINE];
} as_val;

typedef struct {
    int64_t id;
    int lock;
    int finalized;
    int nf;
    const as_field* f;
    as_val val[]; /* nf of them */
} as_rec;

#define AS_SHARDS 16
typedef struct {
    pthread_rwlock_t lk;
    as_rec** tab;
    size_t cap, count;
    char pad[64];
} as_shard;
static as_shard g_ass[AS_SHARDS];
static long g_as_count = 0; /* records alive (atomic) */
static volatile int g_as_enabled = 1;

__attribute__((constructor)) static void as_init(void)
{
    for (int i = 0; i < AS_SHARDS; ++i)
        pthread_rwlock_init(&g_ass[i].lk, NULL);
}

static inline as_shard* as_shard_of(int64_t id)
{
    return &g_ass[(((uint64_t)id >> 4) * 0x9E3779B97F4A7C15ull >> 59) & (AS_SHARDS - 1)];
}

static void hipdnn_cabi_as_set_enabled(int on) { g_as_enabled = on ? 1 : 0; }
static int hipdnn_cabi_as_enabled(void) { return g_as_enabled; }

static inline size_t as_slot(int64_t id, size_t cap)
{
    return (size_t)(((uint64_t)id >> 4) * 0x9E3779B97F4A7C15ull >> 17) & (cap - 1);
}

static inline as_rec* as_find_in(as_shard* S, int64_t id)
{
    if (S->cap == 0)
        return NULL;
    for (size_t i = as_slot(id, S->cap);; i = (i + 1) & (S->cap - 1)) {
        as_rec* r = S->tab[i];
        if (r == NULL)
            return NULL;
        if (r->id == id)
            return r;
    }
}

static inline void as_lock(as_rec* r)
{
    while (__atomic_exchange_n(&r->lock, 1, __ATOMIC_ACQUIRE))
        while (__atomic_load_n(&r->lock, __ATOMIC_RELAXED))
            sched_yield();
}
static inline void as_unlock(as_rec* r) { __atomic_store_n(&r->lock, 0, __ATOMIC_RELEASE); }

static void as_free(as_rec* r)
{
    for (int i = 0; i < r->nf; ++i)
        if (r->val[i].v != r->val[i].inl)
            free(r->val[i].v);
    free(r);
}

/* Called by the create shim with the id Python returned (no record on failure: Python then keeps
 * the fields itself — its reads fall back when the record is missing). */
static void as_add(int64_t id, int dtype)
{
    int nf = 0;
    const as_field* f = as_fields_of(dtype, &nf);
    if (f == NULL || !g_as_enabled || nf > AS_MAX_FIELDS)
        return;
    as_rec* r = (as_rec*)calloc(1, sizeof *r + (size_t)nf * sizeof(as_val));
    if (r == NULL)
        return;
    r->id = id;
    r->nf = nf;
    r->f = f;
    for (int i = 0; i < nf; ++i) {
        r->val[i].v = r->val[i].inl;
        r->val[i].n = f[i].kind == 1 ? 0 : 1; /* scalars start at 0 / false, vectors empty */
    }
    as_shard* S = as_shard_of(id);
    pthread_rwlock_wrlock(&S->lk);
    if ((S->count + 1) * 2 > S->cap) {
        size_t cap = S->cap ? S->cap * 2 : 64;
        as_rec** t = (as_rec**)calloc(cap, sizeof *t);
        if (t == NULL) {
            pthread_rwlock_unlock(&S->lk);
            free(r);
            return;
        }
        for (size_t i = 0; i < S->cap; ++i) {
            as_rec* x = S->tab[i];
            if (x == NULL)
                continue;
            size_t j = as_slot(x->id, cap);
            while (t[j] != NULL)
                j = (j + 1) & (cap - 1);
            t[j] = x;
        }
        free(S->tab);
        S->tab = t;
        S->cap = cap;
    }
    size_t j = as_slot(id, S->cap);
    while (S->tab[j] != NULL)
        j = (j + 1) & (S->cap - 1);
    S->tab[j] = r;
    S->count++;
    pthread_rwlock_unlock(&S->lk);
    __atomic_add_fetch(&g_as_count, 1, __ATOMIC_RELAXED);
}

/* Called by the destroy shim after Python destroyed `id` (unknown ids are fine). */
static void as_remove(int64_t id)
{
    if (__atomic_load_n(&g_as_count, __ATOMIC_RELAXED) == 0)
        return;
    as_shard* S = as_shard_of(id);
    pthread_rwlock_wrlock(&S->lk);
    as_rec* o = NULL;
    if (S->cap) {
        size_t m = S->cap - 1, i = as_slot(id, S->cap);
        for (;; i = (i + 1) & m) {
            if (S->tab[i] == NULL)
                break;
            if (S->tab[i]->id == id) {
                o = S->tab[i];
                break;
            }
        }
        if (o != NULL) {
            S->tab[i] = NULL;
            for (size_t j = (i + 1) & m; S->tab[j] != NULL; j = (j + 1) & m) {
                size_t k = as_slot(S->tab[j]->id, S->cap);
                if ((j > i && (k <= i || k > j)) || (j < i && (k <= i && k > j))) {
                    S->tab[i] = S->tab[j];
                    S->tab[j] = NULL;
                    i = j;
                }
            }
            S->count--;
        }
    }
    pthread_rwlock_unlock(&S->lk);
    if (o != NULL) {
        __atomic_sub_fetch(&g_as_count, 1, __ATOMIC_RELAXED);
        as_free(o); /* no reader can hold it: readers run under the shard lock */
    }
}

static int as_store(as_val* v, int64_t n, const void* src, int kind)
{
    int64_t* dst = v->inl;
    if (n > AS_INLINE && (dst = (int64_t*)malloc(8 * (size_t)n)) == NULL)
        return -1;
    if (kind == 2)
        dst[0] = *(const unsigned char*)src != 0;
    else if (n)
        memcpy(dst, src, 8 * (size_t)n);
    if (v->v != v->inl)
        free(v->v);
    v->v = dst;
    v->n = n;
    return 0;
}

/* -1: not answered here (→ Python), else SUCCESS. */
static int as_set(int64_t id, int name, int type, int64_t count, const void* arr)
{
    if (__atomic_load_n(&g_as_count, __ATOMIC_RELAXED) == 0 || arr == NULL)
        return -1;
    int rc = -1;
    as_shard* S = as_shard_of(id);
    pthread_rwlock_rdlock(&S->lk);
    as_rec* r = as_find_in(S, id);
    if (r != NULL) {
        as_lock(r);
        if (!r->finalized)
            for (int i = 0; i < r->nf; ++i) {
                const as_field* f = &r->f[i];
                if (f->name != name)
                    continue;
                if (type != f->atype)
                    break;
                if (f->kind == 1 ? (count > 0 && count <= (1LL << 24)) : count == 1)
                    rc = as_store(&r->val[i], f->kind == 1 ? count : 1, arr, f->kind) ? -1 : 0;
                break;
            }
        as_unlock(r);
    }
    pthread_rwlock_unlock(&S->lk);
    return rc;
}

static int as_get(int64_t id, int name, int type, int64_t req, int64_t* count, void* arr)
{
    if (__atomic_load_n(&g_as_count, __ATOMIC_RELAXED) == 0 || req < 0)
        return -1;
    int rc = -1;
    as_shard* S = as_shard_of(id);
    pthread_rwlock_rdlock(&S->lk);
    as_rec* r = as_find_in(S, id);
    if (r != NULL) {
        as_lock(r);
        if (r->finalized)
            for (int i = 0; i < r->nf; ++i) {
                const as_field* f = &r->f[i];
                if (f->name != name)
                    continue;
                if (type != f->atype)
                    break;
                const as_val* v = &r->val[i];
                if (arr == NULL || req == 0) { /* size query (needs a count pointer) */
                    if (count != NULL) {
                        *count = v->n;
                        rc = 0;
                    }
                } else if (f->kind == 1) {
                    int64_t k = req < v->n ? req : v->n;
                    if (k)
                        memcpy(arr, v->v, 8 * (size_t)k);
                    if (count)
                        *count = k;
                    rc = 0;
                } else {
                    if (f->kind == 2)
                        *(unsigned char*)arr = v->v[0] ? 1 : 0;
                    else
                        memcpy(arr, v->v, 8);
                    if (count)
                        *count = 1;
                    rc = 0;
                }
                break;
            }
        as_unlock(r);
    }
    pthread_rwlock_unlock(&S->lk);
    return rc;
}

/* ------------------------------------------------------------------ Python's side */
/* Field `slot` of `id`: the element count (filling out[0..n) when cap >= n), or -1 (no record). */
static int64_t hipdnn_cabi_as_read(int64_t id, int slot, int64_t* out, int64_t cap)
{
    int64_t n = -1;
    as_shard* S = as_shard_of(id);
    pthread_rwlock_rdlock(&S->lk);
    as_rec* r = as_find_in(S, id);
    if (r != NULL && slot >= 0 && slot < r->nf) {
        as_lock(r);
        const as_val* v = &r->val[slot];
        n = v->n;
        if (out != NULL && cap >= n && n)
            memcpy(out, v->v, 8 * (size_t)n);
        as_unlock(r);
    }
    pthread_rwlock_unlock(&S->lk);
    return n;
}

/* Every field of `id` at once: the int64 count needed (-1: no record); when cap is enough, out =
 * [n_0 .. n_{nf-1}, elements of field 0, of field 1, ...]. */
static int64_t hipdnn_cabi_as_export(int64_t id, int64_t* out, int64_t cap)
{
    int64_t need = -1;
    as_shard* S = as_shard_of(id);
    pthread_rwlock_rdlock(&S->lk);
    as_rec* r = as_find_in(S, id);
    if (r != NULL) {
        as_lock(r);
        need = r->nf;
        for (int i = 0; i < r->nf; ++i)
            need += r->val[i].n;
        if (out != NULL && cap >= need) {
            int64_t k = r->nf;
            for (int i = 0; i < r->nf; ++i) {
                const as_val* v = &r->val[i];
                out[i] = v->n;
                if (v->n)
                    memcpy(out + k, v->v, 8 * (size_t)v->n);
                k += v->n;
            }
        }
        as_unlock(r);
    }
    pthread_rwlock_unlock(&S->lk);
    return need;
}

/* Python wrote field `slot` (n elements; booleans and scalars n = 1): 0, or -1 (no record / OOM). */
static int hipdnn_cabi_as_write(int64_t id, int slot, const int64_t* v, int64_t n)
{
    int rc = -1;
    as_shard* S = as_shard_of(id);
    pthread_rwlock_rdlock(&S->lk);
    as_rec* r = as_find_in(S, id);
    if (r != NULL && slot >= 0 && slot < r->nf && n >= 0) {
        as_lock(r);
        rc = as_store(&r->val[slot], n, v, 0);
        as_unlock(r);
    }
    pthread_rwlock_unlock(&S->lk);
    return rc;
}

/* Python finalized (1) the descriptor: C answers its Gets and refuses (→ Python) its Sets. */
static void hipdnn_cabi_as_mark_finalized(int64_t id, int on)
{
    as_shard* S = as_shard_of(id);
    pthread_rwlock_rdlock(&S->lk);
    as_rec* r = as_find_in(S, id);
    if (r != NULL) {
        as_lock(r);
        r->finalized = on ? 1 : 0;
        as_unlock(r);
    }
    pthread_rwlock_unlock(&S->lk);
}

static long hipdnn_cabi_as_count(void) { return __atomic_load_n(&g_as_count, __ATOMIC_RELAXED); }

static void as_atfork_prepare(void)
{
    for (int i = 0; i < AS_SHARDS; ++i)
        pthread_rwlock_wrlock(&g_ass[i].lk);
}
static void as_atfork_parent(void)
{
    for (int i = AS_SHARDS - 1; i >= 0; --i)
        pthread_rwlock_unlock(&g_ass[i].lk);
}
static void as_atfork_child(void)
{
    for (int i = 0; i < AS_SHARDS; ++i) {
        as_shard* S = &g_ass[i];
        pthread_rwlock_init(&S->lk, NULL);
        for (size_t k = 0; k < S->cap; ++k)
            if (S->tab[k] != NULL)
                S->tab[k]->lock = 0;
    }
}
