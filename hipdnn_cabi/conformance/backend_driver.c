/* hipdnn-cabi conformance: backend-API driver.  dlopens a hipDNN backend library and runs one
 * scenario of C calls, printing one JSON record per call (see driver.c for the format):
 *   backend_driver MODE LIB.so
 * Judging is done in hipdnn_cabi/conformance/checks/backend.py. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hipdnn_backend.h"

#define SYMBOLS(X)                                                                                  \
    X(hipdnnCreate) X(hipdnnDestroy) X(hipdnnBackendCreateDescriptor) X(hipdnnBackendDestroyDescriptor) \
    X(hipdnnBackendFinalize) X(hipdnnBackendGetAttribute) X(hipdnnBackendSetAttribute)              \
    X(hipdnnGetLastErrorString) X(hipdnnPeekLastErrorString_ext) X(hipdnnGetErrorString)            \
    X(hipdnnVersionString_ext)
#define X_FIELD(n) __typeof__(&n) n;
static struct { SYMBOLS(X_FIELD) } B;

static void jstr(const char* s)
{
    if (!s) { fputs("null", stdout); return; }
    putchar('"');
    for (size_t i = 0; s[i] && i < 4096; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c < 0x20 || c >= 0x7f) printf("\\u%04x", c);
        else putchar(c);
    }
    putchar('"');
}
static void need(const void* p, const char* n)
{
    if (!p) { printf("{\"t\":\"missing\",\"fn\":\"%s\"}\n", n); exit(3); }
}
static void rec(const char* tag, const char* fn, const char* args, int st)
{
    char msg[HIPDNN_ERROR_STRING_MAX_LENGTH] = "";
    if (st && B.hipdnnPeekLastErrorString_ext) B.hipdnnPeekLastErrorString_ext(msg, sizeof msg);
    printf("{\"t\":\"call\",\"tag\":\"%s\",\"fn\":\"%s\",\"args\":", tag, fn);
    jstr(args);
    printf(",\"st\":%d,\"err\":", st);
    jstr(st ? msg : NULL);
    printf("}\n");
    fflush(stdout);
}
#define CALL(tag, fn, args, expr)                                                                   \
    __extension__({                                                                                 \
        need((const void*)B.fn, #fn);                                                               \
        printf("{\"t\":\"pre\",\"tag\":\"%s\",\"fn\":\"%s\",\"args\":\"%s\"}\n", tag, #fn, args);  \
        fflush(stdout);                                                                             \
        int _st = (int)(B.fn expr);                                                                 \
        rec(tag, #fn, args, _st);                                                                   \
        _st;                                                                                        \
    })
static void done(void) { printf("{\"t\":\"done\"}\n"); fflush(stdout); }

static int m_handle(void)
{
    hipdnnHandle_t h = NULL, hs[16];
    CALL("create", hipdnnCreate, "&handle", (&h));
    printf("{\"t\":\"handle\",\"null\":%d}\n", h == NULL);
    CALL("destroy", hipdnnDestroy, "handle", (h));
    CALL("create_null", hipdnnCreate, "NULL", (NULL));
    CALL("destroy_null", hipdnnDestroy, "NULL", (NULL));
    int bad = 0;
    for (int i = 0; i < 16; i++) bad += B.hipdnnCreate(&hs[i]) != 0;
    for (int i = 0; i < 16; i++) bad += B.hipdnnDestroy(hs[i]) != 0;
    printf("{\"t\":\"many\",\"failures\":%d}\n", bad);
    done();
    return 0;
}

static int m_descriptor(void)
{
    hipdnnBackendDescriptor_t d = NULL;
    CALL("unknown_type", hipdnnBackendCreateDescriptor, "type=9999, &desc", ((hipdnnBackendDescriptorType_t)9999, &d));
    CALL("not_creatable", hipdnnBackendCreateDescriptor, "HIPDNN_BACKEND_INTERMEDIATE_INFO_DESCRIPTOR, &desc",
         (HIPDNN_BACKEND_INTERMEDIATE_INFO_DESCRIPTOR, &d));
    CALL("create_null", hipdnnBackendCreateDescriptor, "HIPDNN_BACKEND_TENSOR_DESCRIPTOR, NULL", (HIPDNN_BACKEND_TENSOR_DESCRIPTOR, NULL));
    CALL("destroy_null", hipdnnBackendDestroyDescriptor, "NULL", (NULL));
    CALL("finalize_null", hipdnnBackendFinalize, "NULL", (NULL));
    done();
    return 0;
}

static int m_tensor(void)
{
    hipdnnBackendDescriptor_t t = NULL, t2 = NULL;
    int64_t dims[2] = {2, 3}, strides[2] = {3, 1}, uid = 7, three[3] = {1, 2, 3}, out[4] = {0}, n = -1;
    hipdnnDataType_t dt = HIPDNN_DATA_FLOAT;
    CALL("create", hipdnnBackendCreateDescriptor, "HIPDNN_BACKEND_TENSOR_DESCRIPTOR, &desc", (HIPDNN_BACKEND_TENSOR_DESCRIPTOR, &t));
    CALL("get_before_finalize", hipdnnBackendGetAttribute, "tensor, DIMENSIONS, INT64, 2, &n, out (not finalized)",
         (t, HIPDNN_ATTR_TENSOR_DIMENSIONS, HIPDNN_TYPE_INT64, 2, &n, out));
    CALL("finalize_empty", hipdnnBackendFinalize, "tensor with nothing set", (t));
    CALL("set_wrong_type", hipdnnBackendSetAttribute, "tensor, DIMENSIONS, BOOLEAN, 2, dims",
         (t, HIPDNN_ATTR_TENSOR_DIMENSIONS, HIPDNN_TYPE_BOOLEAN, 2, dims));
    CALL("set_null_array", hipdnnBackendSetAttribute, "tensor, DIMENSIONS, INT64, 2, NULL",
         (t, HIPDNN_ATTR_TENSOR_DIMENSIONS, HIPDNN_TYPE_INT64, 2, NULL));
    CALL("set_scalar_count2", hipdnnBackendSetAttribute, "tensor, UNIQUE_ID, INT64, 2, dims",
         (t, HIPDNN_ATTR_TENSOR_UNIQUE_ID, HIPDNN_TYPE_INT64, 2, dims));
    CALL("set_vector_count0", hipdnnBackendSetAttribute, "tensor, DIMENSIONS, INT64, 0, dims",
         (t, HIPDNN_ATTR_TENSOR_DIMENSIONS, HIPDNN_TYPE_INT64, 0, dims));
    CALL("set_unknown_attr", hipdnnBackendSetAttribute, "tensor, attribute 99999, INT64, 1, &uid",
         (t, (hipdnnBackendAttributeName_t)99999, HIPDNN_TYPE_INT64, 1, &uid));
    CALL("set_uid", hipdnnBackendSetAttribute, "tensor, UNIQUE_ID, INT64, 1, &uid", (t, HIPDNN_ATTR_TENSOR_UNIQUE_ID, HIPDNN_TYPE_INT64, 1, &uid));
    CALL("set_dtype", hipdnnBackendSetAttribute, "tensor, DATA_TYPE, DATA_TYPE, 1, &FLOAT", (t, HIPDNN_ATTR_TENSOR_DATA_TYPE, HIPDNN_TYPE_DATA_TYPE, 1, &dt));
    CALL("set_dims", hipdnnBackendSetAttribute, "tensor, DIMENSIONS, INT64, 2, {2,3}", (t, HIPDNN_ATTR_TENSOR_DIMENSIONS, HIPDNN_TYPE_INT64, 2, dims));
    CALL("set_strides", hipdnnBackendSetAttribute, "tensor, STRIDES, INT64, 2, {3,1}", (t, HIPDNN_ATTR_TENSOR_STRIDES, HIPDNN_TYPE_INT64, 2, strides));
    CALL("finalize", hipdnnBackendFinalize, "tensor", (t));
    CALL("set_after_finalize", hipdnnBackendSetAttribute, "finalized tensor, UNIQUE_ID, INT64, 1, &uid",
         (t, HIPDNN_ATTR_TENSOR_UNIQUE_ID, HIPDNN_TYPE_INT64, 1, &uid));
    n = -1;
    CALL("get_size_query", hipdnnBackendGetAttribute, "tensor, DIMENSIONS, INT64, 0, &n, NULL",
         (t, HIPDNN_ATTR_TENSOR_DIMENSIONS, HIPDNN_TYPE_INT64, 0, &n, NULL));
    printf("{\"t\":\"size_query\",\"n\":%lld}\n", (long long)n);
    n = -1;
    CALL("get_size_query_null_count", hipdnnBackendGetAttribute, "tensor, DIMENSIONS, INT64, 0, NULL, NULL",
         (t, HIPDNN_ATTR_TENSOR_DIMENSIONS, HIPDNN_TYPE_INT64, 0, NULL, NULL));
    out[0] = out[1] = out[2] = -5;
    CALL("get_truncated", hipdnnBackendGetAttribute, "tensor, DIMENSIONS, INT64, 1, &n, out",
         (t, HIPDNN_ATTR_TENSOR_DIMENSIONS, HIPDNN_TYPE_INT64, 1, &n, out));
    printf("{\"t\":\"truncated\",\"n\":%lld,\"v0\":%lld,\"v1\":%lld}\n", (long long)n, (long long)out[0], (long long)out[1]);
    CALL("get_full", hipdnnBackendGetAttribute, "tensor, DIMENSIONS, INT64, 4, &n, out",
         (t, HIPDNN_ATTR_TENSOR_DIMENSIONS, HIPDNN_TYPE_INT64, 4, &n, out));
    printf("{\"t\":\"full\",\"n\":%lld,\"v0\":%lld,\"v1\":%lld}\n", (long long)n, (long long)out[0], (long long)out[1]);
    CALL("get_wrong_type", hipdnnBackendGetAttribute, "tensor, UNIQUE_ID, BOOLEAN, 1, &n, out",
         (t, HIPDNN_ATTR_TENSOR_UNIQUE_ID, HIPDNN_TYPE_BOOLEAN, 1, &n, out));
    CALL("destroy", hipdnnBackendDestroyDescriptor, "tensor", (t));
    /* dims/strides of different lengths */
    CALL("create2", hipdnnBackendCreateDescriptor, "HIPDNN_BACKEND_TENSOR_DESCRIPTOR, &desc", (HIPDNN_BACKEND_TENSOR_DESCRIPTOR, &t2));
    B.hipdnnBackendSetAttribute(t2, HIPDNN_ATTR_TENSOR_UNIQUE_ID, HIPDNN_TYPE_INT64, 1, &uid);
    B.hipdnnBackendSetAttribute(t2, HIPDNN_ATTR_TENSOR_DATA_TYPE, HIPDNN_TYPE_DATA_TYPE, 1, &dt);
    B.hipdnnBackendSetAttribute(t2, HIPDNN_ATTR_TENSOR_DIMENSIONS, HIPDNN_TYPE_INT64, 3, three);
    B.hipdnnBackendSetAttribute(t2, HIPDNN_ATTR_TENSOR_STRIDES, HIPDNN_TYPE_INT64, 2, strides);
    CALL("finalize_mismatch", hipdnnBackendFinalize, "tensor with 3 dims and 2 strides", (t2));
    CALL("destroy2", hipdnnBackendDestroyDescriptor, "tensor", (t2));
    done();
    return 0;
}

