/* Handle, tensor-descriptor, last-error and logging rules of the spec (§1.1–1.4, §4, §7),
 * checked through the C API exactly as a C caller sees it. Prints one line per failed check and
 * "rules: N checks, F failed" last; exits non-zero on any failure. */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hipdnn_backend.h"
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

static int g_checks, g_failed;
#define EXPECT(cond, ...)                                                           \
    do {                                                                            \
        ++g_checks;                                                                 \
        if (!(cond)) {                                                              \
            ++g_failed;                                                             \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                             \
            printf(__VA_ARGS__);                                                    \
            printf("\n");                                                           \
        }                                                                           \
    } while (0)
#define EXPECT_ST(call, want)                                                       \
    do {                                                                            \
        hipdnnStatus_t s_ = (call);                                                 \
        EXPECT(s_ == (want), "%s -> %s, want %s", #call, hipdnnGetErrorString(s_),  \
               hipdnnGetErrorString(want));                                         \
    } while (0)

static char g_msg[HIPDNN_ERROR_STRING_MAX_LENGTH];
static const char* last(void)
{
    hipdnnGetLastErrorString(g_msg, sizeof g_msg);
    return g_msg;
}

static hipdnnBackendDescriptor_t make_tensor(int64_t uid, int finalize)
{
    hipdnnBackendDescriptor_t t = NULL;
    hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_TENSOR_DESCRIPTOR, &t);
    int64_t dims[4] = {2, 3, 4, 5}, strides[4] = {60, 20, 5, 1};
    hipdnnDataType_t dt = HIPDNN_DATA_FLOAT;
    hipdnnBackendSetAttribute(t, HIPDNN_ATTR_TENSOR_UNIQUE_ID, HIPDNN_TYPE_INT64, 1, &uid);
    hipdnnBackendSetAttribute(t, HIPDNN_ATTR_TENSOR_DATA_TYPE, HIPDNN_TYPE_DATA_TYPE, 1, &dt);
    hipdnnBackendSetAttribute(t, HIPDNN_ATTR_TENSOR_DIMENSIONS, HIPDNN_TYPE_INT64, 4, dims);
    hipdnnBackendSetAttribute(t, HIPDNN_ATTR_TENSOR_STRIDES, HIPDNN_TYPE_INT64, 4, strides);
    if (finalize)
        hipdnnBackendFinalize(t);
    return t;
}

static void handles(void)
{
    EXPECT_ST(hipdnnCreate(NULL), HIPDNN_STATUS_BAD_PARAM_NULL_POINTER);
    EXPECT_ST(hipdnnDestroy(NULL), HIPDNN_STATUS_BAD_PARAM_NULL_POINTER);
    EXPECT_ST(hipdnnSetStream(NULL, NULL), HIPDNN_STATUS_BAD_PARAM_NULL_POINTER);
    hipdnnHandle_t h = NULL;
    EXPECT_ST(hipdnnCreate(&h), HIPDNN_STATUS_SUCCESS);
    EXPECT(h != NULL, "handle is NULL");
    hipStream_t s = (hipStream_t)(uintptr_t)0x1234;
    EXPECT_ST(hipdnnGetStream(h, NULL), HIPDNN_STATUS_BAD_PARAM_NULL_POINTER);
    EXPECT_ST(hipdnnGetStream(h, &s), HIPDNN_STATUS_SUCCESS);
    EXPECT(s == NULL, "default stream should be NULL");
    EXPECT_ST(hipdnnSetStream(h, (hipStream_t)(uintptr_t)0xabc0), HIPDNN_STATUS_SUCCESS);
    EXPECT_ST(hipdnnGetStream(h, &s), HIPDNN_STATUS_SUCCESS);
    EXPECT((uintptr_t)s == 0xabc0, "stream round trip");
    /* a descriptor is not a handle, a foreign pointer is not a handle */
    hipdnnBackendDescriptor_t t = make_tensor(1, 1);
    EXPECT_ST(hipdnnSetStream((hipdnnHandle_t)t, NULL), HIPDNN_STATUS_BAD_PARAM_NULL_POINTER);
    int local = 0;
    EXPECT_ST(hipdnnDestroy((hipdnnHandle_t)&local), HIPDNN_STATUS_BAD_PARAM_NULL_POINTER);
    EXPECT_ST(hipdnnDestroy((hipdnnHandle_t)t), HIPDNN_STATUS_BAD_PARAM_NULL_POINTER);
    EXPECT_ST(hipdnnBackendDestroyDescriptor((hipdnnBackendDescriptor_t)h), HIPDNN_STATUS_BAD_PARAM_NULL_POINTER);
    EXPECT_ST(hipdnnDestroy(h), HIPDNN_STATUS_SUCCESS);
    EXPECT_ST(hipdnnDestroy(h), HIPDNN_STATUS_BAD_PARAM_NULL_POINTER); /* destroyed */
    EXPECT_ST(hipdnnGetStream(h, &s), HIPDNN_STATUS_BAD_PARAM_NULL_POINTER);
    EXPECT_ST(hipdnnBackendDestroyDescriptor(t), HIPDNN_STATUS_SUCCESS);
}

