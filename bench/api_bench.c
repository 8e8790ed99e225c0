/* Per-call cost of the backend's hot attribute paths vs. an empty C function (the C floor), and
 * the same calls from 1/2/4/8 C threads (aggregate calls per second).
 * Usage: api_bench <iterations> [max threads: 8, at most 64]. Prints one JSON object. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "hipdnn_backend.h"
#include "bench_threads.h"

__attribute__((noinline)) hipdnnStatus_t empty_fn(hipdnnBackendDescriptor_t d, int64_t* x)
{
    __asm__ volatile("" : : "r"(d), "r"(x) : "memory");
    return HIPDNN_STATUS_SUCCESS;
}
static hipdnnStatus_t (*volatile g_empty)(hipdnnBackendDescriptor_t, int64_t*) = empty_fn;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static const char* g_only; /* API_BENCH_ONLY=<label>: run just that loop once (for callgrind) */
#define TIME(label, body)                                                     \
    do {                                                                      \
        if (g_only && strcmp(g_only, label) != 0) break;                      \
        if (g_only) { for (long i = 0; i < n; ++i) { body; } break; }        \
        double best = 1e30;                                                   \
        for (int r = 0; r < 5; ++r) {                                         \
            double t0 = now();                                                \
            for (long i = 0; i < n; ++i) { body; }                            \
            double dt = (now() - t0) / n * 1e9;                               \
            if (dt < best) best = dt;                                         \
        }                                                                     \
        printf("%s\"%s\": %.1f", first ? "" : ", ", label, best);             \
        first = 0;                                                            \
    } while (0)

/* ---- threads: each thread its own descriptors; aggregate calls/s over one window
 * (bench_threads.h: pinned threads, a barrier, chunks until the stop flag).  The C floor (an
 * empty call through a function pointer) is measured the same way in the same run, so its
 * scaling shows what the machine itself allows (2 shared cores here). */
enum { K_FLOOR, K_TENSOR_SET_GET, K_TENSOR_CREATE_DESTROY, K_VP_SET_GET, K_VP_CREATE_DESTROY, K_COUNT };
static const char* k_names[K_COUNT] = {"c_floor", "tensor_set_get", "tensor_create_destroy", "vp_set_get",
                                       "vp_create_destroy"};
static const int k_calls[K_COUNT] = {1, 2, 2, 2, 2}; /* API calls per loop iteration */
/* each thread's argument block on cache lines of its own */
typedef struct { int kind; bt_clock clk; } __attribute__((aligned(128))) targ;
static void* tmain(void* a_)
{
    targ* a = (targ*)a_;
    int64_t v = 5, uids[3] = {1, 2, 3}, cnt = 0, out[3], dims[4] = {1, 2, 3, 4};
    hipdnnBackendDescriptor_t d = NULL;
    hipdnnDataType_t dt = HIPDNN_DATA_FLOAT;
    if (a->kind == K_TENSOR_SET_GET) {
        hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_TENSOR_DESCRIPTOR, &d);
        hipdnnBackendSetAttribute(d, HIPDNN_ATTR_TENSOR_DATA_TYPE, HIPDNN_TYPE_DATA_TYPE, 1, &dt);
        hipdnnBackendSetAttribute(d, HIPDNN_ATTR_TENSOR_DIMENSIONS, HIPDNN_TYPE_INT64, 4, dims);
        hipdnnBackendSetAttribute(d, HIPDNN_ATTR_TENSOR_STRIDES, HIPDNN_TYPE_INT64, 4, dims);
        hipdnnBackendSetAttribute(d, HIPDNN_ATTR_TENSOR_UNIQUE_ID, HIPDNN_TYPE_INT64, 1, &v);
        hipdnnBackendFinalize(d);
    } else if (a->kind == K_VP_SET_GET) {
        hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &d);
        hipdnnBackendSetAttribute(d, HIPDNN_ATTR_VARIANT_PACK_DATA_POINTERS, HIPDNN_TYPE_VOID_PTR, 3, (void**)uids);
        hipdnnBackendSetAttribute(d, HIPDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, HIPDNN_TYPE_INT64, 3, uids);
        hipdnnBackendFinalize(d);
    }
    hipdnnBackendDescriptor_t t2 = NULL;
    if (a->kind == K_TENSOR_SET_GET) /* an unfinalized one for the sets */
        hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_TENSOR_DESCRIPTOR, &t2);
    else if (a->kind == K_VP_SET_GET)
        hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &t2);
    const long n = a->clk.chunk;
    bt_begin(&a->clk);
    do switch (a->kind) {
    case K_FLOOR:
        for (long i = 0; i < n; ++i)
            g_empty(d, &v);
        break;
    case K_TENSOR_SET_GET:
        for (long i = 0; i < n; ++i) {
            hipdnnBackendSetAttribute(t2, HIPDNN_ATTR_TENSOR_UNIQUE_ID, HIPDNN_TYPE_INT64, 1, &v);
            hipdnnBackendGetAttribute(d, HIPDNN_ATTR_TENSOR_DIMENSIONS, HIPDNN_TYPE_INT64, 3, &cnt, out);
        }
        break;
    case K_TENSOR_CREATE_DESTROY:
        for (long i = 0; i < n; ++i) {
            hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_TENSOR_DESCRIPTOR, &d);
            hipdnnBackendDestroyDescriptor(d);
        }
        d = NULL;
        break;
    case K_VP_SET_GET:
        for (long i = 0; i < n; ++i) {
            hipdnnBackendSetAttribute(t2, HIPDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, HIPDNN_TYPE_INT64, 3, uids);
            hipdnnBackendGetAttribute(d, HIPDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, HIPDNN_TYPE_INT64, 3, &cnt, out);
        }
        break;
    case K_VP_CREATE_DESTROY:
        for (long i = 0; i < n; ++i) {
            hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &d);
            hipdnnBackendDestroyDescriptor(d);
        }
        d = NULL;
        break;
    } while (bt_more(&a->clk));
    if (d != NULL && a->kind != K_FLOOR)
        hipdnnBackendDestroyDescriptor(d);
    if (t2 != NULL)
        hipdnnBackendDestroyDescriptor(t2);
    return NULL;
}

