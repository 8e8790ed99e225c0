/* The frontend's call sequence (spec §2.2–2.7) through real descriptors, on the C sample plugin:
 * tensors → pointwise op → graph → heuristics → configs → plan → variant pack → execute.
 * Usage: pipeline [threads] [iterations] [seconds]: one thread → "OK <n>"; several threads (or seconds > 0)
 * → "OK <total> min <fewest iterations of one thread>"; exit 1 on failure.  With several threads, each
 * iteration builds a graph (ADD, MUL or RELU by turn), plans and executes it and checks the numbers —
 * even threads on a handle of their own, odd threads on one shared handle — and executes one plan
 * shared by all threads with its own buffers; seconds > 0 runs for that long instead of `iterations`. */
#define _POSIX_C_SOURCE 200809L
#include <hipdnn_backend.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define N 32
#define CHECK(call)                                                                           \
    do {                                                                                      \
        hipdnnStatus_t s_ = (call);                                                           \
        if(s_ != HIPDNN_STATUS_SUCCESS) {                                                     \
            char m_[2048];                                                                    \
            hipdnnGetLastErrorString(m_, sizeof m_);                                          \
            fprintf(stderr, "%s:%d %s -> %d: %s\n", __FILE__, __LINE__, #call, (int)s_, m_);  \
            return 1;                                                                         \
        }                                                                                     \
    } while(0)

typedef hipdnnBackendDescriptor_t D;

static int make_tensor(int64_t uid, const char* name, D* out)
{
    int64_t dims[2] = {1, N}, strides[2] = {N, 1};
    hipdnnDataType_t dt = HIPDNN_DATA_FLOAT;
    bool virt = false;
    CHECK(hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_TENSOR_DESCRIPTOR, out));
    CHECK(hipdnnBackendSetAttribute(*out, HIPDNN_ATTR_TENSOR_UNIQUE_ID, HIPDNN_TYPE_INT64, 1, &uid));
    CHECK(hipdnnBackendSetAttribute(*out, HIPDNN_ATTR_TENSOR_NAME_EXT, HIPDNN_TYPE_CHAR, (int64_t)strlen(name), name));
    CHECK(hipdnnBackendSetAttribute(*out, HIPDNN_ATTR_TENSOR_DATA_TYPE, HIPDNN_TYPE_DATA_TYPE, 1, &dt));
    CHECK(hipdnnBackendSetAttribute(*out, HIPDNN_ATTR_TENSOR_DIMENSIONS, HIPDNN_TYPE_INT64, 2, dims));
    CHECK(hipdnnBackendSetAttribute(*out, HIPDNN_ATTR_TENSOR_STRIDES, HIPDNN_TYPE_INT64, 2, strides));
    CHECK(hipdnnBackendSetAttribute(*out, HIPDNN_ATTR_TENSOR_IS_VIRTUAL, HIPDNN_TYPE_BOOLEAN, 1, &virt));
    CHECK(hipdnnBackendFinalize(*out));
    return 0;
}

typedef struct {
    hipdnnHandle_t h;
    int own_handle;
    D graph, plan, cfgs[8];
    int64_t ncfg;
    int mode; /* 0 ADD, 1 MUL, 2 RELU_FWD (y = max(x, 0)) */
} Plan;

