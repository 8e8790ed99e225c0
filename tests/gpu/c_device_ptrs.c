/* A C program on libhipdnn_backend.so with DEVICE pointers (cudaMalloc): y = relu(x + b),
 * b broadcast over rows; the handle's stream is a cudaStream_t given to hipdnnSetStream.
 * Then a host (malloc) pointer must fail with an error naming its uid.
 * Usage: c_device_ptrs [iters]   -> prints "OK" and, with iters, "execute_us <per call>" (one
 * reused variant pack) and "frontend_execute_us <per call>" (a new pack per call): the median
 * of five rounds of iters / 5 calls. */
#define _POSIX_C_SOURCE 200809L
#include "../c_testlib.h"
#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ROWS 256
#define COLS 4096
#define CU(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { fprintf(stderr, "%s -> %s\n", #call, cudaGetErrorString(e_)); exit(1); } } while (0)
typedef hipdnnBackendDescriptor_t D;

static D tensor(int64_t uid, int64_t r, int64_t c, bool virt)
{
    int64_t dims[2] = {r, c}, strides[2] = {c, 1};
    return hdt_tensor(uid, NULL, HIPDNN_DATA_FLOAT, 2, dims, strides, virt);
}
#define pointwise hdt_pointwise

static D make_vp(void** ptrs, int64_t* uids, int n, void* ws)
{
    D vp;
    CHECK(hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp));
    CHECK(hipdnnBackendSetAttribute(vp, HIPDNN_ATTR_VARIANT_PACK_DATA_POINTERS, HIPDNN_TYPE_VOID_PTR, n, ptrs));
    CHECK(hipdnnBackendSetAttribute(vp, HIPDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, HIPDNN_TYPE_INT64, n, uids));
    CHECK(hipdnnBackendSetAttribute(vp, HIPDNN_ATTR_VARIANT_PACK_WORKSPACE, HIPDNN_TYPE_VOID_PTR, 1, &ws));
    CHECK(hipdnnBackendFinalize(vp));
    return vp;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

static int cmp_d(const void* a, const void* b)
{
    double x = *(const double*)a, y = *(const double*)b;
    return (x > y) - (x < y);
}

static double median5(double* v)
{
    qsort(v, 5, sizeof v[0], cmp_d);
    return v[2];
}

