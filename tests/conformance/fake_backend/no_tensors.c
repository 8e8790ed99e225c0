/* A stand-in "backend" for the conformance suite's own tests: handles work, no descriptor type can
 * be created (a backend without tensor descriptors), every other call answers NOT_SUPPORTED with a
 * last error.  -DOMIT_SET_ATTRIBUTE leaves hipdnnBackendSetAttribute out of the library. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hipdnn_backend.h"

static __thread char last[256];
static hipdnnStatus_t fail(hipdnnStatus_t st, const char* msg)
{
    snprintf(last, sizeof last, "%s", msg);
    return st;
}

hipdnnStatus_t hipdnnCreate(hipdnnHandle_t* h)
{
    if (!h) return fail(HIPDNN_STATUS_BAD_PARAM_NULL_POINTER, "hipdnnCreate: NULL");
    *h = (hipdnnHandle_t)malloc(16);
    return HIPDNN_STATUS_SUCCESS;
}
hipdnnStatus_t hipdnnDestroy(hipdnnHandle_t h)
{
    if (!h) return fail(HIPDNN_STATUS_BAD_PARAM_NULL_POINTER, "hipdnnDestroy: NULL");
    free(h);
    return HIPDNN_STATUS_SUCCESS;
}
hipdnnStatus_t hipdnnBackendCreateDescriptor(hipdnnBackendDescriptorType_t t, hipdnnBackendDescriptor_t* d)
{
    (void)t;
    if (!d) return fail(HIPDNN_STATUS_BAD_PARAM_NULL_POINTER, "CreateDescriptor: NULL");
    return fail(HIPDNN_STATUS_NOT_SUPPORTED, "this backend creates no descriptors");
}
hipdnnStatus_t hipdnnBackendDestroyDescriptor(hipdnnBackendDescriptor_t d)
{
    (void)d;
    return fail(HIPDNN_STATUS_BAD_PARAM_NULL_POINTER, "DestroyDescriptor: not a descriptor");
}
hipdnnStatus_t hipdnnBackendFinalize(hipdnnBackendDescriptor_t d)
{
    (void)d;
    return fail(HIPDNN_STATUS_BAD_PARAM_NULL_POINTER, "Finalize: not a descriptor");
}
hipdnnStatus_t hipdnnBackendGetAttribute(hipdnnBackendDescriptor_t d, hipdnnBackendAttributeName_t n,
                                         hipdnnBackendAttributeType_t t, int64_t r, int64_t* c, void* a)
{
    (void)d; (void)n; (void)t; (void)r; (void)c; (void)a;
    return fail(HIPDNN_STATUS_BAD_PARAM_NULL_POINTER, "GetAttribute: not a descriptor");
}
#ifndef OMIT_SET_ATTRIBUTE
hipdnnStatus_t hipdnnBackendSetAttribute(hipdnnBackendDescriptor_t d, hipdnnBackendAttributeName_t n,
                                         hipdnnBackendAttributeType_t t, int64_t c, const void* a)
{
    (void)d; (void)n; (void)t; (void)c; (void)a;
    return fail(HIPDNN_STATUS_BAD_PARAM_NULL_POINTER, "SetAttribute: not a descriptor");
}
#endif
void hipdnnGetLastErrorString(char* m, size_t n)
{
    if (m && n) { snprintf(m, n, "%s", last); }
    last[0] = 0;
}
void hipdnnPeekLastErrorString_ext(char* m, size_t n)
{
    if (m && n) snprintf(m, n, "%s", last);
}
const char* hipdnnGetErrorString(hipdnnStatus_t s)
{
    return s == HIPDNN_STATUS_SUCCESS ? "HIPDNN_STATUS_SUCCESS" : "HIPDNN_STATUS_UNKNOWN";
}
const char* hipdnnVersionString_ext(void) { return "0.0.0.0"; }