/* §2.2–2.6 on handle `shared` (or on a new handle when NULL). */
static int build(hipdnnHandle_t shared, int mode, Plan* P)
{
    D t[3], op, heur;
    memset(P, 0, sizeof *P);
    P->mode = mode;
    if(shared) P->h = shared;
    else { CHECK(hipdnnCreate(&P->h)); P->own_handle = 1; }
    hipdnnHandle_t h = P->h;
    /* §2.2 */
    if(make_tensor(1, "x", &t[0]) || make_tensor(2, "b", &t[1]) || make_tensor(3, "y", &t[2])) return 1;
    hipdnnPointwiseMode_t pm = mode == 0 ? HIPDNN_POINTWISE_ADD : mode == 1 ? HIPDNN_POINTWISE_MUL : HIPDNN_POINTWISE_RELU_FWD;
    hipdnnDataType_t ct = HIPDNN_DATA_FLOAT;
    CHECK(hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, &op));
    CHECK(hipdnnBackendSetAttribute(op, HIPDNN_ATTR_OPERATION_POINTWISE_IN_0_EXT, HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t[0]));
    if(mode != 2)
        CHECK(hipdnnBackendSetAttribute(op, HIPDNN_ATTR_OPERATION_POINTWISE_IN_1_EXT, HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t[1]));
    CHECK(hipdnnBackendSetAttribute(op, HIPDNN_ATTR_OPERATION_POINTWISE_OUT_0_EXT, HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t[2]));
    CHECK(hipdnnBackendSetAttribute(op, HIPDNN_ATTR_POINTWISE_MODE, HIPDNN_TYPE_POINTWISE_MODE, 1, &pm));
    CHECK(hipdnnBackendSetAttribute(op, HIPDNN_ATTR_POINTWISE_MATH_PREC, HIPDNN_TYPE_DATA_TYPE, 1, &ct));
    CHECK(hipdnnBackendFinalize(op));
    bool ovr = false;
    D graph;
    CHECK(hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &graph));
    P->graph = graph;
    CHECK(hipdnnBackendSetAttribute(graph, HIPDNN_ATTR_OPERATIONGRAPH_OPS, HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, &op));
    CHECK(hipdnnBackendSetAttribute(graph, HIPDNN_ATTR_OPERATIONGRAPH_COMPUTE_DATA_TYPE_EXT, HIPDNN_TYPE_DATA_TYPE, 1, &ct));
    CHECK(hipdnnBackendSetAttribute(graph, HIPDNN_ATTR_OPERATIONGRAPH_IS_OVERRIDE_SHAPE_ENABLED_EXT, HIPDNN_TYPE_BOOLEAN, 1, &ovr));
    CHECK(hipdnnBackendSetAttribute(graph, HIPDNN_ATTR_OPERATIONGRAPH_HANDLE, HIPDNN_TYPE_HANDLE, 1, &h));
    CHECK(hipdnnBackendFinalize(graph));
    for(int i = 0; i < 3; i++) CHECK(hipdnnBackendDestroyDescriptor(t[i]));
    CHECK(hipdnnBackendDestroyDescriptor(op));
    /* §2.3 */
    hipdnnBackendHeurMode_t hm = HIPDNN_HEUR_MODE_FALLBACK;
    CHECK(hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur));
    CHECK(hipdnnBackendSetAttribute(heur, HIPDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph));
    CHECK(hipdnnBackendSetAttribute(heur, HIPDNN_ATTR_ENGINEHEUR_MODE, HIPDNN_TYPE_HEUR_MODE, 1, &hm));
    CHECK(hipdnnBackendFinalize(heur));
    int64_t count = 0, n = 0;
    CHECK(hipdnnBackendGetAttribute(heur, HIPDNN_ATTR_ENGINEHEUR_RESULTS, HIPDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, NULL));
    if(count < 1) { fprintf(stderr, "no engine configs\n"); return 1; }
    if(count > 8) count = 8;
    for(int64_t i = 0; i < count; i++) CHECK(hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_ENGINECFG_DESCRIPTOR, &P->cfgs[i]));
    P->ncfg = count;
    CHECK(hipdnnBackendGetAttribute(heur, HIPDNN_ATTR_ENGINEHEUR_RESULTS, HIPDNN_TYPE_BACKEND_DESCRIPTOR, count, &n, P->cfgs));
    if(n != count) { fprintf(stderr, "results %lld != %lld\n", (long long)n, (long long)count); return 1; }
    for(int64_t i = 0; i < n; i++) {
        D eng;
        int64_t eid = 0;
        CHECK(hipdnnBackendFinalize(P->cfgs[i]));
        CHECK(hipdnnBackendGetAttribute(P->cfgs[i], HIPDNN_ATTR_ENGINECFG_ENGINE, HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, NULL, &eng));
        CHECK(hipdnnBackendGetAttribute(eng, HIPDNN_ATTR_ENGINE_GLOBAL_INDEX, HIPDNN_TYPE_INT64, 1, NULL, &eid));
        CHECK(hipdnnBackendDestroyDescriptor(eng));
    }
    CHECK(hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &P->plan));
    CHECK(hipdnnBackendDestroyDescriptor(heur));
    /* §2.5, §2.6 */
    int64_t ws = -1;
    CHECK(hipdnnBackendSetAttribute(P->plan, HIPDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, &P->cfgs[0]));
    CHECK(hipdnnBackendFinalize(P->plan));
    CHECK(hipdnnBackendGetAttribute(P->plan, HIPDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, HIPDNN_TYPE_INT64, 1, NULL, &ws));
    if(ws != 0) { fprintf(stderr, "workspace %lld\n", (long long)ws); return 1; }
    return 0;
}