int main(int argc, char** argv)
{
    int iters = argc > 1 ? atoi(argv[1]) : 0;
    hipdnnHandle_t h;
    CHECK(hipdnnCreate(&h));
    cudaStream_t stream;
    CU(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    CHECK(hipdnnSetStream(h, (hipStream_t)stream));
    D x = tensor(1, ROWS, COLS, false), b = tensor(2, 1, COLS, false), v = tensor(3, ROWS, COLS, true),
      y = tensor(4, ROWS, COLS, false);
    D add = pointwise(HIPDNN_POINTWISE_ADD, x, b, v), relu = pointwise(HIPDNN_POINTWISE_RELU_FWD, v, NULL, y);
    D ops[2] = {add, relu}, graph, heur, plan, cfg;
    hipdnnDataType_t ct = HIPDNN_DATA_FLOAT;
    bool ovr = false;
    CHECK(hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &graph));
    CHECK(hipdnnBackendSetAttribute(graph, HIPDNN_ATTR_OPERATIONGRAPH_OPS, HIPDNN_TYPE_BACKEND_DESCRIPTOR, 2, ops));
    CHECK(hipdnnBackendSetAttribute(graph, HIPDNN_ATTR_OPERATIONGRAPH_COMPUTE_DATA_TYPE_EXT, HIPDNN_TYPE_DATA_TYPE, 1, &ct));
    CHECK(hipdnnBackendSetAttribute(graph, HIPDNN_ATTR_OPERATIONGRAPH_IS_OVERRIDE_SHAPE_ENABLED_EXT, HIPDNN_TYPE_BOOLEAN, 1, &ovr));
    CHECK(hipdnnBackendSetAttribute(graph, HIPDNN_ATTR_OPERATIONGRAPH_HANDLE, HIPDNN_TYPE_HANDLE, 1, &h));
    CHECK(hipdnnBackendFinalize(graph));
    hipdnnBackendHeurMode_t hm = HIPDNN_HEUR_MODE_FALLBACK;
    CHECK(hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur));
    CHECK(hipdnnBackendSetAttribute(heur, HIPDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph));
    CHECK(hipdnnBackendSetAttribute(heur, HIPDNN_ATTR_ENGINEHEUR_MODE, HIPDNN_TYPE_HEUR_MODE, 1, &hm));
    CHECK(hipdnnBackendFinalize(heur));
    int64_t n = 0;
    CHECK(hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfg));
    CHECK(hipdnnBackendGetAttribute(heur, HIPDNN_ATTR_ENGINEHEUR_RESULTS, HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &cfg));
    if (n < 1) { fprintf(stderr, "no engine config\n"); return 1; }
    CHECK(hipdnnBackendFinalize(cfg));
    CHECK(hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan));
    CHECK(hipdnnBackendSetAttribute(plan, HIPDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg));
    CHECK(hipdnnBackendFinalize(plan));
    int64_t wsz = 0;
    CHECK(hipdnnBackendGetAttribute(plan, HIPDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, HIPDNN_TYPE_INT64, 1, NULL, &wsz));

    size_t nb = (size_t)ROWS * COLS * sizeof(float);
    float *hx = malloc(nb), *hb = malloc(COLS * sizeof(float)), *hy = malloc(nb);
    for (int i = 0; i < ROWS * COLS; i++) hx[i] = (float)((int)(((long long)i * 7919) % 2001) - 1000) / 250.0f;
    for (int j = 0; j < COLS; j++) hb[j] = (float)(j % 17 - 8) / 4.0f;
    float *dx, *db, *dy;
    void* dws = NULL;
    CU(cudaMalloc((void**)&dx, nb)); CU(cudaMalloc((void**)&db, COLS * sizeof(float))); CU(cudaMalloc((void**)&dy, nb));
    if (wsz > 0) CU(cudaMalloc(&dws, (size_t)wsz));
    CU(cudaMemcpy(dx, hx, nb, cudaMemcpyHostToDevice));
    CU(cudaMemcpy(db, hb, COLS * sizeof(float), cudaMemcpyHostToDevice));
    CU(cudaMemset(dy, 0xFF, nb));
    void* ptrs[3] = {dx, db, dy};
    int64_t uids[3] = {1, 2, 4};
    D vp = make_vp(ptrs, uids, 3, dws);
    CHECK(hipdnnBackendExecute(h, plan, vp));
    CU(cudaStreamSynchronize(stream));
    CU(cudaMemcpy(hy, dy, nb, cudaMemcpyDeviceToHost));
    for (int i = 0; i < ROWS * COLS; i++) {
        float r = hx[i] + hb[i % COLS];
        r = r > 0 ? r : 0;
        if (hy[i] != r) { fprintf(stderr, "y[%d] = %g, expected %g\n", i, (double)hy[i], (double)r); return 1; }
    }
    /* host memory for uid 1 must be refused, naming the uid */
    void* bad[3] = {hx, db, dy};
    D vp2 = make_vp(bad, uids, 3, dws);
    hipdnnStatus_t st = hipdnnBackendExecute(h, plan, vp2);
    char msg[2048] = {0};
    hipdnnGetLastErrorString(msg, sizeof msg);
    int pageable = 0;
    CU(cudaDeviceGetAttribute(&pageable, cudaDevAttrPageableMemoryAccess, 0));
    if (!pageable && (st == HIPDNN_STATUS_SUCCESS || strstr(msg, "uid 1") == NULL)) {
        fprintf(stderr, "host pointer not refused: status %d, msg '%s'\n", (int)st, msg);
        return 1;
    }
    printf("host pointer: status %d (pageable access %d): %s\n", (int)st, pageable, msg);
    if (iters > 0) {
        /* five rounds of iters / 5 calls each, the reused pack and then a new pack per call
         * (frontend-style, as hipDNN's C++ frontend does); the median round of each, as the
         * Python side times its bare launch (bench/gpu_bench.py per_call) */
        enum { ROUNDS = 5 };
        int n = iters / ROUNDS > 0 ? iters / ROUNDS : 1;
        double reused[ROUNDS], fresh[ROUNDS];
        for (int i = 0; i < 100; i++) CHECK(hipdnnBackendExecute(h, plan, vp));
        CU(cudaStreamSynchronize(stream));
        for (int r = 0; r < ROUNDS; r++) {
            double t0 = now_s();
            for (int i = 0; i < n; i++) CHECK(hipdnnBackendExecute(h, plan, vp));
            reused[r] = (now_s() - t0) * 1e6 / n;
            CU(cudaStreamSynchronize(stream));
            t0 = now_s();
            for (int i = 0; i < n; i++) {
                D fvp = make_vp(ptrs, uids, 3, dws);
                CHECK(hipdnnBackendExecute(h, plan, fvp));
                CHECK(hipdnnBackendDestroyDescriptor(fvp));
            }
            fresh[r] = (now_s() - t0) * 1e6 / n;
            CU(cudaStreamSynchronize(stream));
        }
        printf("execute_us %.3f\n", median5(reused));
        printf("frontend_execute_us %.3f\n", median5(fresh));
    }
    CHECK(hipdnnBackendDestroyDescriptor(vp));
    CHECK(hipdnnBackendDestroyDescriptor(vp2));
    CHECK(hipdnnBackendDestroyDescriptor(plan));
    CHECK(hipdnnBackendDestroyDescriptor(cfg));
    CHECK(hipdnnBackendDestroyDescriptor(heur));
    CHECK(hipdnnBackendDestroyDescriptor(graph));
    CHECK(hipdnnDestroy(h));
    printf("OK\n");
    return 0;
}
