/* The frontend's call sequence (spec §2.2–2.7) through real descriptors, on the C sample plugin:
 * tensors → pointwise op → graph → heuristics → configs → plan → variant pack → execute.
 * Usage: pipeline [threads] [iterations]   (prints "OK <n>" on success; exit 1 on failure). */
#define _POSIX_C_SOURCE 200809L
#include <hipdnn_backend.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static int run_once(int seed)
{
    hipdnnHandle_t h;
    D t[3], op, graph, heur, plan, vp;
    CHECK(hipdnnCreate(&h));
    /* §2.2 */
    if(make_tensor(1, "x", &t[0]) || make_tensor(2, "b", &t[1]) || make_tensor(3, "y", &t[2])) return 1;
    hipdnnPointwiseMode_t mode = HIPDNN_POINTWISE_ADD;
    hipdnnDataType_t ct = HIPDNN_DATA_FLOAT;
    CHECK(hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, &op));
    CHECK(hipdnnBackendSetAttribute(op, HIPDNN_ATTR_OPERATION_POINTWISE_IN_0_EXT, HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t[0]));
    CHECK(hipdnnBackendSetAttribute(op, HIPDNN_ATTR_OPERATION_POINTWISE_IN_1_EXT, HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t[1]));
    CHECK(hipdnnBackendSetAttribute(op, HIPDNN_ATTR_OPERATION_POINTWISE_OUT_0_EXT, HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t[2]));
    CHECK(hipdnnBackendSetAttribute(op, HIPDNN_ATTR_POINTWISE_MODE, HIPDNN_TYPE_POINTWISE_MODE, 1, &mode));
    CHECK(hipdnnBackendSetAttribute(op, HIPDNN_ATTR_POINTWISE_MATH_PREC, HIPDNN_TYPE_DATA_TYPE, 1, &ct));
    CHECK(hipdnnBackendFinalize(op));
    bool ovr = false;
    CHECK(hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &graph));
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
    D cfgs[8];
    if(count > 8) count = 8;
    for(int64_t i = 0; i < count; i++) CHECK(hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfgs[i]));
    CHECK(hipdnnBackendGetAttribute(heur, HIPDNN_ATTR_ENGINEHEUR_RESULTS, HIPDNN_TYPE_BACKEND_DESCRIPTOR, count, &n, cfgs));
    if(n != count) { fprintf(stderr, "results %lld != %lld\n", (long long)n, (long long)count); return 1; }
    for(int64_t i = 0; i < n; i++) {
        D eng;
        int64_t eid = 0;
        CHECK(hipdnnBackendFinalize(cfgs[i]));
        CHECK(hipdnnBackendGetAttribute(cfgs[i], HIPDNN_ATTR_ENGINECFG_ENGINE, HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, NULL, &eng));
        CHECK(hipdnnBackendGetAttribute(eng, HIPDNN_ATTR_ENGINE_GLOBAL_INDEX, HIPDNN_TYPE_INT64, 1, NULL, &eid));
        CHECK(hipdnnBackendDestroyDescriptor(eng));
    }
    CHECK(hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan));
    CHECK(hipdnnBackendDestroyDescriptor(heur));
    /* §2.5, §2.6 */
    int64_t ws = -1;
    CHECK(hipdnnBackendSetAttribute(plan, HIPDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfgs[0]));
    CHECK(hipdnnBackendFinalize(plan));
    CHECK(hipdnnBackendGetAttribute(plan, HIPDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, HIPDNN_TYPE_INT64, 1, NULL, &ws));
    /* §2.7 */
    float* x = aligned_alloc(64, N * sizeof(float));
    float* b = aligned_alloc(64, N * sizeof(float));
    float* y = aligned_alloc(64, N * sizeof(float));
    void* work = ws > 0 ? aligned_alloc(64, (size_t)((ws + 63) / 64 * 64)) : NULL;
    for(int i = 0; i < N; i++) { x[i] = (float)(i + seed); b[i] = (float)(2 * i); y[i] = -1.0f; }
    void* ptrs[3] = {x, b, y};
    int64_t uids[3] = {1, 2, 3};
    CHECK(hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp));
    CHECK(hipdnnBackendSetAttribute(vp, HIPDNN_ATTR_VARIANT_PACK_DATA_POINTERS, HIPDNN_TYPE_VOID_PTR, 3, ptrs));
    CHECK(hipdnnBackendSetAttribute(vp, HIPDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, HIPDNN_TYPE_INT64, 3, uids));
    CHECK(hipdnnBackendSetAttribute(vp, HIPDNN_ATTR_VARIANT_PACK_WORKSPACE, HIPDNN_TYPE_VOID_PTR, 1, &work));
    CHECK(hipdnnBackendFinalize(vp));
    CHECK(hipdnnBackendExecute(h, plan, vp));
    CHECK(hipdnnBackendDestroyDescriptor(vp));
    for(int i = 0; i < N; i++)
        if(y[i] != (float)(3 * i + seed)) { fprintf(stderr, "y[%d] = %g\n", i, (double)y[i]); return 1; }
    free(x); free(b); free(y); free(work);
    CHECK(hipdnnBackendDestroyDescriptor(plan));
    for(int64_t i = 0; i < n; i++) CHECK(hipdnnBackendDestroyDescriptor(cfgs[i]));
    CHECK(hipdnnBackendDestroyDescriptor(graph));
    CHECK(hipdnnDestroy(h));
    return 0;
}

static int g_iters = 1;
static void* worker(void* arg)
{
    intptr_t k = (intptr_t)arg;
    for(int i = 0; i < g_iters; i++)
        if(run_once((int)k * 100 + i)) return (void*)1;
    return NULL;
}

int main(int argc, char** argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 1;
    g_iters = argc > 2 ? atoi(argv[2]) : 1;
    if(threads <= 1) {
        for(int i = 0; i < g_iters; i++) if(run_once(i)) return 1;
    } else {
        pthread_t tid[64];
        for(intptr_t k = 0; k < threads; k++) pthread_create(&tid[k], NULL, worker, (void*)k);
        int bad = 0;
        for(int k = 0; k < threads; k++) { void* r; pthread_join(tid[k], &r); bad |= r != NULL; }
        if(bad) return 1;
    }
    printf("OK %d\n", threads * g_iters);
    return 0;
}