static void descriptors(void)
{
    hipdnnBackendDescriptor_t d = NULL;
    EXPECT_ST(hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_TENSOR_DESCRIPTOR, NULL),
              HIPDNN_STATUS_BAD_PARAM_NULL_POINTER);
    EXPECT_ST(hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_LAYOUT_INFO_DESCRIPTOR, &d),
              HIPDNN_STATUS_NOT_SUPPORTED);
    EXPECT(strstr(last(), "HIPDNN_BACKEND_LAYOUT_INFO_DESCRIPTOR") != NULL, "message names the type: %s", g_msg);
    EXPECT_ST(hipdnnBackendCreateDescriptor((hipdnnBackendDescriptorType_t)9999, &d), HIPDNN_STATUS_NOT_SUPPORTED);
    EXPECT_ST(hipdnnBackendDestroyDescriptor(NULL), HIPDNN_STATUS_BAD_PARAM_NULL_POINTER);
    EXPECT_ST(hipdnnBackendFinalize(NULL), HIPDNN_STATUS_BAD_PARAM_NULL_POINTER);
    int64_t v = 1, n = 0;
    EXPECT_ST(hipdnnBackendSetAttribute(NULL, HIPDNN_ATTR_TENSOR_UNIQUE_ID, HIPDNN_TYPE_INT64, 1, &v),
              HIPDNN_STATUS_BAD_PARAM_NULL_POINTER);
    EXPECT_ST(hipdnnBackendGetAttribute(NULL, HIPDNN_ATTR_TENSOR_UNIQUE_ID, HIPDNN_TYPE_INT64, 1, &n, &v),
              HIPDNN_STATUS_BAD_PARAM_NULL_POINTER);
    /* destroyed and foreign descriptors */
    hipdnnBackendDescriptor_t t = make_tensor(2, 1);
    EXPECT_ST(hipdnnBackendDestroyDescriptor(t), HIPDNN_STATUS_SUCCESS);
    EXPECT_ST(hipdnnBackendDestroyDescriptor(t), HIPDNN_STATUS_BAD_PARAM_NULL_POINTER);
    EXPECT_ST(hipdnnBackendFinalize(t), HIPDNN_STATUS_BAD_PARAM_NULL_POINTER);
    EXPECT_ST(hipdnnBackendGetAttribute(t, HIPDNN_ATTR_TENSOR_UNIQUE_ID, HIPDNN_TYPE_INT64, 1, &n, &v),
              HIPDNN_STATUS_BAD_PARAM_NULL_POINTER);
    int local[4] = {0};
    hipdnnBackendDescriptor_t foreign = (hipdnnBackendDescriptor_t)local;
    EXPECT_ST(hipdnnBackendSetAttribute(foreign, HIPDNN_ATTR_TENSOR_UNIQUE_ID, HIPDNN_TYPE_INT64, 1, &v),
              HIPDNN_STATUS_BAD_PARAM_NULL_POINTER);
    EXPECT_ST(hipdnnBackendFinalize((hipdnnBackendDescriptor_t)(uintptr_t)0xdeadbeef0ULL),
              HIPDNN_STATUS_BAD_PARAM_NULL_POINTER);
}

