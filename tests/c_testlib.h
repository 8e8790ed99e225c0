/* Shared by the C test programs under tests/ (include as "../c_testlib.h"): a status check that
 * prints the backend's last error and exits 1, and builders for the descriptors most tests need
 * (a finalized FLOAT-or-other tensor of any rank, a finalized pointwise operation). */
#ifndef HIPDNN_CABI_TESTS_C_TESTLIB_H
#define HIPDNN_CABI_TESTS_C_TESTLIB_H

#include <hipdnn_backend.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call)                                                                          \
    do {                                                                                     \
        hipdnnStatus_t s_ = (call);                                                          \
        if (s_ != HIPDNN_STATUS_SUCCESS) {                                                   \
            char m_[2048] = {0};                                                             \
            hipdnnGetLastErrorString(m_, sizeof m_);                                         \
            fprintf(stderr, "%s:%d %s -> %d: %s\n", __FILE__, __LINE__, #call, (int)s_, m_); \
            exit(1);                                                                         \
        }                                                                                    \
    } while (0)

/* A finalized tensor: uid, data type, rank n with dims/strides, virtual flag; name may be NULL. */
static inline hipdnnBackendDescriptor_t hdt_tensor(int64_t uid, const char* name, hipdnnDataType_t dt,
                                                   int64_t n, const int64_t* dims,
                                                   const int64_t* strides, bool virt)
{
    hipdnnBackendDescriptor_t t = NULL;
    CHECK(hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_TENSOR_DESCRIPTOR, &t));
    CHECK(hipdnnBackendSetAttribute(t, HIPDNN_ATTR_TENSOR_UNIQUE_ID, HIPDNN_TYPE_INT64, 1, &uid));
    if (name && name[0])
        CHECK(hipdnnBackendSetAttribute(t, HIPDNN_ATTR_TENSOR_NAME_EXT, HIPDNN_TYPE_CHAR,
                                        (int64_t)strlen(name), name));
    CHECK(hipdnnBackendSetAttribute(t, HIPDNN_ATTR_TENSOR_DATA_TYPE, HIPDNN_TYPE_DATA_TYPE, 1, &dt));
    CHECK(hipdnnBackendSetAttribute(t, HIPDNN_ATTR_TENSOR_DIMENSIONS, HIPDNN_TYPE_INT64, n, dims));
    CHECK(hipdnnBackendSetAttribute(t, HIPDNN_ATTR_TENSOR_STRIDES, HIPDNN_TYPE_INT64, n, strides));
    CHECK(hipdnnBackendSetAttribute(t, HIPDNN_ATTR_TENSOR_IS_VIRTUAL, HIPDNN_TYPE_BOOLEAN, 1, &virt));
    CHECK(hipdnnBackendFinalize(t));
    return t;
}

/* A finalized pointwise operation out = mode(in0[, in1]) with FLOAT math precision. */
static inline hipdnnBackendDescriptor_t hdt_pointwise(hipdnnPointwiseMode_t mode,
                                                      hipdnnBackendDescriptor_t in0,
                                                      hipdnnBackendDescriptor_t in1,
                                                      hipdnnBackendDescriptor_t out)
{
    hipdnnBackendDescriptor_t op = NULL;
    hipdnnDataType_t prec = HIPDNN_DATA_FLOAT;
    CHECK(hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, &op));
    CHECK(hipdnnBackendSetAttribute(op, HIPDNN_ATTR_OPERATION_POINTWISE_IN_0_EXT,
                                    HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, &in0));
    if (in1)
        CHECK(hipdnnBackendSetAttribute(op, HIPDNN_ATTR_OPERATION_POINTWISE_IN_1_EXT,
                                        HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, &in1));
    CHECK(hipdnnBackendSetAttribute(op, HIPDNN_ATTR_OPERATION_POINTWISE_OUT_0_EXT,
                                    HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, &out));
    CHECK(hipdnnBackendSetAttribute(op, HIPDNN_ATTR_POINTWISE_MODE, HIPDNN_TYPE_POINTWISE_MODE, 1, &mode));
    CHECK(hipdnnBackendSetAttribute(op, HIPDNN_ATTR_POINTWISE_MATH_PREC, HIPDNN_TYPE_DATA_TYPE, 1, &prec));
    CHECK(hipdnnBackendFinalize(op));
    return op;
}

#endif