static int m_last_error(void)
{
    char small[8], full[HIPDNN_ERROR_STRING_MAX_LENGTH], again[HIPDNN_ERROR_STRING_MAX_LENGTH], after[HIPDNN_ERROR_STRING_MAX_LENGTH];
    hipdnnBackendDescriptor_t d = NULL;
    need((const void*)B.hipdnnPeekLastErrorString_ext, "hipdnnPeekLastErrorString_ext");
    need((const void*)B.hipdnnGetLastErrorString, "hipdnnGetLastErrorString");
    CALL("fail", hipdnnBackendCreateDescriptor, "HIPDNN_BACKEND_TENSOR_DESCRIPTOR, NULL", (HIPDNN_BACKEND_TENSOR_DESCRIPTOR, NULL));
    memset(small, 'X', sizeof small);
    B.hipdnnPeekLastErrorString_ext(small, sizeof small);
    int nul_ok = memchr(small, 0, sizeof small) != NULL;
    B.hipdnnPeekLastErrorString_ext(full, sizeof full);
    /* a successful call must not clear it */
    CALL("success", hipdnnBackendCreateDescriptor, "HIPDNN_BACKEND_TENSOR_DESCRIPTOR, &desc", (HIPDNN_BACKEND_TENSOR_DESCRIPTOR, &d));
    if (d) B.hipdnnBackendDestroyDescriptor(d);
    B.hipdnnPeekLastErrorString_ext(again, sizeof again);
    char got[HIPDNN_ERROR_STRING_MAX_LENGTH];
    B.hipdnnGetLastErrorString(got, sizeof got);
    B.hipdnnPeekLastErrorString_ext(after, sizeof after);
    printf("{\"t\":\"last_error\",\"small_nul\":%d,\"small\":", nul_ok);
    jstr(nul_ok ? small : "");
    printf(",\"full\":"); jstr(full);
    printf(",\"after_success\":"); jstr(again);
    printf(",\"get\":"); jstr(got);
    printf(",\"after_get\":"); jstr(after);
    printf("}\n");
    printf("{\"t\":\"pre\",\"tag\":\"null_buf\",\"fn\":\"hipdnnGetLastErrorString\",\"args\":\"NULL, 16\"}\n");
    fflush(stdout);
    B.hipdnnGetLastErrorString(NULL, 16);
    B.hipdnnPeekLastErrorString_ext(NULL, 16);
    printf("{\"t\":\"null_buf_ok\"}\n");
    done();
    return 0;
}