static void tensor(void)
{
    hipdnnBackendDescriptor_t t = NULL;
    EXPECT_ST(hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_TENSOR_DESCRIPTOR, &t), HIPDNN_STATUS_SUCCESS);
    int64_t uid = 42, n = -1, got = 0;
    int64_t dims[4] = {2, 3, 4, 5}, strides3[3] = {20, 5, 1}, strides[4] = {60, 20, 5, 1};
    hipdnnDataType_t dt = HIPDNN_DATA_FLOAT;
    /* get before finalize */
    EXPECT_ST(hipdnnBackendGetAttribute(t, HIPDNN_ATTR_TENSOR_UNIQUE_ID, HIPDNN_TYPE_INT64, 1, &n, &got),
              HIPDNN_STATUS_NOT_INITIALIZED);
    /* set-side misuse, in the helper's order: type, null array, count */
    EXPECT_ST(hipdnnBackendSetAttribute(t, HIPDNN_ATTR_TENSOR_UNIQUE_ID, HIPDNN_TYPE_FLOAT, 1, &uid),
              HIPDNN_STATUS_BAD_PARAM);
    EXPECT(strstr(last(), "attributeType mismatch") != NULL, "type mismatch message: %s", g_msg);
    EXPECT_ST(hipdnnBackendSetAttribute(t, HIPDNN_ATTR_TENSOR_UNIQUE_ID, HIPDNN_TYPE_INT64, 1, NULL),
              HIPDNN_STATUS_BAD_PARAM_NULL_POINTER);
    EXPECT_ST(hipdnnBackendSetAttribute(t, HIPDNN_ATTR_TENSOR_UNIQUE_ID, HIPDNN_TYPE_INT64, 2, dims),
              HIPDNN_STATUS_BAD_PARAM);
    EXPECT_ST(hipdnnBackendSetAttribute(t, HIPDNN_ATTR_TENSOR_DIMENSIONS, HIPDNN_TYPE_INT64, 0, dims),
              HIPDNN_STATUS_BAD_PARAM);
    EXPECT_ST(hipdnnBackendSetAttribute(t, HIPDNN_ATTR_TENSOR_DIMENSIONS, HIPDNN_TYPE_INT64, -3, dims),
              HIPDNN_STATUS_BAD_PARAM);
    EXPECT_ST(hipdnnBackendSetAttribute(t, HIPDNN_ATTR_ENGINEHEUR_MODE, HIPDNN_TYPE_INT64, 1, &uid),
              HIPDNN_STATUS_NOT_SUPPORTED);
    /* value needs the data type first */
    float one = 1.0f;
    EXPECT_ST(hipdnnBackendSetAttribute(t, HIPDNN_ATTR_TENSOR_VALUE_EXT, HIPDNN_TYPE_CHAR, 4, &one),
              HIPDNN_STATUS_BAD_PARAM);
    /* finalize rules */
    EXPECT_ST(hipdnnBackendFinalize(t), HIPDNN_STATUS_BAD_PARAM); /* nothing set */
    EXPECT_ST(hipdnnBackendSetAttribute(t, HIPDNN_ATTR_TENSOR_UNIQUE_ID, HIPDNN_TYPE_INT64, 1, &uid),
              HIPDNN_STATUS_SUCCESS);
    EXPECT_ST(hipdnnBackendSetAttribute(t, HIPDNN_ATTR_TENSOR_DIMENSIONS, HIPDNN_TYPE_INT64, 4, dims),
              HIPDNN_STATUS_SUCCESS);
    EXPECT_ST(hipdnnBackendFinalize(t), HIPDNN_STATUS_BAD_PARAM); /* no strides */
    EXPECT_ST(hipdnnBackendSetAttribute(t, HIPDNN_ATTR_TENSOR_STRIDES, HIPDNN_TYPE_INT64, 3, strides3),
              HIPDNN_STATUS_SUCCESS);
    EXPECT_ST(hipdnnBackendFinalize(t), HIPDNN_STATUS_BAD_PARAM); /* length mismatch */
    EXPECT_ST(hipdnnBackendSetAttribute(t, HIPDNN_ATTR_TENSOR_STRIDES, HIPDNN_TYPE_INT64, 4, strides),
              HIPDNN_STATUS_SUCCESS);
    EXPECT_ST(hipdnnBackendFinalize(t), HIPDNN_STATUS_BAD_PARAM); /* no data type */
    EXPECT_ST(hipdnnBackendSetAttribute(t, HIPDNN_ATTR_TENSOR_DATA_TYPE, HIPDNN_TYPE_DATA_TYPE, 1, &dt),
              HIPDNN_STATUS_SUCCESS);
    EXPECT_ST(hipdnnBackendSetAttribute(t, HIPDNN_ATTR_TENSOR_VALUE_EXT, HIPDNN_TYPE_CHAR, 2, &one),
              HIPDNN_STATUS_BAD_PARAM); /* 2 bytes for a float */
    EXPECT_ST(hipdnnBackendSetAttribute(t, HIPDNN_ATTR_TENSOR_NAME_EXT, HIPDNN_TYPE_CHAR, 9, "input_xyz"),
              HIPDNN_STATUS_SUCCESS);
    EXPECT_ST(hipdnnBackendFinalize(t), HIPDNN_STATUS_SUCCESS);
    EXPECT_ST(hipdnnBackendFinalize(t), HIPDNN_STATUS_SUCCESS); /* re-finalize allowed */
    /* set after finalize: NOT_INITIALIZED first, even for unknown names and wrong types */
    EXPECT_ST(hipdnnBackendSetAttribute(t, HIPDNN_ATTR_TENSOR_UNIQUE_ID, HIPDNN_TYPE_INT64, 1, &uid),
              HIPDNN_STATUS_NOT_INITIALIZED);
    EXPECT_ST(hipdnnBackendSetAttribute(t, HIPDNN_ATTR_ENGINEHEUR_MODE, HIPDNN_TYPE_FLOAT, 7, NULL),
              HIPDNN_STATUS_NOT_INITIALIZED);
    /* get side */
    EXPECT_ST(hipdnnBackendGetAttribute(t, HIPDNN_ATTR_TENSOR_UNIQUE_ID, HIPDNN_TYPE_INT64, 1, NULL, &got),
              HIPDNN_STATUS_SUCCESS);
    EXPECT(got == 42, "uid %lld", (long long)got);
    EXPECT_ST(hipdnnBackendGetAttribute(t, HIPDNN_ATTR_TENSOR_UNIQUE_ID, HIPDNN_TYPE_INT64, 0, &n, NULL),
              HIPDNN_STATUS_SUCCESS);
    EXPECT(n == 1, "scalar size query %lld", (long long)n);
    EXPECT_ST(hipdnnBackendGetAttribute(t, HIPDNN_ATTR_TENSOR_UNIQUE_ID, HIPDNN_TYPE_INT64, 0, NULL, NULL),
              HIPDNN_STATUS_BAD_PARAM_NULL_POINTER);
    EXPECT_ST(hipdnnBackendGetAttribute(t, HIPDNN_ATTR_TENSOR_UNIQUE_ID, HIPDNN_TYPE_DOUBLE, 1, &n, &got),
              HIPDNN_STATUS_BAD_PARAM);
    EXPECT_ST(hipdnnBackendGetAttribute(t, HIPDNN_ATTR_ENGINEHEUR_MODE, HIPDNN_TYPE_INT64, 1, &n, &got),
              HIPDNN_STATUS_NOT_SUPPORTED);
    int64_t out[4] = {0};
    EXPECT_ST(hipdnnBackendGetAttribute(t, HIPDNN_ATTR_TENSOR_DIMENSIONS, HIPDNN_TYPE_INT64, 0, &n, NULL),
              HIPDNN_STATUS_SUCCESS);
    EXPECT(n == 4, "dims size query %lld", (long long)n);
    EXPECT_ST(hipdnnBackendGetAttribute(t, HIPDNN_ATTR_TENSOR_DIMENSIONS, HIPDNN_TYPE_INT64, 2, &n, out),
              HIPDNN_STATUS_SUCCESS);
    EXPECT(n == 2 && out[0] == 2 && out[1] == 3 && out[2] == 0, "truncated vector fetch n=%lld", (long long)n);
    EXPECT_ST(hipdnnBackendGetAttribute(t, HIPDNN_ATTR_TENSOR_DIMENSIONS, HIPDNN_TYPE_INT64, -1, &n, out),
              HIPDNN_STATUS_BAD_PARAM);
    char name[32];
    EXPECT_ST(hipdnnBackendGetAttribute(t, HIPDNN_ATTR_TENSOR_NAME_EXT, HIPDNN_TYPE_CHAR, 0, &n, NULL),
              HIPDNN_STATUS_SUCCESS);
    EXPECT(n == 10, "string size query includes the NUL: %lld", (long long)n);
    memset(name, 'x', sizeof name);
    EXPECT_ST(hipdnnBackendGetAttribute(t, HIPDNN_ATTR_TENSOR_NAME_EXT, HIPDNN_TYPE_CHAR, 4, &n, name),
              HIPDNN_STATUS_SUCCESS);
    EXPECT(strcmp(name, "inp") == 0 && n == 4, "truncated string '%s' n=%lld", name, (long long)n);
    bool b = true;
    EXPECT_ST(hipdnnBackendGetAttribute(t, HIPDNN_ATTR_TENSOR_IS_BY_VALUE, HIPDNN_TYPE_BOOLEAN, 1, &n, &b),
              HIPDNN_STATUS_SUCCESS);
    EXPECT(!b, "IS_BY_VALUE without a value");
    EXPECT_ST(hipdnnBackendGetAttribute(t, HIPDNN_ATTR_TENSOR_VALUE_EXT, HIPDNN_TYPE_CHAR, 0, &n, NULL),
              HIPDNN_STATUS_BAD_PARAM);
    int64_t align = 0;
    EXPECT_ST(hipdnnBackendGetAttribute(t, HIPDNN_ATTR_TENSOR_BYTE_ALIGNMENT, HIPDNN_TYPE_INT64, 1, &n, &align),
              HIPDNN_STATUS_SUCCESS);
    EXPECT(align == 16, "default alignment %lld", (long long)align);
    n = 99;
    EXPECT_ST(hipdnnBackendGetAttribute(t, HIPDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC, HIPDNN_TYPE_INT64, 1, &n, &got),
              HIPDNN_STATUS_SUCCESS);
    EXPECT(n == 0, "unset optional scalar -> count 0 (%lld)", (long long)n);
    hipdnnBackendDestroyDescriptor(t);

    /* a by-value scalar */
    t = NULL;
    hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_TENSOR_DESCRIPTOR, &t);
    int64_t one_dim = 1;
    double eps = 1e-5, back = 0;
    hipdnnDataType_t ddt = HIPDNN_DATA_DOUBLE;
    bool yes = true;
    hipdnnBackendSetAttribute(t, HIPDNN_ATTR_TENSOR_DATA_TYPE, HIPDNN_TYPE_DATA_TYPE, 1, &ddt);
    hipdnnBackendSetAttribute(t, HIPDNN_ATTR_TENSOR_DIMENSIONS, HIPDNN_TYPE_INT64, 1, &one_dim);
    hipdnnBackendSetAttribute(t, HIPDNN_ATTR_TENSOR_STRIDES, HIPDNN_TYPE_INT64, 1, &one_dim);
    EXPECT_ST(hipdnnBackendSetAttribute(t, HIPDNN_ATTR_TENSOR_VALUE_EXT, HIPDNN_TYPE_CHAR, 8, &eps),
              HIPDNN_STATUS_SUCCESS);
    EXPECT_ST(hipdnnBackendSetAttribute(t, HIPDNN_ATTR_TENSOR_IS_RUNTIME_PASS_BY_VALUE_EXT, HIPDNN_TYPE_BOOLEAN, 1,
                                        &yes), HIPDNN_STATUS_SUCCESS);
    EXPECT_ST(hipdnnBackendFinalize(t), HIPDNN_STATUS_SUCCESS);
    EXPECT_ST(hipdnnBackendGetAttribute(t, HIPDNN_ATTR_TENSOR_VALUE_EXT, HIPDNN_TYPE_CHAR, 0, &n, NULL),
              HIPDNN_STATUS_SUCCESS);
    EXPECT(n == 8, "value size %lld", (long long)n);
    EXPECT_ST(hipdnnBackendGetAttribute(t, HIPDNN_ATTR_TENSOR_VALUE_EXT, HIPDNN_TYPE_CHAR, 4, &n, &back),
              HIPDNN_STATUS_BAD_PARAM);
    EXPECT_ST(hipdnnBackendGetAttribute(t, HIPDNN_ATTR_TENSOR_VALUE_EXT, HIPDNN_TYPE_CHAR, 8, &n, &back),
              HIPDNN_STATUS_SUCCESS);
    EXPECT(back == eps, "value round trip");
    b = false;
    hipdnnBackendGetAttribute(t, HIPDNN_ATTR_TENSOR_IS_BY_VALUE, HIPDNN_TYPE_BOOLEAN, 1, &n, &b);
    EXPECT(b, "IS_BY_VALUE with a value");
    b = false;
    hipdnnBackendGetAttribute(t, HIPDNN_ATTR_TENSOR_IS_RUNTIME_PASS_BY_VALUE_EXT, HIPDNN_TYPE_BOOLEAN, 1, &n, &b);
    EXPECT(b, "runtime pass-by-value flag");
    hipdnnBackendDestroyDescriptor(t);
}

