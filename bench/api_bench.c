/* Per-call cost of the backend's hot attribute paths vs. an empty C function (the C floor), and
 * the same calls from 1/2/4/8 C threads (aggregate calls per second).
 * Usage: api_bench <iterations>. Prints one JSON object. */
#define _POSIX_C_SOURCE 199309L
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "hipdnn_backend.h"

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

/* ---- threads: each thread its own descriptors; aggregate calls/s */
typedef struct { int kind; long n; } targ;
static void* tmain(void* a_)
{
    targ* a = (targ*)a_;
    int64_t v = 5, uids[3] = {1, 2, 3}, cnt = 0, out[3];
    hipdnnBackendDescriptor_t d;
    if (a->kind == 0) { /* TENSOR set (Python) */
        hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_TENSOR_DESCRIPTOR, &d);
        for (long i = 0; i < a->n; ++i)
            hipdnnBackendSetAttribute(d, HIPDNN_ATTR_TENSOR_UNIQUE_ID, HIPDNN_TYPE_INT64, 1, &v);
    } else if (a->kind == 1) { /* VARIANT_PACK set + get (C) */
        hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &d);
        hipdnnBackendSetAttribute(d, HIPDNN_ATTR_VARIANT_PACK_DATA_POINTERS, HIPDNN_TYPE_VOID_PTR, 3, (void**)uids);
        for (long i = 0; i < a->n; ++i)
            hipdnnBackendSetAttribute(d, HIPDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, HIPDNN_TYPE_INT64, 3, uids);
        hipdnnBackendFinalize(d);
        for (long i = 0; i < a->n; ++i)
            hipdnnBackendGetAttribute(d, HIPDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, HIPDNN_TYPE_INT64, 3, &cnt, out);
    } else { /* VARIANT_PACK create + destroy (C) */
        for (long i = 0; i < a->n; ++i) {
            hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &d);
            hipdnnBackendDestroyDescriptor(d);
        }
        return NULL;
    }
    hipdnnBackendDestroyDescriptor(d);
    return NULL;
}

static double threads_rate(int T, int kind, long n)
{
    pthread_t th[16];
    targ a[16];
    double t0 = now();
    for (int t = 0; t < T; ++t) {
        a[t] = (targ){kind, n};
        pthread_create(&th[t], NULL, tmain, &a[t]);
    }
    for (int t = 0; t < T; ++t)
        pthread_join(th[t], NULL);
    double calls = (double)T * n * (kind == 1 ? 2 : 1);
    return calls / (now() - t0);
}

int main(int argc, char** argv)
{
    long n = argc > 1 ? atol(argv[1]) : 20000;
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
    /* variant packs: C-resident (issue 15) */
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
        static const char* kinds[3] = {"tensor_set", "vp_set_get", "vp_create_destroy"};
        printf(", \"threads\": {");
        for (int k = 0; k < 3; ++k) {
            printf("%s\"%s_calls_per_s\": {", k ? ", " : "", kinds[k]);
            for (int T = 1; T <= 8; T *= 2) {
                double best = 0;
                for (int r = 0; r < 3; ++r) {
                    double x = threads_rate(T, k, k == 0 ? n / 4 : n);
                    if (x > best) best = x;
                }
                printf("%s\"%d\": %.0f", T > 1 ? ", " : "", T, best);
            }
            printf("}");
        }
        printf("}");
    }
    printf(", \"iterations\": %ld}\n", n);
    hipdnnBackendDestroyDescriptor(t);
    return 0;
}