static int m_strings(void)
{
    need((const void*)B.hipdnnGetErrorString, "hipdnnGetErrorString");
    int codes[4] = {0, 3, 8, 9999};
    for (int i = 0; i < 4; i++) {
        const char* a = B.hipdnnGetErrorString((hipdnnStatus_t)codes[i]);
        const char* b = B.hipdnnGetErrorString((hipdnnStatus_t)codes[i]);
        printf("{\"t\":\"error_string\",\"code\":%d,\"same_ptr\":%d,\"value\":", codes[i], a == b);
        jstr(a);
        printf("}\n");
    }
    need((const void*)B.hipdnnVersionString_ext, "hipdnnVersionString_ext");
    printf("{\"t\":\"version\",\"value\":");
    jstr(B.hipdnnVersionString_ext());
    printf("}\n");
    done();
    return 0;
}

int main(int argc, char** argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 3) return 2;
    void* lib = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        printf("{\"t\":\"dlopen\",\"error\":");
        jstr(dlerror());
        printf("}\n");
        return 5;
    }
#define X_LOAD(n) *(void**)(&B.n) = dlsym(lib, #n);
    SYMBOLS(X_LOAD)
    const char* m = argv[1];
    if (!strcmp(m, "handle")) return m_handle();
    if (!strcmp(m, "descriptor")) return m_descriptor();
    if (!strcmp(m, "tensor")) return m_tensor();
    if (!strcmp(m, "last_error")) return m_last_error();
    if (!strcmp(m, "strings")) return m_strings();
    return 2;
}
