/* Threads racing on C-resident descriptors: tensors, pointwise operations and variant
 * packs are created, set, finalized, executed and destroyed by some threads while other threads use
 * the very same ids (published in shared slots, possibly destroyed under them).  Every call must
 * answer an expected status — SUCCESS, or the status of a destroyed / not (yet) finalized
 * descriptor with its message — never crash or hang; values read from a thread's own descriptors
 * must be the ones it set; executes (a plan built as pipeline.c builds it, C sample plugin) must
 * compute the right numbers.
 * Usage: hammer <threads> <seconds>; prints "OK <calls> <raced calls>"; exit 1 on failure. */
#define main pipeline_main
#include "pipeline.c"
#undef main

#include <stdint.h>

#define SLOTS 32
static int64_t g_slot[SLOTS]; /* published descriptor ids (0: none); kind = slot % 3 */
static Plan g_plan;           /* RELU plan on its own handle */
static long g_calls[64], g_raced[64];
static volatile int g_fail = 0;
static float g_buf[64][2][N] __attribute__((aligned(64)));

static int allowed(hipdnnStatus_t s)
{
    return s == HIPDNN_STATUS_SUCCESS || s == HIPDNN_STATUS_BAD_PARAM_NULL_POINTER || s == HIPDNN_STATUS_BAD_PARAM
           || s == HIPDNN_STATUS_NOT_INITIALIZED;
}

static void fail(const char* what, int line, hipdnnStatus_t s)
{
    char m[1024];
    hipdnnGetLastErrorString(m, sizeof m);
    fprintf(stderr, "line %d: %s -> %d: %s\n", line, what, (int)s, m);
    g_fail = 1;
}

