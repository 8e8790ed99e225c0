/* N threads hammer create/set/get/finalize/destroy on their own descriptors (and read one shared
 * descriptor); prints a transcript checksum that must not depend on the number of threads. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include "hipdnn_backend.h"

static hipdnnBackendDescriptor_t g_shared;
static int g_iters = 300;

static void* worker(void* arg)
{
    intptr_t id = (intptr_t)arg;
    long bad = 0;
    for (int i = 0; i < g_iters; ++i) {
        hipdnnBackendDescriptor_t t = NULL;
        if (hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_TENSOR_DESCRIPTOR, &t) != 0) { ++bad; continue; }
        int64_t uid = id * 100000 + i, dims[3] = {id + 1, i + 1, 3}, strides[3] = {3 * (i + 1), 3, 1};
        hipdnnDataType_t dt = HIPDNN_DATA_HALF;
        bad += hipdnnBackendSetAttribute(t, HIPDNN_ATTR_TENSOR_UNIQUE_ID, HIPDNN_TYPE_INT64, 1, &uid) != 0;
        bad += hipdnnBackendSetAttribute(t, HIPDNN_ATTR_TENSOR_DATA_TYPE, HIPDNN_TYPE_DATA_TYPE, 1, &dt) != 0;
        bad += hipdnnBackendSetAttribute(t, HIPDNN_ATTR_TENSOR_DIMENSIONS, HIPDNN_TYPE_INT64, 3, dims) != 0;
        bad += hipdnnBackendSetAttribute(t, HIPDNN_ATTR_TENSOR_STRIDES, HIPDNN_TYPE_INT64, 3, strides) != 0;
        bad += hipdnnBackendFinalize(t) != 0;
        int64_t n = 0, got[3] = {0}, guid = 0;
        bad += hipdnnBackendGetAttribute(t, HIPDNN_ATTR_TENSOR_DIMENSIONS, HIPDNN_TYPE_INT64, 3, &n, got) != 0;
        bad += hipdnnBackendGetAttribute(t, HIPDNN_ATTR_TENSOR_UNIQUE_ID, HIPDNN_TYPE_INT64, 1, &n, &guid) != 0;
        bad += (got[0] != dims[0] || got[1] != dims[1] || got[2] != 3 || guid != uid);
        bad += hipdnnBackendGetAttribute(g_shared, HIPDNN_ATTR_TENSOR_UNIQUE_ID, HIPDNN_TYPE_INT64, 1, &n, &guid) != 0;
        bad += guid != 777;
        /* a misuse must fail with the right status in this thread only */
        bad += hipdnnBackendSetAttribute(t, HIPDNN_ATTR_TENSOR_UNIQUE_ID, HIPDNN_TYPE_INT64, 1, &uid)
               != HIPDNN_STATUS_NOT_INITIALIZED;
        bad += hipdnnBackendDestroyDescriptor(t) != 0;
    }
    return (void*)bad;
}

int main(int argc, char** argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 8;
    if (argc > 2)
        g_iters = atoi(argv[2]);
    hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_TENSOR_DESCRIPTOR, &g_shared);
    int64_t uid = 777, one = 1;
    hipdnnDataType_t dt = HIPDNN_DATA_FLOAT;
    hipdnnBackendSetAttribute(g_shared, HIPDNN_ATTR_TENSOR_UNIQUE_ID, HIPDNN_TYPE_INT64, 1, &uid);
    hipdnnBackendSetAttribute(g_shared, HIPDNN_ATTR_TENSOR_DATA_TYPE, HIPDNN_TYPE_DATA_TYPE, 1, &dt);
    hipdnnBackendSetAttribute(g_shared, HIPDNN_ATTR_TENSOR_DIMENSIONS, HIPDNN_TYPE_INT64, 1, &one);
    hipdnnBackendSetAttribute(g_shared, HIPDNN_ATTR_TENSOR_STRIDES, HIPDNN_TYPE_INT64, 1, &one);
    hipdnnBackendFinalize(g_shared);
    pthread_t th[64];
    for (intptr_t i = 0; i < n; ++i)
        pthread_create(&th[i], NULL, worker, (void*)i);
    long bad = 0;
    for (int i = 0; i < n; ++i) {
        void* r;
        pthread_join(th[i], &r);
        bad += (long)r;
    }
    printf("threads=%d iterations=%d bad=%ld\n", n, g_iters, bad);
    return bad != 0;
}