/* calls/s of T threads running `kind` for `window` seconds, in chunks of `chunk` iterations */
static double threads_rate(int T, int kind, long chunk, double window)
{
    static targ a[64];
    for (int t = 0; t < T; ++t)
        a[t] = (targ){.kind = kind, .clk = {.chunk = chunk}};
    return bt_window(T, tmain, a, sizeof a[0], offsetof(targ, clk), window) * k_calls[kind];
}

int main(int argc, char** argv)
{
    long n = argc > 1 ? atol(argv[1]) : 20000;
    int tmax = argc > 2 ? atoi(argv[2]) : 8;
    if (tmax < 1 || tmax > 64)
        tmax = 8;
    g_only = getenv("API_BENCH_ONLY");
    int first = 1;
    hipdnnBackendDescriptor_t t = NULL;
    hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_TENSOR_DESCRIPTOR, &t); /* warm up Python */
    int64_t v = 5, vec[8] = {1, 2, 3, 4, 5, 6, 7, 8}, cnt = 0, out[8];
    hipdnnDataType_t dt = HIPDNN_DATA_FLOAT;
    hipdnnBackendSetAttribute(t, HIPDNN_ATTR_TENSOR_DATA_TYPE, HIPDNN_TYPE_DATA_TYPE, 1, &dt);
    printf("{");
    TIME("c_floor_ns", g_empty(t, &v));
    TIME("create_destroy_ns", {
        hipdnnBackendDescriptor_t d;
        hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_TENSOR_DESCRIPTOR, &d);
        hipdnnBackendDestroyDescriptor(d);
    });
    TIME("set_int64_scalar_ns", hipdnnBackendSetAttribute(t, HIPDNN_ATTR_TENSOR_UNIQUE_ID, HIPDNN_TYPE_INT64, 1, &v));
    TIME("set_int64_x8_ns", hipdnnBackendSetAttribute(t, HIPDNN_ATTR_TENSOR_DIMENSIONS, HIPDNN_TYPE_INT64, 8, vec));
    hipdnnBackendSetAttribute(t, HIPDNN_ATTR_TENSOR_STRIDES, HIPDNN_TYPE_INT64, 8, vec);
    hipdnnBackendFinalize(t);
    TIME("get_size_query_ns", hipdnnBackendGetAttribute(t, HIPDNN_ATTR_TENSOR_DIMENSIONS, HIPDNN_TYPE_INT64, 0, &cnt, NULL));
    TIME("get_fetch_x8_ns", hipdnnBackendGetAttribute(t, HIPDNN_ATTR_TENSOR_DIMENSIONS, HIPDNN_TYPE_INT64, 8, &cnt, out));
    TIME("get_int64_scalar_ns", hipdnnBackendGetAttribute(t, HIPDNN_ATTR_TENSOR_UNIQUE_ID, HIPDNN_TYPE_INT64, 1, &cnt, &v));
    /* operation descriptors: C-resident, plain attributes in C */
    hipdnnPointwiseMode_t pm = HIPDNN_POINTWISE_RELU_FWD;
    double clip = 0.25;
    int64_t dil[2] = {1, 1};
    TIME("op_create_destroy_ns", {
        hipdnnBackendDescriptor_t d;
        hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, &d);
        hipdnnBackendDestroyDescriptor(d);
    });
    hipdnnBackendDescriptor_t op, cv, ty;
    hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, &op);
    hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR, &cv);
    TIME("op_set_enum_ns", hipdnnBackendSetAttribute(op, HIPDNN_ATTR_POINTWISE_MODE, HIPDNN_TYPE_POINTWISE_MODE, 1, &pm));
    TIME("op_set_double_ns", hipdnnBackendSetAttribute(op, HIPDNN_ATTR_POINTWISE_RELU_LOWER_CLIP, HIPDNN_TYPE_DOUBLE, 1, &clip));
    TIME("op_set_i64vec_ns", hipdnnBackendSetAttribute(cv, HIPDNN_ATTR_CONVOLUTION_DILATIONS, HIPDNN_TYPE_INT64, 2, dil));
    hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_TENSOR_DESCRIPTOR, &ty);
    hipdnnBackendSetAttribute(ty, HIPDNN_ATTR_TENSOR_DATA_TYPE, HIPDNN_TYPE_DATA_TYPE, 1, &dt);
    hipdnnBackendSetAttribute(ty, HIPDNN_ATTR_TENSOR_DIMENSIONS, HIPDNN_TYPE_INT64, 8, vec);
    hipdnnBackendSetAttribute(ty, HIPDNN_ATTR_TENSOR_STRIDES, HIPDNN_TYPE_INT64, 8, vec);
    hipdnnBackendSetAttribute(ty, HIPDNN_ATTR_TENSOR_UNIQUE_ID, HIPDNN_TYPE_INT64, 1, &v);
    hipdnnBackendFinalize(ty);
    hipdnnBackendSetAttribute(op, HIPDNN_ATTR_OPERATION_POINTWISE_IN_0_EXT, HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t);
    hipdnnBackendSetAttribute(op, HIPDNN_ATTR_OPERATION_POINTWISE_OUT_0_EXT, HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, &ty);
    if (hipdnnBackendFinalize(op) != HIPDNN_STATUS_SUCCESS)
        fprintf(stderr, "api_bench: the pointwise op did not finalize\n");
    TIME("op_get_enum_ns", hipdnnBackendGetAttribute(op, HIPDNN_ATTR_POINTWISE_MODE, HIPDNN_TYPE_POINTWISE_MODE, 1, &cnt, &pm));
    TIME("op_get_double_ns", hipdnnBackendGetAttribute(op, HIPDNN_ATTR_POINTWISE_RELU_LOWER_CLIP, HIPDNN_TYPE_DOUBLE, 1, &cnt, &clip));
    hipdnnBackendDestroyDescriptor(op);
    hipdnnBackendDestroyDescriptor(cv);
    hipdnnBackendDestroyDescriptor(ty);
    /* variant packs: C-resident */
    hipdnnBackendDescriptor_t vp;
    int64_t uids[3] = {1, 2, 3};
    void* ptrs[3] = {(void*)16, (void*)32, (void*)48};
    void* ws = NULL;
    TIME("vp_create_destroy_ns", {
        hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp);
        hipdnnBackendDestroyDescriptor(vp);
    });
    hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp);
    TIME("vp_set_x3_ns", hipdnnBackendSetAttribute(vp, HIPDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, HIPDNN_TYPE_INT64, 3, uids));
    hipdnnBackendSetAttribute(vp, HIPDNN_ATTR_VARIANT_PACK_DATA_POINTERS, HIPDNN_TYPE_VOID_PTR, 3, ptrs);
    hipdnnBackendFinalize(vp);
    TIME("vp_get_x3_ns", hipdnnBackendGetAttribute(vp, HIPDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, HIPDNN_TYPE_INT64, 3, &cnt, out));
    hipdnnBackendDestroyDescriptor(vp);
    TIME("vp_frontend_cycle_ns", { /* create, 3 sets, finalize, destroy (no execute) */
        hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp);
        hipdnnBackendSetAttribute(vp, HIPDNN_ATTR_VARIANT_PACK_DATA_POINTERS, HIPDNN_TYPE_VOID_PTR, 3, ptrs);
        hipdnnBackendSetAttribute(vp, HIPDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, HIPDNN_TYPE_INT64, 3, uids);
        hipdnnBackendSetAttribute(vp, HIPDNN_ATTR_VARIANT_PACK_WORKSPACE, HIPDNN_TYPE_VOID_PTR, 1, &ws);
        hipdnnBackendFinalize(vp);
        hipdnnBackendDestroyDescriptor(vp);
    });
    if (!g_only) {
        /* windows of 50 ms, chunks of ~0.1 ms (sized from a one-thread window); the thread counts
         * interleaved (1, 2, 4, ... then again, 7 passes) so that the machine's drift (other
         * tenants of a shared VM) reaches every count alike; the best window of each count */
        printf(", \"threads\": {");
        for (int k = 0; k < K_COUNT; ++k) {
            double r1 = threads_rate(1, k, 256, 0.02);
            long chunk = (long)(1e-4 * r1 / k_calls[k]);
            if (chunk < 16) chunk = 16;
            double best[8] = {0};
            for (int r = 0; r < 7; ++r)
                for (int T = 1, i = 0; T <= tmax && i < 8; T *= 2, ++i) {
                    double x = threads_rate(T, k, chunk, 0.05);
                    if (x > best[i]) best[i] = x;
                }
            printf("%s\"%s_calls_per_s\": {", k ? ", " : "", k_names[k]);
            for (int T = 1, i = 0; T <= tmax && i < 8; T *= 2, ++i)
                printf("%s\"%d\": %.0f", T > 1 ? ", " : "", T, best[i]);
            printf("}");
        }
        printf("}");
    }
    printf(", \"iterations\": %ld}\n", n);
    hipdnnBackendDestroyDescriptor(t);
    return 0;
}