#define EXPECT(call, cond)                                       \
    do {                                                         \
        hipdnnStatus_t s_ = (call);                              \
        if (!(cond)) fail(#call, __LINE__, s_);                  \
    } while (0)

static unsigned rnd(unsigned* s)
{
    *s = *s * 1103515245u + 12345u;
    return *s >> 8;
}

/* a new descriptor of kind k (0 tensor, 1 pointwise op, 2 variant pack), partly set */
static D make(int k, unsigned* seed, float* x, float* y)
{
    D d = NULL;
    static const hipdnnBackendDescriptorType_t types[3] = {HIPDNN_BACKEND_TENSOR_DESCRIPTOR,
        HIPDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, HIPDNN_BACKEND_VARIANT_PACK_DESCRIPTOR};
    if (hipdnnBackendCreateDescriptor(types[k], &d) != HIPDNN_STATUS_SUCCESS) {
        fail("create", __LINE__, 1);
        return NULL;
    }
    int64_t v = rnd(seed) % 1000, dims[2] = {1, N};
    if (k == 0) {
        EXPECT(hipdnnBackendSetAttribute(d, HIPDNN_ATTR_TENSOR_UNIQUE_ID, HIPDNN_TYPE_INT64, 1, &v), s_ == 0);
        EXPECT(hipdnnBackendSetAttribute(d, HIPDNN_ATTR_TENSOR_DIMENSIONS, HIPDNN_TYPE_INT64, 2, dims), s_ == 0);
        if (rnd(seed) % 2) {
            hipdnnDataType_t dt = HIPDNN_DATA_FLOAT;
            EXPECT(hipdnnBackendSetAttribute(d, HIPDNN_ATTR_TENSOR_DATA_TYPE, HIPDNN_TYPE_DATA_TYPE, 1, &dt), s_ == 0);
        }
    } else if (k == 1) {
        hipdnnPointwiseMode_t pm = HIPDNN_POINTWISE_RELU_FWD;
        double clip = 0.5;
        EXPECT(hipdnnBackendSetAttribute(d, HIPDNN_ATTR_POINTWISE_MODE, HIPDNN_TYPE_POINTWISE_MODE, 1, &pm), s_ == 0);
        EXPECT(hipdnnBackendSetAttribute(d, HIPDNN_ATTR_POINTWISE_RELU_LOWER_CLIP, HIPDNN_TYPE_DOUBLE, 1, &clip), s_ == 0);
    } else {
        void* ptrs[2] = {x, y};
        int64_t uids[2] = {1, 3};
        EXPECT(hipdnnBackendSetAttribute(d, HIPDNN_ATTR_VARIANT_PACK_DATA_POINTERS, HIPDNN_TYPE_VOID_PTR, 2, ptrs), s_ == 0);
        EXPECT(hipdnnBackendSetAttribute(d, HIPDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, HIPDNN_TYPE_INT64, 2, uids), s_ == 0);
        if (rnd(seed) % 2)
            EXPECT(hipdnnBackendFinalize(d), s_ == 0);
    }
    return d;
}

/* calls on an id another thread may destroy at any moment */
static void race(int k, D d, long* n)
{
    int64_t v = 7, cnt = 0, out[4] = {0};
    hipdnnPointwiseMode_t pm = HIPDNN_POINTWISE_RELU_FWD;
    double dv = 0;
    if (k == 0) {
        EXPECT(hipdnnBackendSetAttribute(d, HIPDNN_ATTR_TENSOR_UNIQUE_ID, HIPDNN_TYPE_INT64, 1, &v), allowed(s_));
        EXPECT(hipdnnBackendGetAttribute(d, HIPDNN_ATTR_TENSOR_DIMENSIONS, HIPDNN_TYPE_INT64, 4, &cnt, out), allowed(s_));
        EXPECT(hipdnnBackendSetAttribute(d, HIPDNN_ATTR_TENSOR_BYTE_ALIGNMENT, HIPDNN_TYPE_INT64, 1, &v), allowed(s_));
        EXPECT(hipdnnBackendFinalize(d), allowed(s_));
    } else if (k == 1) {
        EXPECT(hipdnnBackendSetAttribute(d, HIPDNN_ATTR_POINTWISE_MODE, HIPDNN_TYPE_POINTWISE_MODE, 1, &pm), allowed(s_));
        EXPECT(hipdnnBackendGetAttribute(d, HIPDNN_ATTR_POINTWISE_RELU_LOWER_CLIP, HIPDNN_TYPE_DOUBLE, 1, &cnt, &dv), allowed(s_));
        EXPECT(hipdnnBackendFinalize(d), allowed(s_)); /* BAD_PARAM: its tensors are not set */
    } else {
        EXPECT(hipdnnBackendGetAttribute(d, HIPDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, HIPDNN_TYPE_INT64, 4, &cnt, out), allowed(s_));
        EXPECT(hipdnnBackendExecute(g_plan.h, g_plan.plan, d), allowed(s_) || s_ == HIPDNN_STATUS_EXECUTION_FAILED);
    }
    *n += 4;
}

static double g_secs = 1;

static void* hammer(void* arg)
{
    intptr_t t = (intptr_t)arg;
    unsigned seed = (unsigned)t * 7919u + 1;
    float* x = g_buf[t][0]; /* never freed: packs in the shared slots point here */
    float* y = g_buf[t][1];
    for (int i = 0; i < N; i++) x[i] = (float)(i - 8);
    double end = now() + g_secs;
    long calls = 0, raced = 0;
    while (now() < end && !g_fail) {
        int s = (int)(rnd(&seed) % SLOTS), k = s % 3;
        if (rnd(&seed) % 3 == 0) { /* replace the slot's descriptor; destroy the old one */
            D d = make(k, &seed, x, y);
            int64_t old = __atomic_exchange_n(&g_slot[s], (int64_t)(intptr_t)d, __ATOMIC_ACQ_REL);
            if (old)
                EXPECT(hipdnnBackendDestroyDescriptor((D)(intptr_t)old), s_ == 0);
            calls += 8;
        } else {
            int64_t id = __atomic_load_n(&g_slot[s], __ATOMIC_ACQUIRE);
            if (id) {
                race(k, (D)(intptr_t)id, &raced);
                /* a destroyed id (ours, just now) must answer "invalid or destroyed" */
            }
        }
        /* own descriptors: values must round-trip; executes must compute */
        D td = make(0, &seed, x, y), op = NULL;
        int64_t cnt = 0, got[4] = {0}, uid = 0;
        hipdnnDataType_t dt = HIPDNN_DATA_FLOAT;
        int64_t strides[2] = {N, 1};
        hipdnnBackendSetAttribute(td, HIPDNN_ATTR_TENSOR_DATA_TYPE, HIPDNN_TYPE_DATA_TYPE, 1, &dt);
        EXPECT(hipdnnBackendSetAttribute(td, HIPDNN_ATTR_TENSOR_STRIDES, HIPDNN_TYPE_INT64, 2, strides), s_ == 0);
        EXPECT(hipdnnBackendFinalize(td), s_ == 0);
        EXPECT(hipdnnBackendGetAttribute(td, HIPDNN_ATTR_TENSOR_DIMENSIONS, HIPDNN_TYPE_INT64, 4, &cnt, got),
               s_ == 0 && cnt == 2 && got[0] == 1 && got[1] == N);
        EXPECT(hipdnnBackendGetAttribute(td, HIPDNN_ATTR_TENSOR_UNIQUE_ID, HIPDNN_TYPE_INT64, 1, &cnt, &uid),
               s_ == 0 && uid >= 0 && uid < 1000);
        op = make(1, &seed, x, y);
        EXPECT(hipdnnBackendSetAttribute(op, HIPDNN_ATTR_OPERATION_POINTWISE_IN_0_EXT, HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, &td), s_ == 0);
        EXPECT(hipdnnBackendSetAttribute(op, HIPDNN_ATTR_OPERATION_POINTWISE_OUT_0_EXT, HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, &td), s_ == 0);
        EXPECT(hipdnnBackendFinalize(op), s_ == 0);
        double clip = 0;
        hipdnnPointwiseMode_t pm = 0;
        EXPECT(hipdnnBackendGetAttribute(op, HIPDNN_ATTR_POINTWISE_RELU_LOWER_CLIP, HIPDNN_TYPE_DOUBLE, 1, &cnt, &clip),
               s_ == 0 && clip == 0.5 && cnt == 1);
        EXPECT(hipdnnBackendGetAttribute(op, HIPDNN_ATTR_POINTWISE_MODE, HIPDNN_TYPE_POINTWISE_MODE, 1, &cnt, &pm),
               s_ == 0 && pm == HIPDNN_POINTWISE_RELU_FWD);
        EXPECT(hipdnnBackendDestroyDescriptor(op), s_ == 0);
        EXPECT(hipdnnBackendDestroyDescriptor(td), s_ == 0);
        EXPECT(hipdnnBackendGetAttribute(td, HIPDNN_ATTR_TENSOR_UNIQUE_ID, HIPDNN_TYPE_INT64, 1, &cnt, &uid),
               s_ == HIPDNN_STATUS_BAD_PARAM_NULL_POINTER);
        EXPECT(hipdnnBackendDestroyDescriptor(td), s_ == HIPDNN_STATUS_BAD_PARAM_NULL_POINTER);
        if (execute_check(&g_plan, (int)(t * 31 + calls), 1))
            fail("execute_check", __LINE__, 1);
        calls += 20;
    }
    g_calls[t] = calls;
    g_raced[t] = raced;
    return NULL;
}

int main(int argc, char** argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 4;
    g_secs = argc > 2 ? atof(argv[2]) : 1;
    if (threads > 64) threads = 64;
    if (build(NULL, 2, &g_plan)) return 1;
    pthread_t tid[64];
    for (intptr_t k = 0; k < threads; k++) pthread_create(&tid[k], NULL, hammer, (void*)k);
    long calls = 0, raced = 0;
    for (int k = 0; k < threads; k++) {
        pthread_join(tid[k], NULL);
        calls += g_calls[k];
        raced += g_raced[k];
    }
    for (int s = 0; s < SLOTS; s++)
        if (g_slot[s] && hipdnnBackendDestroyDescriptor((D)(intptr_t)g_slot[s]) != HIPDNN_STATUS_SUCCESS)
            g_fail = 1;
    if (g_fail || teardown(&g_plan)) return 1;
    printf("OK %ld %ld\n", calls, raced);
    return 0;
}
