/* Per-call cost of the backend's hot attribute paths vs. an empty C function (the C floor).
 * Usage: api_bench <iterations>. Prints one JSON object. */
#define _POSIX_C_SOURCE 199309L
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
    printf(", \"iterations\": %ld}\n", n);
    hipdnnBackendDestroyDescriptor(t);
    return 0;
}