static void* thread_error(void* arg)
{
    (void)arg;
    char buf[64];
    /* another thread's error is not visible here */
    hipdnnPeekLastErrorString_ext(buf, sizeof buf);
    int clean = buf[0] == '\0';
    hipdnnBackendFinalize(NULL);
    hipdnnPeekLastErrorString_ext(buf, sizeof buf);
    return (void*)(intptr_t)(clean && buf[0] != '\0');
}

static void last_error(void)
{
    char buf[HIPDNN_ERROR_STRING_MAX_LENGTH];
    hipdnnGetLastErrorString(buf, sizeof buf); /* clear */
    hipdnnBackendFinalize(NULL);
    hipdnnPeekLastErrorString_ext(buf, sizeof buf);
    EXPECT(buf[0] != '\0', "failure sets the last error");
    char small[5];
    hipdnnPeekLastErrorString_ext(small, sizeof small);
    EXPECT(strlen(small) == 4 && strncmp(small, buf, 4) == 0, "peek truncates to max-1: '%s'", small);
    /* success does not touch the slot */
    hipdnnHandle_t h;
    hipdnnCreate(&h);
    char after[HIPDNN_ERROR_STRING_MAX_LENGTH];
    hipdnnPeekLastErrorString_ext(after, sizeof after);
    EXPECT(strcmp(after, buf) == 0, "success kept the old message");
    hipdnnGetLastErrorString(small, sizeof small);
    EXPECT(strlen(small) == 4, "get truncates");
    hipdnnPeekLastErrorString_ext(after, sizeof after);
    EXPECT(after[0] == '\0', "get clears: '%s'", after);
    hipdnnGetLastErrorString(NULL, 10);
    hipdnnPeekLastErrorString_ext(after, sizeof after);
    EXPECT(after[0] != '\0', "NULL buffer records a new error");
    hipdnnGetLastErrorString(after, 0);
    hipdnnGetLastErrorString(after, sizeof after);
    EXPECT(strstr(after, "maxSize") != NULL, "maxSize 0 records an error: '%s'", after);
    pthread_t th;
    pthread_create(&th, NULL, thread_error, NULL);
    void* ok = NULL;
    pthread_join(th, &ok);
    EXPECT(ok != NULL, "last error is per thread");
    hipdnnPeekLastErrorString_ext(after, sizeof after);
    EXPECT(after[0] == '\0', "other thread's error not visible here: '%s'", after);
    hipdnnDestroy(h);
    /* status strings */
    EXPECT(strcmp(hipdnnGetErrorString(HIPDNN_STATUS_SUCCESS), "HIPDNN_STATUS_SUCCESS") == 0, "SUCCESS string");
    EXPECT(strcmp(hipdnnGetErrorString(HIPDNN_STATUS_PLUGIN_ERROR), "HIPDNN_STATUS_PLUGIN_ERROR") == 0, "PLUGIN");
    EXPECT(strcmp(hipdnnGetErrorString((hipdnnStatus_t)999), "HIPDNN_STATUS_UNKNOWN") == 0, "unknown");
    const char* v = NULL;
    EXPECT_ST(hipdnnGetVersion_ext(NULL), HIPDNN_STATUS_BAD_PARAM_NULL_POINTER);
    EXPECT_ST(hipdnnGetVersion_ext(&v), HIPDNN_STATUS_SUCCESS);
    int a, b2, c, d;
    EXPECT(v && sscanf(v, "%d.%d.%d.%d", &a, &b2, &c, &d) == 4, "version MAJOR.MINOR.PATCH.TWEAK");
    EXPECT(v == hipdnnVersionString_ext() || strcmp(v, hipdnnVersionString_ext()) == 0, "same version");
}

