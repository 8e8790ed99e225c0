/* The smallest real use of libhipdnn_backend.so: a handle and a finalized tensor descriptor. */
#include <stdio.h>
#include <string.h>
#include "hipdnn_backend.h"

#define CHECK(call)                                                                    \
    do {                                                                               \
        hipdnnStatus_t s_ = (call);                                                    \
        if (s_ != HIPDNN_STATUS_SUCCESS) {                                             \
            char msg_[HIPDNN_ERROR_STRING_MAX_LENGTH];                                 \
            hipdnnGetLastErrorString(msg_, sizeof msg_);                               \
            fprintf(stderr, "%s failed: %s (%s)\n", #call, hipdnnGetErrorString(s_), msg_); \
            return 1;                                                                  \
        }                                                                              \
    } while (0)

int main(void)
{
    printf("hipDNN backend %s\n", hipdnnVersionString_ext());
    hipdnnHandle_t handle = NULL;
    CHECK(hipdnnCreate(&handle));
    printf("created handle %p\n", (void*)handle);

    hipdnnBackendDescriptor_t t = NULL;
    CHECK(hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_TENSOR_DESCRIPTOR, &t));
    int64_t uid = 7, dims[4] = {8, 64, 56, 56}, strides[4] = {64 * 56 * 56, 1, 64 * 56, 64};
    hipdnnDataType_t dt = HIPDNN_DATA_FLOAT;
    CHECK(hipdnnBackendSetAttribute(t, HIPDNN_ATTR_TENSOR_UNIQUE_ID, HIPDNN_TYPE_INT64, 1, &uid));
    CHECK(hipdnnBackendSetAttribute(t, HIPDNN_ATTR_TENSOR_NAME_EXT, HIPDNN_TYPE_CHAR, 1, "x"));
    CHECK(hipdnnBackendSetAttribute(t, HIPDNN_ATTR_TENSOR_DATA_TYPE, HIPDNN_TYPE_DATA_TYPE, 1, &dt));
    CHECK(hipdnnBackendSetAttribute(t, HIPDNN_ATTR_TENSOR_DIMENSIONS, HIPDNN_TYPE_INT64, 4, dims));
    CHECK(hipdnnBackendSetAttribute(t, HIPDNN_ATTR_TENSOR_STRIDES, HIPDNN_TYPE_INT64, 4, strides));
    CHECK(hipdnnBackendFinalize(t));

    int64_t n = 0, got[4] = {0};
    CHECK(hipdnnBackendGetAttribute(t, HIPDNN_ATTR_TENSOR_DIMENSIONS, HIPDNN_TYPE_INT64, 0, &n, NULL));
    CHECK(hipdnnBackendGetAttribute(t, HIPDNN_ATTR_TENSOR_DIMENSIONS, HIPDNN_TYPE_INT64, n, &n, got));
    char name[16];
    int64_t len = 0;
    CHECK(hipdnnBackendGetAttribute(t, HIPDNN_ATTR_TENSOR_NAME_EXT, HIPDNN_TYPE_CHAR, sizeof name, &len, name));
    printf("tensor '%s' uid %lld: dims [%lld, %lld, %lld, %lld] (NHWC strides)\n", name, (long long)uid,
           (long long)got[0], (long long)got[1], (long long)got[2], (long long)got[3]);

    /* A misuse, to show the error path: setting after finalize. */
    hipdnnStatus_t s = hipdnnBackendSetAttribute(t, HIPDNN_ATTR_TENSOR_UNIQUE_ID, HIPDNN_TYPE_INT64, 1, &uid);
    char msg[HIPDNN_ERROR_STRING_MAX_LENGTH];
    hipdnnGetLastErrorString(msg, sizeof msg);
    printf("set after finalize -> %s: %s\n", hipdnnGetErrorString(s), msg);

    CHECK(hipdnnBackendDestroyDescriptor(t));
    CHECK(hipdnnDestroy(handle));
    printf("OK\n");
    return s == HIPDNN_STATUS_NOT_INITIALIZED ? 0 : 1;
}