/* §2.7 with fresh buffers, `reps` executes of one variant pack, then the numbers. */
static int execute_check(const Plan* P, int seed, int reps)
{
    D vp;
    float* x = aligned_alloc(64, N * sizeof(float));
    float* b = aligned_alloc(64, N * sizeof(float));
    float* y = aligned_alloc(64, N * sizeof(float));
    void* work = NULL;
    for(int i = 0; i < N; i++) { x[i] = (float)(i + seed % 97 - 16); b[i] = (float)(2 * i - 5); y[i] = -1.0f; }
    void* ptrs[3] = {x, b, y};
    int64_t uids[3] = {1, 2, 3};
    int np = P->mode == 2 ? 2 : 3;
    if(np == 2) { ptrs[1] = y; uids[1] = 3; }
    CHECK(hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp));
    CHECK(hipdnnBackendSetAttribute(vp, HIPDNN_ATTR_VARIANT_PACK_DATA_POINTERS, HIPDNN_TYPE_VOID_PTR, np, ptrs));
    CHECK(hipdnnBackendSetAttribute(vp, HIPDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, HIPDNN_TYPE_INT64, np, uids));
    CHECK(hipdnnBackendSetAttribute(vp, HIPDNN_ATTR_VARIANT_PACK_WORKSPACE, HIPDNN_TYPE_VOID_PTR, 1, &work));
    CHECK(hipdnnBackendFinalize(vp));
    for(int r = 0; r < reps; r++) CHECK(hipdnnBackendExecute(P->h, P->plan, vp));
    CHECK(hipdnnBackendDestroyDescriptor(vp));
    for(int i = 0; i < N; i++) {
        float want = P->mode == 0 ? x[i] + b[i] : P->mode == 1 ? x[i] * b[i] : (x[i] > 0 ? x[i] : 0.0f);
        if(y[i] != want) { fprintf(stderr, "mode %d y[%d] = %g, want %g\n", P->mode, i, (double)y[i], (double)want); return 1; }
    }
    free(x); free(b); free(y);
    return 0;
}

static int teardown(Plan* P)
{
    CHECK(hipdnnBackendDestroyDescriptor(P->plan));
    for(int64_t i = 0; i < P->ncfg; i++) CHECK(hipdnnBackendDestroyDescriptor(P->cfgs[i]));
    CHECK(hipdnnBackendDestroyDescriptor(P->graph));
    if(P->own_handle) CHECK(hipdnnDestroy(P->h));
    return 0;
}

static int run_once(hipdnnHandle_t shared, int seed)
{
    Plan P;
    if(build(shared, seed % 3, &P) || execute_check(&P, seed, 2)) return 1;
    return teardown(&P);
}

static int g_iters = 1;
static double g_seconds = 0;
static hipdnnHandle_t g_shared; /* odd threads build on it too */
static Plan g_shared_plan;      /* built once; every thread executes it with its own buffers */
static long g_done[64];

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void* worker(void* arg)
{
    intptr_t k = (intptr_t)arg;
    double end = now() + g_seconds;
    for(int i = 0; g_seconds > 0 ? (i == 0 || now() < end) : i < g_iters; i++) {
        int seed = (int)k * 1000 + i;
        if(run_once(k % 2 ? g_shared : NULL, seed)) return (void*)1;
        if(execute_check(&g_shared_plan, seed, 1)) return (void*)1;
        g_done[k]++;
    }
    return NULL;
}

int main(int argc, char** argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 1;
    g_iters = argc > 2 ? atoi(argv[2]) : 1;
    g_seconds = argc > 3 ? atof(argv[3]) : 0;
    if(threads > 64) threads = 64;
    if(threads <= 1 && g_seconds <= 0) {
        for(int i = 0; i < g_iters; i++) if(run_once(NULL, i)) return 1;
        printf("OK %d\n", g_iters);
        return 0;
    }
    if(hipdnnCreate(&g_shared) != HIPDNN_STATUS_SUCCESS || build(g_shared, 0, &g_shared_plan)) return 1;
    pthread_t tid[64];
    for(intptr_t k = 0; k < threads; k++) pthread_create(&tid[k], NULL, worker, (void*)k);
    int bad = 0;
    long total = 0, least = -1;
    for(int k = 0; k < threads; k++) {
        void* r;
        pthread_join(tid[k], &r);
        bad |= r != NULL;
        total += g_done[k];
        if(least < 0 || g_done[k] < least) least = g_done[k];
    }
    if(bad || teardown(&g_shared_plan) || hipdnnDestroy(g_shared) != HIPDNN_STATUS_SUCCESS) return 1;
    printf("OK %ld min %ld\n", total, least);
    return 0;
}