static int g_cb_hits;
static char g_cb_last[256];
static void user_cb(hipdnnUserLogCallbackHandle_t user, hipdnnSeverity_t sev, const char* msg)
{
    (void)sev;
    if (strstr(msg, "API success: [hipdnnCreate]"))
        ++*(int*)user;
    snprintf(g_cb_last, sizeof g_cb_last, "%s", msg);
}

static void logging(void)
{
    hipdnnSeverity_t lv = HIPDNN_SEV_INFO;
    EXPECT_ST(hipdnnBackendGetGlobalLogLevel_ext(NULL), HIPDNN_STATUS_BAD_PARAM);
    EXPECT_ST(hipdnnBackendGetGlobalLogLevel_ext(&lv), HIPDNN_STATUS_SUCCESS);
    EXPECT(lv == HIPDNN_SEV_OFF, "default level OFF (%d)", (int)lv);
    EXPECT_ST(hipdnnBackendSetGlobalLogLevel_ext((hipdnnSeverity_t)77), HIPDNN_STATUS_BAD_PARAM);
    EXPECT_ST(hipdnnSetUserLogCallback_ext(NULL, HIPDNN_SEV_INFO, HIPDNN_LOG_CALLBACK_SYNC, &g_cb_hits),
              HIPDNN_STATUS_BAD_PARAM);
    EXPECT_ST(hipdnnSetUserLogCallback_ext(user_cb, HIPDNN_SEV_INFO, HIPDNN_LOG_CALLBACK_SYNC, NULL),
              HIPDNN_STATUS_BAD_PARAM);
    EXPECT_ST(hipdnnSetUserLogCallback_ext(user_cb, HIPDNN_SEV_INFO, (hipdnnLogCallbackMode_t)9, &g_cb_hits),
              HIPDNN_STATUS_BAD_PARAM);
    EXPECT_ST(hipdnnSetUserLogCallback_ext(user_cb, HIPDNN_SEV_OFF, HIPDNN_LOG_CALLBACK_SYNC, &g_cb_hits),
              HIPDNN_STATUS_BAD_PARAM); /* not registered */
    EXPECT_ST(hipdnnSetUserLogCallback_ext(user_cb, HIPDNN_SEV_INFO, HIPDNN_LOG_CALLBACK_SYNC, &g_cb_hits),
              HIPDNN_STATUS_SUCCESS);
    EXPECT_ST(hipdnnBackendSetGlobalLogLevel_ext(HIPDNN_SEV_INFO), HIPDNN_STATUS_SUCCESS);
    hipdnnBackendGetGlobalLogLevel_ext(&lv);
    EXPECT(lv == HIPDNN_SEV_INFO, "level round trip");
    hipdnnHandle_t h;
    hipdnnCreate(&h);
    EXPECT(g_cb_hits == 1, "SYNC callback saw 'API success: [hipdnnCreate]' (%d hits, last '%s')", g_cb_hits,
           g_cb_last);
    hipdnnBackendFinalize(NULL); /* an error is logged too */
    EXPECT(strstr(g_cb_last, "nullptr") != NULL, "error reached the callback: '%s'", g_cb_last);
    EXPECT_ST(hipdnnSetUserLogCallback_ext(user_cb, HIPDNN_SEV_OFF, HIPDNN_LOG_CALLBACK_SYNC, &g_cb_hits),
              HIPDNN_STATUS_SUCCESS);
    hipdnnDestroy(h);
    hipdnnCreate(&h);
    EXPECT(g_cb_hits == 1, "no calls after unregistering (%d)", g_cb_hits);
    hipdnnDestroy(h);
    hipdnnBackendSetGlobalLogLevel_ext(HIPDNN_SEV_OFF);
    hipdnnLoggingCallback_ext(HIPDNN_SEV_INFO, "plugin says hi");
    hipdnnLoggingCallback_ext(HIPDNN_SEV_INFO, NULL);
}

int main(void)
{
    handles();
    descriptors();
    tensor();
    last_error();
    logging();
    printf("rules: %d checks, %d failed\n", g_checks, g_failed);
    return g_failed != 0;
}
