/*
 * drive_c_sample.c -- loads libhipdnn_c_sample_plugin.so with dlopen and drives it the way a hipDNN
 * backend does, checking statuses, last-error messages and numbers.
 *
 *   drive_c_sample <plugin.so> <workdir> <case files...>
 *
 * <workdir> holds engine_config*.bin (written by the pytest) and receives out/details_<case>.bin and
 * out/payload_<case>.bin for the pytest to decode. Case file format (little-endian, written by
 * test_c_sample_plugin.py):
 *   "CSCASE01", u32 name_len, name, u32 graph_size, graph, u32 expect_applicable,
 *   u32 n_buffers, { i64 uid, u32 n, f32 initial[n], f32 expected[n] },
 *   u32 n_overrides, { i64 uid, u32 len, i64 dims[len], i64 strides[len] }
 * Prints "ALL OK" and exits 0 when every check passed.
 */
#define _POSIX_C_SOURCE 200809L

#include <hipdnn_plugin_sdk/EnginePluginApi.h>

#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ENGINE_NAME "HIPDNN_CABI_C_SAMPLE_ENGINE"

/* ---- checks ------------------------------------------------------------------------------ */

static atomic_int g_failures;
static atomic_int g_checks;

#define CHECK(cond, ...)                                                                                   \
    do                                                                                                     \
    {                                                                                                      \
        atomic_fetch_add(&g_checks, 1);                                                                    \
        if(!(cond))                                                                                        \
        {                                                                                                  \
            atomic_fetch_add(&g_failures, 1);                                                              \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                                \
            fprintf(stderr, __VA_ARGS__);                                                                  \
            fprintf(stderr, "\n");                                                                         \
        }                                                                                                  \
    } while(0)

/* ---- symbols ----------------------------------------------------------------------------- */

typedef hipdnnPluginStatus_t (*get_str_fn)(const char**);
typedef hipdnnPluginStatus_t (*get_type_fn)(hipdnnPluginType_t*);
typedef void (*last_error_fn)(const char**);
typedef hipdnnPluginStatus_t (*set_cb_fn)(hipdnnCallback_t);
typedef hipdnnPluginStatus_t (*set_level_fn)(hipdnnSeverity_t);

static struct
{
    get_str_fn GetName, GetVersion, GetApiVersion;
    get_type_fn GetType;
    last_error_fn GetLastErrorString;
    set_cb_fn SetLoggingCallback;
    set_level_fn SetLogLevel;
    __typeof__(&hipdnnEnginePluginGetAllEngineIds) GetAllEngineIds;
    __typeof__(&hipdnnEnginePluginCreate) Create;
    __typeof__(&hipdnnEnginePluginDestroy) Destroy;
    __typeof__(&hipdnnEnginePluginSetStream) SetStream;
    __typeof__(&hipdnnEnginePluginGetApplicableEngineIds) GetApplicableEngineIds;
    __typeof__(&hipdnnEnginePluginGetEngineDetails) GetEngineDetails;
    __typeof__(&hipdnnEnginePluginDestroyEngineDetails) DestroyEngineDetails;
    __typeof__(&hipdnnEnginePluginGetWorkspaceSize) GetWorkspaceSize;
    __typeof__(&hipdnnEnginePluginCreateExecutionContext) CreateExecutionContext;
    __typeof__(&hipdnnEnginePluginDestroyExecutionContext) DestroyExecutionContext;
    __typeof__(&hipdnnEnginePluginGetWorkspaceSizeFromExecutionContext) GetWorkspaceSizeFromExecutionContext;
    __typeof__(&hipdnnEnginePluginExecuteOpGraph) ExecuteOpGraph;
    __typeof__(&hipdnnEnginePluginExecuteOpGraphWithOverrides) ExecuteOpGraphWithOverrides;
    __typeof__(&hipdnnEnginePluginGetEngineName) GetEngineName;
    __typeof__(&hipdnnEnginePluginSerializeExecutionContextWithEngineId) SerializeWithEngineId;
    __typeof__(&hipdnnEnginePluginSerializeExecutionContext) SerializeLegacy;
    __typeof__(&hipdnnEnginePluginDestroySerializedExecutionContext) DestroySerialized;
    __typeof__(&hipdnnEnginePluginCreateExecutionContextFromSerialized) CreateFromSerialized;
} P;

static void* g_lib;

static void* sym(const char* name, int required)
{
    dlerror();
    void* p = dlsym(g_lib, name);
    if(required)
        CHECK(p != NULL, "missing symbol %s (%s)", name, dlerror());
    printf("SYMBOL %s %s\n", name, p ? "present" : "absent");
    return p;
}

#define LOAD(field, name, req) *(void**)(&P.field) = sym(name, req)

static int load_symbols(void)
{
    LOAD(GetName, "hipdnnPluginGetName", 1);
    LOAD(GetVersion, "hipdnnPluginGetVersion", 1);
    LOAD(GetType, "hipdnnPluginGetType", 1);
    LOAD(GetLastErrorString, "hipdnnPluginGetLastErrorString", 1);
    LOAD(GetApiVersion, "hipdnnPluginGetApiVersion", 1); /* optional for the host, but this plugin has it */
    LOAD(SetLoggingCallback, "hipdnnPluginSetLoggingCallback", 1);
    LOAD(SetLogLevel, "hipdnnPluginSetLogLevel", 1);
    LOAD(GetAllEngineIds, "hipdnnEnginePluginGetAllEngineIds", 1);
    LOAD(Create, "hipdnnEnginePluginCreate", 1);
    LOAD(Destroy, "hipdnnEnginePluginDestroy", 1);
    LOAD(SetStream, "hipdnnEnginePluginSetStream", 1);
    LOAD(GetApplicableEngineIds, "hipdnnEnginePluginGetApplicableEngineIds", 1);
    LOAD(GetEngineDetails, "hipdnnEnginePluginGetEngineDetails", 1);
    LOAD(DestroyEngineDetails, "hipdnnEnginePluginDestroyEngineDetails", 1);
    LOAD(GetWorkspaceSize, "hipdnnEnginePluginGetWorkspaceSize", 1);
    LOAD(CreateExecutionContext, "hipdnnEnginePluginCreateExecutionContext", 1);
    LOAD(DestroyExecutionContext, "hipdnnEnginePluginDestroyExecutionContext", 1);
    LOAD(GetWorkspaceSizeFromExecutionContext, "hipdnnEnginePluginGetWorkspaceSizeFromExecutionContext", 1);
    LOAD(ExecuteOpGraph, "hipdnnEnginePluginExecuteOpGraph", 1);
    LOAD(ExecuteOpGraphWithOverrides, "hipdnnEnginePluginExecuteOpGraphWithOverrides", 1);
    LOAD(GetEngineName, "hipdnnEnginePluginGetEngineName", 1);
    LOAD(SerializeWithEngineId, "hipdnnEnginePluginSerializeExecutionContextWithEngineId", 1);
    LOAD(SerializeLegacy, "hipdnnEnginePluginSerializeExecutionContext", 1);
    LOAD(DestroySerialized, "hipdnnEnginePluginDestroySerializedExecutionContext", 1);
    LOAD(CreateFromSerialized, "hipdnnEnginePluginCreateExecutionContextFromSerialized", 1);
    /* Nothing else should be exported; a sample internal name must not resolve. */
    CHECK(dlsym(g_lib, "cs_program_from_graph") == NULL, "internal symbol is exported");
    CHECK(dlsym(g_lib, "fb_root") == NULL, "internal symbol is exported");
    return atomic_load(&g_failures) == 0;
}

/* ---- last error helpers ------------------------------------------------------------------ */

static const char* last_error(void)
{
    const char* s = NULL;
    P.GetLastErrorString(&s);
    return s ? s : "";
}

/* Put a known message in the slot so that a stale message cannot pass for a fresh one. */
static void reset_last_error(void)
{
    hipdnnPluginStatus_t st = P.GetName(NULL);
    (void)st;
}

static const char* status_name(hipdnnPluginStatus_t s)
{
    static const char* names[] = {"SUCCESS", "BAD_PARAM", "INVALID_VALUE", "INTERNAL_ERROR",
                                  "ALLOC_FAILED", "NOT_APPLICABLE", "NOT_INITIALIZED"};
    return ((unsigned)s < 7) ? names[s] : "UNKNOWN";
}

/* Expect a failure with `want` status; last error must be fresh, name `func` and contain `needle`. */
#define EXPECT_FAIL(call, want, func, needle)                                                               \
    do                                                                                                      \
    {                                                                                                       \
        reset_last_error();                                                                                 \
        hipdnnPluginStatus_t st_ = (call);                                                                  \
        const char* le_ = last_error();                                                                     \
        CHECK(st_ == (want), "%s -> %s, want %s (last error: %s)", #call, status_name(st_),                 \
              status_name(want), le_);                                                                      \
        CHECK(strncmp(le_, func, strlen(func)) == 0 && strstr(le_, needle) != NULL,                         \
              "%s: last error '%s' should start with '%s' and contain '%s'", #call, le_, func, needle);     \
    } while(0)

#define EXPECT_OK(call)                                                                                     \
    do                                                                                                      \
    {                                                                                                       \
        hipdnnPluginStatus_t st_ = (call);                                                                  \
        CHECK(st_ == HIPDNN_PLUGIN_STATUS_SUCCESS, "%s -> %s (last error: %s)", #call, status_name(st_),    \
              last_error());                                                                                \
    } while(0)

/* ---- logging ----------------------------------------------------------------------------- */

static atomic_int g_log_count;
static atomic_int g_log_errors;

static void log_cb(hipdnnSeverity_t severity, const char* message)
{
    atomic_fetch_add(&g_log_count, 1);
    if(severity == HIPDNN_SEV_ERROR)
        atomic_fetch_add(&g_log_errors, 1);
    if(message == NULL || strstr(message, "hipdnn_c_sample_plugin") == NULL)
    {
        atomic_fetch_add(&g_failures, 1);
        fprintf(stderr, "FAIL: log message without plugin tag: %s\n", message ? message : "(null)");
    }
}

/* ---- files and cases --------------------------------------------------------------------- */

static uint8_t* read_file(const char* path, size_t* size)
{
    FILE* f = fopen(path, "rb");
    if(f == NULL)
    {
        fprintf(stderr, "cannot open %s\n", path);
        exit(2);
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t* p = malloc(n > 0 ? (size_t)n : 1);
    if(p == NULL || (n > 0 && fread(p, 1, (size_t)n, f) != (size_t)n))
    {
        fprintf(stderr, "cannot read %s\n", path);
        exit(2);
    }
    fclose(f);
    *size = (size_t)n;
    return p;
}

static void write_file(const char* path, const void* data, size_t size)
{
    FILE* f = fopen(path, "wb");
    if(f == NULL || fwrite(data, 1, size, f) != size)
    {
        fprintf(stderr, "cannot write %s\n", path);
        exit(2);
    }
    fclose(f);
}

typedef struct
{
    int64_t uid;
    uint32_t n;
    float* init;
    float* expect;
} case_buf;

typedef struct
{
    int64_t uid;
    uint32_t len;
    int64_t* dims;
    int64_t* strides;
} case_ovr;

typedef struct
{
    char name[128];
    uint8_t* graph;
    uint32_t graph_size;
    uint32_t applicable;
    uint32_t nbuf;
    case_buf* bufs;
    uint32_t novr;
    case_ovr* ovr;
} test_case;

typedef struct
{
    const uint8_t* p;
    size_t left;
} reader;

static void take(reader* r, void* out, size_t n)
{
    if(n > r->left)
    {
        fprintf(stderr, "truncated case file\n");
        exit(2);
    }
    memcpy(out, r->p, n);
    r->p += n;
    r->left -= n;
}

static uint32_t take32(reader* r)
{
    uint32_t v;
    take(r, &v, 4);
    return v;
}

static int64_t take64(reader* r)
{
    int64_t v;
    take(r, &v, 8);
    return v;
}

static void load_case(const char* path, test_case* c)
{
    size_t size = 0;
    uint8_t* data = read_file(path, &size);
    reader r = {data, size};
    char magic[8];
    take(&r, magic, 8);
    if(memcmp(magic, "CSCASE01", 8) != 0)
    {
        fprintf(stderr, "%s: bad case magic\n", path);
        exit(2);
    }
    memset(c, 0, sizeof *c);
    uint32_t nlen = take32(&r);
    if(nlen >= sizeof c->name)
        exit(2);
    take(&r, c->name, nlen);
    c->graph_size = take32(&r);
    c->graph = malloc(c->graph_size ? c->graph_size : 1);
    take(&r, c->graph, c->graph_size);
    c->applicable = take32(&r);
    c->nbuf = take32(&r);
    c->bufs = calloc(c->nbuf ? c->nbuf : 1, sizeof *c->bufs);
    for(uint32_t i = 0; i < c->nbuf; i++)
    {
        case_buf* b = &c->bufs[i];
        b->uid = take64(&r);
        b->n = take32(&r);
        b->init = malloc((b->n ? b->n : 1) * sizeof(float));
        b->expect = malloc((b->n ? b->n : 1) * sizeof(float));
        take(&r, b->init, b->n * sizeof(float));
        take(&r, b->expect, b->n * sizeof(float));
    }
    c->novr = take32(&r);
    c->ovr = calloc(c->novr ? c->novr : 1, sizeof *c->ovr);
    for(uint32_t i = 0; i < c->novr; i++)
    {
        case_ovr* o = &c->ovr[i];
        o->uid = take64(&r);
        o->len = take32(&r);
        o->dims = malloc((o->len ? o->len : 1) * sizeof(int64_t));
        o->strides = malloc((o->len ? o->len : 1) * sizeof(int64_t));
        take(&r, o->dims, o->len * sizeof(int64_t));
        take(&r, o->strides, o->len * sizeof(int64_t));
    }
    free(data);
}

static void free_case(test_case* c)
{
    for(uint32_t i = 0; i < c->nbuf; i++)
    {
        free(c->bufs[i].init);
        free(c->bufs[i].expect);
    }
    for(uint32_t i = 0; i < c->novr; i++)
    {
        free(c->ovr[i].dims);
        free(c->ovr[i].strides);
    }
    free(c->bufs);
    free(c->ovr);
    free(c->graph);
}

/* Host buffers for one execution of a case. */
typedef struct
{
    float** data;
    hipdnnPluginDeviceBuffer_t* dev;
} case_mem;

static void mem_init(const test_case* c, case_mem* m)
{
    m->data = calloc(c->nbuf ? c->nbuf : 1, sizeof *m->data);
    m->dev = calloc(c->nbuf ? c->nbuf : 1, sizeof *m->dev);
    for(uint32_t i = 0; i < c->nbuf; i++)
    {
        m->data[i] = malloc((c->bufs[i].n ? c->bufs[i].n : 1) * sizeof(float));
        memcpy(m->data[i], c->bufs[i].init, c->bufs[i].n * sizeof(float));
        m->dev[i].uid = c->bufs[i].uid;
        m->dev[i].ptr = m->data[i];
    }
}

static void mem_reset(const test_case* c, case_mem* m)
{
    for(uint32_t i = 0; i < c->nbuf; i++)
        memcpy(m->data[i], c->bufs[i].init, c->bufs[i].n * sizeof(float));
}

static void mem_free(const test_case* c, case_mem* m)
{
    for(uint32_t i = 0; i < c->nbuf; i++)
        free(m->data[i]);
    free(m->data);
    free(m->dev);
}

/* Compare every buffer (outputs, untouched gaps and inputs) with the expected contents. */
static int mem_matches(const test_case* c, const case_mem* m, const char* label, int report)
{
    int bad = 0;
    for(uint32_t i = 0; i < c->nbuf; i++)
        for(uint32_t k = 0; k < c->bufs[i].n; k++)
        {
            float got = m->data[i][k], want = c->bufs[i].expect[k];
            if(!(fabsf(got - want) <= 1e-5f * (1.0f + fabsf(want))))
            {
                if(report && bad < 5)
                    fprintf(stderr, "FAIL %s/%s: uid %lld element %u = %g, want %g\n", c->name, label,
                            (long long)c->bufs[i].uid, k, (double)got, (double)want);
                bad++;
            }
        }
    return bad == 0;
}

static hipdnnPluginStatus_t run_dev(const test_case* c, hipdnnEnginePluginHandle_t h,
                                    hipdnnEnginePluginExecutionContext_t ctx, const hipdnnPluginDeviceBuffer_t* dev,
                                    uint32_t ndev, int force_overrides_api)
{
    if(c->novr == 0 && !force_overrides_api)
        return P.ExecuteOpGraph(h, ctx, NULL, dev, ndev);
    int64_t* uids = calloc(c->novr + 1, sizeof *uids);
    uint32_t* lens = calloc(c->novr + 1, sizeof *lens);
    const int64_t** shapes = calloc(c->novr + 1, sizeof *shapes);
    const int64_t** strides = calloc(c->novr + 1, sizeof *strides);
    for(uint32_t i = 0; i < c->novr; i++)
    {
        uids[i] = c->ovr[i].uid;
        lens[i] = c->ovr[i].len;
        shapes[i] = c->ovr[i].dims;
        strides[i] = c->ovr[i].strides;
    }
    hipdnnPluginStatus_t st = P.ExecuteOpGraphWithOverrides(h, ctx, NULL, dev, ndev, c->novr, uids, lens, shapes,
                                                            strides);
    free(uids);
    free(lens);
    free(shapes);
    free(strides);
    return st;
}

static hipdnnPluginStatus_t run_case(const test_case* c, hipdnnEnginePluginHandle_t h,
                                     hipdnnEnginePluginExecutionContext_t ctx, case_mem* m, int force_overrides_api)
{
    return run_dev(c, h, ctx, m->dev, c->nbuf, force_overrides_api);
}

static void execute_and_check(const test_case* c, hipdnnEnginePluginHandle_t h,
                              hipdnnEnginePluginExecutionContext_t ctx, const char* label)
{
    case_mem m;
    mem_init(c, &m);
    hipdnnPluginStatus_t st = run_case(c, h, ctx, &m, 0);
    CHECK(st == HIPDNN_PLUGIN_STATUS_SUCCESS, "%s/%s: execute -> %s (%s)", c->name, label, status_name(st),
          last_error());
    CHECK(mem_matches(c, &m, label, 1), "%s/%s: wrong numbers", c->name, label);
    if(c->novr == 0)
    {
        /* Same result through the overrides entry point with no overrides. */
        mem_reset(c, &m);
        st = run_case(c, h, ctx, &m, 1);
        CHECK(st == HIPDNN_PLUGIN_STATUS_SUCCESS, "%s/%s: execute with 0 overrides -> %s (%s)", c->name, label,
              status_name(st), last_error());
        CHECK(mem_matches(c, &m, label, 1), "%s/%s: wrong numbers with 0 overrides", c->name, label);
    }
    mem_free(c, &m);
    printf("EXECUTED %s %s\n", c->name, label);
}

/* ---- globals shared by the sections ------------------------------------------------------ */

static int64_t g_engine_id;
static hipdnnPluginConstData_t g_cfg, g_cfg_wrong, g_cfg_knob, g_cfg_junk;
static const char* g_workdir;

static uint64_t fnv1a64(const void* data, size_t n)
{
    const uint8_t* p = (const uint8_t*)data;
    uint64_t h = 0xcbf29ce484222325ull;
    for(size_t i = 0; i < n; i++)
    {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static void put16(uint8_t* p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static void put32(uint8_t* p, uint32_t v)
{
    for(int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t* p, uint64_t v)
{
    for(int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* ---- payload checks ---------------------------------------------------------------------- */

static const char* FROM_SER = "hipdnnEnginePluginCreateExecutionContextFromSerialized";

/* Expect rejection (BAD_PARAM or INVALID_VALUE as given) and an untouched output. */
static void expect_payload_rejected(hipdnnEnginePluginHandle_t h, const uint8_t* bytes, size_t size,
                                    hipdnnPluginStatus_t want, const char* needle, const char* what)
{
    hipdnnEnginePluginExecutionContext_t sentinel = (hipdnnEnginePluginExecutionContext_t)(uintptr_t)0x5a5a5a50u;
    hipdnnEnginePluginExecutionContext_t out = sentinel;
    hipdnnPluginConstData_t d = {bytes, size};
    reset_last_error();
    hipdnnPluginStatus_t st = P.CreateFromSerialized(h, &d, &out);
    const char* le = last_error();
    CHECK(st == want, "payload '%s' -> %s, want %s (%s)", what, status_name(st), status_name(want), le);
    CHECK(strncmp(le, FROM_SER, strlen(FROM_SER)) == 0 && strstr(le, needle) != NULL,
          "payload '%s': last error '%s' lacks '%s'", what, le, needle);
    CHECK(out == sentinel, "payload '%s': output written on failure", what);
    if(st == HIPDNN_PLUGIN_STATUS_SUCCESS && out != sentinel)
    {
        hipdnnPluginStatus_t st2 = P.DestroyExecutionContext(h, out);
        (void)st2;
    }
}

static void payload_checks(const test_case* c, hipdnnEnginePluginHandle_t h, const uint8_t* pay, size_t size)
{
    uint8_t* b = malloc(size + 64);
    const size_t H = 12, PRE = 24;
    CHECK(size > H + PRE && memcmp(pay, "HCSP", 4) == 0, "payload header");
    CHECK(pay[4] == 1 && pay[5] == 0 && pay[6] == 0 && pay[7] == 0 && pay[8] == 1, "payload version/kind");

#define FRESH() memcpy(b, pay, size)
    FRESH();
    b[0] = 'X';
    expect_payload_rejected(h, b, size, HIPDNN_PLUGIN_STATUS_INVALID_VALUE, "magic", "bad magic");
    FRESH();
    put16(b + 4, 2);
    expect_payload_rejected(h, b, size, HIPDNN_PLUGIN_STATUS_INVALID_VALUE, "format 2.0", "newer major");
    FRESH();
    put16(b + 4, 0);
    expect_payload_rejected(h, b, size, HIPDNN_PLUGIN_STATUS_INVALID_VALUE, "format 0.0", "major 0");
    FRESH();
    put32(b + 8, 2);
    expect_payload_rejected(h, b, size, HIPDNN_PLUGIN_STATUS_INVALID_VALUE, "kind 2", "unknown kind");
    FRESH();
    put32(b + 8, 0);
    expect_payload_rejected(h, b, size, HIPDNN_PLUGIN_STATUS_INVALID_VALUE, "kind 0", "kind 0");
    FRESH();
    expect_payload_rejected(h, b, H, HIPDNN_PLUGIN_STATUS_BAD_PARAM, "empty payload", "header only");
    for(size_t n = 1; n < size; n++)
    {
        /* Every truncation is rejected; below the header it is BAD_PARAM "truncated". */
        hipdnnPluginStatus_t want = HIPDNN_PLUGIN_STATUS_BAD_PARAM;
        const char* needle = n == H ? "empty" : "truncated";
        char what[64];
        snprintf(what, sizeof what, "truncated to %zu", n);
        expect_payload_rejected(h, b, n, want, needle, what);
    }
    expect_payload_rejected(h, b, 0, HIPDNN_PLUGIN_STATUS_BAD_PARAM, "empty", "size 0");
    expect_payload_rejected(h, NULL, size, HIPDNN_PLUGIN_STATUS_BAD_PARAM, "empty", "NULL ptr");
    FRESH();
    b[H + PRE + c->graph_size / 2] ^= 0x40;
    expect_payload_rejected(h, b, size, HIPDNN_PLUGIN_STATUS_BAD_PARAM, "checksum", "flipped graph byte");
    FRESH();
    b[H + 8] ^= 1;
    expect_payload_rejected(h, b, size, HIPDNN_PLUGIN_STATUS_BAD_PARAM, "checksum", "flipped checksum");
    FRESH();
    put64(b + H, (uint64_t)g_engine_id + 1);
    expect_payload_rejected(h, b, size, HIPDNN_PLUGIN_STATUS_INVALID_VALUE, "engine id", "wrong engine id");
    FRESH();
    b[size] = 0;
    expect_payload_rejected(h, b, size + 1, HIPDNN_PLUGIN_STATUS_BAD_PARAM, "trailing", "trailing byte");
    FRESH();
    put32(b + H + 20, 7);
    expect_payload_rejected(h, b, size, HIPDNN_PLUGIN_STATUS_BAD_PARAM, "reserved", "reserved field set");
    FRESH();
    put32(b + H + 16, 0);
    expect_payload_rejected(h, b, size, HIPDNN_PLUGIN_STATUS_BAD_PARAM, "empty graph", "graph size 0");
    FRESH();
    put32(b + H + 16, c->graph_size + 1);
    expect_payload_rejected(h, b, size, HIPDNN_PLUGIN_STATUS_BAD_PARAM, "truncated", "graph size too big");
    /* Junk graph with a matching checksum: caught by the graph reader. */
    FRESH();
    for(size_t i = H + PRE; i < size; i++)
        b[i] = (uint8_t)(0xA5 ^ (i * 7));
    put64(b + H + 8, fnv1a64(b + H + PRE, size - H - PRE));
    expect_payload_rejected(h, b, size, HIPDNN_PLUGIN_STATUS_BAD_PARAM, "invalid op graph", "junk graph");

    /* A newer minor version is accepted (trailing bytes allowed) and runs. */
    FRESH();
    put16(b + 6, 3);
    memset(b + size, 0xEE, 8);
    hipdnnPluginConstData_t d = {b, size + 8};
    hipdnnEnginePluginExecutionContext_t ctx = NULL;
    EXPECT_OK(P.CreateFromSerialized(h, &d, &ctx));
    if(ctx != NULL)
    {
        memset(b, 0, size + 8); /* the plugin must not keep pointers into the payload */
        execute_and_check(c, h, ctx, "newer-minor-payload");
        EXPECT_OK(P.DestroyExecutionContext(h, ctx));
    }

    /* Random corruptions: never crash; rejected unless only the minor version changed. */
    uint32_t seed = 12345;
    for(int it = 0; it < 400; it++)
    {
        FRESH();
        int flips = 1 + it % 3;
        for(int k = 0; k < flips; k++)
        {
            seed = seed * 1103515245u + 12345u;
            size_t pos = (seed >> 8) % size;
            seed = seed * 1103515245u + 12345u;
            b[pos] ^= (uint8_t)(1u + ((seed >> 16) % 255u));
        }
        hipdnnEnginePluginExecutionContext_t out = NULL;
        hipdnnPluginConstData_t dd = {b, size};
        hipdnnPluginStatus_t st = P.CreateFromSerialized(h, &dd, &out);
        /* Acceptable changes: the minor version, and (for a newer minor) the reserved field. */
        int minor_changed = memcmp(b + 6, pay + 6, 2) != 0;
        int only_minor = memcmp(b, pay, 6) == 0 && memcmp(b + 8, pay + 8, H + 20 - 8) == 0
                         && memcmp(b + H + PRE, pay + H + PRE, size - H - PRE) == 0
                         && (minor_changed || memcmp(b + H + 20, pay + H + 20, 4) == 0);
        if(st == HIPDNN_PLUGIN_STATUS_SUCCESS)
        {
            CHECK(only_minor, "corrupted payload accepted (iteration %d)", it);
            EXPECT_OK(P.DestroyExecutionContext(h, out));
        }
        else
            CHECK(st == HIPDNN_PLUGIN_STATUS_BAD_PARAM || st == HIPDNN_PLUGIN_STATUS_INVALID_VALUE,
                  "corrupted payload -> %s", status_name(st));
    }
#undef FRESH
    free(b);
}

/* ---- one case, in backend order ---------------------------------------------------------- */

static void run_test_case(const test_case* c, hipdnnEnginePluginHandle_t h, hipdnnEnginePluginHandle_t h2)
{
    hipdnnPluginConstData_t graph = {c->graph, c->graph_size};
    int64_t ids[4] = {0, 0, 0, 0};
    uint32_t n = 99;
    EXPECT_OK(P.GetApplicableEngineIds(h, &graph, ids, 1, &n));
    printf("CASE %s applicable=%u\n", c->name, n);
    CHECK(n == c->applicable, "%s: %u applicable engines, want %u", c->name, n, c->applicable);
    if(n == 1)
        CHECK(ids[0] == g_engine_id, "%s: applicable id %lld", c->name, (long long)ids[0]);
    /* Count query: no array. */
    uint32_t n0 = 99;
    EXPECT_OK(P.GetApplicableEngineIds(h, &graph, NULL, 0, &n0));
    CHECK(n0 == c->applicable, "%s: count query %u", c->name, n0);

    hipdnnEnginePluginExecutionContext_t ctx = NULL;
    if(!c->applicable)
    {
        hipdnnEnginePluginExecutionContext_t sentinel = (hipdnnEnginePluginExecutionContext_t)(uintptr_t)0x1230u;
        ctx = sentinel;
        EXPECT_FAIL(P.CreateExecutionContext(h, &g_cfg, &graph, &ctx), HIPDNN_PLUGIN_STATUS_NOT_APPLICABLE,
                    "hipdnnEnginePluginCreateExecutionContext", "does not support");
        CHECK(ctx == sentinel, "%s: context written on failure", c->name);
        size_t ws = 7;
        EXPECT_FAIL(P.GetWorkspaceSize(h, &g_cfg, &graph, &ws), HIPDNN_PLUGIN_STATUS_NOT_APPLICABLE,
                    "hipdnnEnginePluginGetWorkspaceSize", "does not support");
        return;
    }

    /* Engine details (engine finalize), destroyed when the engine descriptor dies. */
    hipdnnPluginConstData_t det = {NULL, 0};
    EXPECT_OK(P.GetEngineDetails(h, g_engine_id, &graph, &det));
    CHECK(det.ptr != NULL && det.size > 0, "%s: empty engine details", c->name);
    if(det.ptr != NULL)
    {
        char path[1024];
        snprintf(path, sizeof path, "%s/out/details_%s.bin", g_workdir, c->name);
        write_file(path, det.ptr, det.size);
    }
    hipdnnPluginConstData_t stale = det;
    EXPECT_OK(P.DestroyEngineDetails(h, &det));
    CHECK(det.ptr == NULL && det.size == 0, "%s: details not zeroed", c->name);
    EXPECT_OK(P.DestroyEngineDetails(h, &det)); /* zeroed struct: nothing to do */
    EXPECT_FAIL(P.DestroyEngineDetails(h, &stale), HIPDNN_PLUGIN_STATUS_BAD_PARAM,
                "hipdnnEnginePluginDestroyEngineDetails", "not created by this plugin");

    /* Engine config finalize. */
    size_t ws = 99;
    EXPECT_OK(P.GetWorkspaceSize(h, &g_cfg, &graph, &ws));
    CHECK(ws == 0, "%s: workspace %zu", c->name, ws);

    /* Plan finalize. */
    EXPECT_OK(P.CreateExecutionContext(h, &g_cfg, &graph, &ctx));
    CHECK(ctx != NULL, "%s: NULL context", c->name);
    if(ctx == NULL)
        return;
    ws = 99;
    EXPECT_OK(P.GetWorkspaceSizeFromExecutionContext(h, ctx, &ws));
    CHECK(ws == 0, "%s: workspace from context %zu", c->name, ws);

    /* Execute (twice: scratch reuse), and through a different plugin handle. */
    execute_and_check(c, h, ctx, "execute");
    execute_and_check(c, h, ctx, "execute-again");
    execute_and_check(c, h2, ctx, "execute-other-handle");

    /* Missing / NULL device buffers. */
    if(c->nbuf > 0)
    {
        case_mem m;
        mem_init(c, &m);
        char needle[64];
        snprintf(needle, sizeof needle, "uid %lld", (long long)c->bufs[0].uid);
        EXPECT_FAIL(run_dev(c, h, ctx, m.dev + 1, c->nbuf - 1, 0) /* first one left out */,
                    HIPDNN_PLUGIN_STATUS_INVALID_VALUE, "hipdnnEnginePluginExecuteOpGraph", needle);
        /* Last buffer left out. */
        snprintf(needle, sizeof needle, "uid %lld", (long long)c->bufs[c->nbuf - 1].uid);
        EXPECT_FAIL(run_dev(c, h, ctx, m.dev, c->nbuf - 1, 0), HIPDNN_PLUGIN_STATUS_INVALID_VALUE,
                    "hipdnnEnginePluginExecuteOpGraph", needle);
        if(c->novr == 0)
        {
            void* saved = m.dev[0].ptr;
            m.dev[0].ptr = NULL;
            EXPECT_FAIL(P.ExecuteOpGraph(h, ctx, NULL, m.dev, c->nbuf), HIPDNN_PLUGIN_STATUS_INVALID_VALUE,
                        "hipdnnEnginePluginExecuteOpGraph", "is NULL");
            m.dev[0].ptr = saved;
            EXPECT_FAIL(P.ExecuteOpGraph(h, ctx, NULL, NULL, c->nbuf), HIPDNN_PLUGIN_STATUS_BAD_PARAM,
                        "hipdnnEnginePluginExecuteOpGraph", "device_buffers is NULL");
        }
        /* Extra buffers with unknown uids are ignored. */
        hipdnnPluginDeviceBuffer_t* more = calloc(c->nbuf + 2, sizeof *more);
        float junk_buf[4] = {0, 0, 0, 0};
        more[0] = (hipdnnPluginDeviceBuffer_t){-424242, junk_buf};
        memcpy(more + 1, m.dev, c->nbuf * sizeof *more);
        more[c->nbuf + 1] = (hipdnnPluginDeviceBuffer_t){-434343, NULL};
        mem_reset(c, &m);
        EXPECT_OK(run_dev(c, h, ctx, more, c->nbuf + 2, 0));
        CHECK(mem_matches(c, &m, "extra-buffers", 1), "%s: wrong numbers with extra buffers", c->name);
        free(more);
        mem_free(c, &m);
    }

    /* Plan serialize: payload copied, then destroyed. */
    hipdnnPluginConstData_t pay = {NULL, 0};
    EXPECT_OK(P.SerializeWithEngineId(h, g_engine_id, ctx, &pay));
    CHECK(pay.ptr != NULL && pay.size > 0, "%s: empty payload", c->name);
    uint8_t* copy = NULL;
    size_t copy_size = pay.size;
    if(pay.ptr != NULL)
    {
        copy = malloc(pay.size);
        memcpy(copy, pay.ptr, pay.size);
        char path[1024];
        snprintf(path, sizeof path, "%s/out/payload_%s.bin", g_workdir, c->name);
        write_file(path, pay.ptr, pay.size);
    }
    hipdnnPluginConstData_t stale_pay = pay;
    EXPECT_OK(P.DestroySerialized(h, &pay));
    CHECK(pay.ptr == NULL && pay.size == 0, "%s: payload struct not zeroed", c->name);
    EXPECT_OK(P.DestroySerialized(h, &pay));
    EXPECT_FAIL(P.DestroySerialized(h, &stale_pay), HIPDNN_PLUGIN_STATUS_BAD_PARAM,
                "hipdnnEnginePluginDestroySerializedExecutionContext", "not created by this plugin");
    /* The legacy 3-argument form gives the same bytes. */
    hipdnnPluginConstData_t pay2 = {NULL, 0};
    EXPECT_OK(P.SerializeLegacy(h, ctx, &pay2));
    CHECK(copy != NULL && pay2.size == copy_size && memcmp(pay2.ptr, copy, copy_size) == 0,
          "%s: legacy serialize differs", c->name);
    EXPECT_OK(P.DestroySerialized(h, &pay2));
    hipdnnPluginConstData_t pay3 = {NULL, 0};
    EXPECT_FAIL(P.SerializeWithEngineId(h, g_engine_id ^ 1, ctx, &pay3), HIPDNN_PLUGIN_STATUS_INVALID_VALUE,
                "hipdnnEnginePluginSerializeExecutionContextWithEngineId", "unknown engine id");
    CHECK(pay3.ptr == NULL, "%s: payload written on failure", c->name);

    /* Destroy the original plan, then deserialize into a fresh context (other handle) and run. */
    EXPECT_OK(P.DestroyExecutionContext(h, ctx));
    EXPECT_FAIL(P.DestroyExecutionContext(h, ctx), HIPDNN_PLUGIN_STATUS_BAD_PARAM,
                "hipdnnEnginePluginDestroyExecutionContext", "unknown or destroyed");
    case_mem m;
    mem_init(c, &m);
    EXPECT_FAIL(run_case(c, h, ctx, &m, 0), HIPDNN_PLUGIN_STATUS_BAD_PARAM, "hipdnnEnginePluginExecuteOpGraph",
                "unknown or destroyed");
    mem_free(c, &m);
    if(copy != NULL)
    {
        hipdnnPluginConstData_t d = {copy, copy_size};
        hipdnnEnginePluginExecutionContext_t ctx2 = NULL;
        EXPECT_OK(P.CreateFromSerialized(h2, &d, &ctx2));
        if(ctx2 != NULL)
        {
            execute_and_check(c, h2, ctx2, "deserialized");
            size_t ws2 = 5;
            EXPECT_OK(P.GetWorkspaceSizeFromExecutionContext(h2, ctx2, &ws2));
            CHECK(ws2 == 0, "deserialized workspace");
            /* Round trip again: the same bytes come back. */
            hipdnnPluginConstData_t again = {NULL, 0};
            EXPECT_OK(P.SerializeWithEngineId(h2, g_engine_id, ctx2, &again));
            CHECK(again.size == copy_size && memcmp(again.ptr, copy, copy_size) == 0, "re-serialized bytes differ");
            EXPECT_OK(P.DestroySerialized(h2, &again));
            EXPECT_OK(P.DestroyExecutionContext(h2, ctx2));
        }
        payload_checks(c, h, copy, copy_size);
        free(copy);
    }
}

/* ---- junk graphs ------------------------------------------------------------------------- */

static void junk_graph_checks(const test_case* c, hipdnnEnginePluginHandle_t h)
{
    const char* GA = "hipdnnEnginePluginGetApplicableEngineIds";
    int64_t ids[2];
    uint32_t n = 0;
    uint8_t junk[64];
    for(size_t i = 0; i < sizeof junk; i++)
        junk[i] = (uint8_t)(i * 37 + 11);
    hipdnnPluginConstData_t g = {junk, sizeof junk};
    EXPECT_FAIL(P.GetApplicableEngineIds(h, &g, ids, 1, &n), HIPDNN_PLUGIN_STATUS_BAD_PARAM, GA, "invalid op graph");
    g.size = 3;
    EXPECT_FAIL(P.GetApplicableEngineIds(h, &g, ids, 1, &n), HIPDNN_PLUGIN_STATUS_BAD_PARAM, GA, "too small");
    uint8_t bad_root[16] = {0xF0, 0xFF, 0xFF, 0x7F};
    g.ptr = bad_root;
    g.size = sizeof bad_root;
    EXPECT_FAIL(P.GetApplicableEngineIds(h, &g, ids, 1, &n), HIPDNN_PLUGIN_STATUS_BAD_PARAM, GA, "out of bounds");
    uint8_t bad_vtable[16] = {8, 0, 0, 0, 0, 0, 0, 0, 0x00, 0x00, 0x00, 0x80};
    g.ptr = bad_vtable;
    EXPECT_FAIL(P.GetApplicableEngineIds(h, &g, ids, 1, &n), HIPDNN_PLUGIN_STATUS_BAD_PARAM, GA, "vtable");

    hipdnnPluginConstData_t jg = {junk, sizeof junk};
    hipdnnPluginConstData_t det = {NULL, 0};
    EXPECT_FAIL(P.GetEngineDetails(h, g_engine_id, &jg, &det), HIPDNN_PLUGIN_STATUS_BAD_PARAM,
                "hipdnnEnginePluginGetEngineDetails", "invalid op graph");
    CHECK(det.ptr == NULL, "details written on failure");
    size_t ws = 0;
    EXPECT_FAIL(P.GetWorkspaceSize(h, &g_cfg, &jg, &ws), HIPDNN_PLUGIN_STATUS_BAD_PARAM,
                "hipdnnEnginePluginGetWorkspaceSize", "invalid op graph");
    hipdnnEnginePluginExecutionContext_t ctx = NULL;
    EXPECT_FAIL(P.CreateExecutionContext(h, &g_cfg, &jg, &ctx), HIPDNN_PLUGIN_STATUS_BAD_PARAM,
                "hipdnnEnginePluginCreateExecutionContext", "invalid op graph");
    CHECK(ctx == NULL, "context written on failure");

    /* Every truncation of a valid graph, and random corruptions: never crash, never a bogus status. */
    uint8_t* b = malloc(c->graph_size);
    int rejected = 0, total = 0;
    for(uint32_t len = 0; len < c->graph_size; len++)
    {
        memcpy(b, c->graph, len);
        hipdnnPluginConstData_t t = {b, len};
        n = 42;
        hipdnnPluginStatus_t st = P.GetApplicableEngineIds(h, &t, ids, 1, &n);
        CHECK(st == HIPDNN_PLUGIN_STATUS_BAD_PARAM || (st == HIPDNN_PLUGIN_STATUS_SUCCESS && n <= 1),
              "truncated graph (%u bytes) -> %s", len, status_name(st));
        rejected += st != HIPDNN_PLUGIN_STATUS_SUCCESS;
        total++;
    }
    uint32_t seed = 777;
    for(int it = 0; it < 3000; it++)
    {
        memcpy(b, c->graph, c->graph_size);
        int flips = 1 + it % 4;
        for(int k = 0; k < flips; k++)
        {
            seed = seed * 1103515245u + 12345u;
            uint32_t pos = (seed >> 8) % c->graph_size;
            seed = seed * 1103515245u + 12345u;
            b[pos] ^= (uint8_t)(1u + ((seed >> 16) % 255u));
        }
        hipdnnPluginConstData_t t = {b, c->graph_size};
        n = 42;
        reset_last_error();
        hipdnnPluginStatus_t st = P.GetApplicableEngineIds(h, &t, ids, 1, &n);
        CHECK(st == HIPDNN_PLUGIN_STATUS_BAD_PARAM || (st == HIPDNN_PLUGIN_STATUS_SUCCESS && n <= 1),
              "corrupted graph -> %s", status_name(st));
        if(st != HIPDNN_PLUGIN_STATUS_SUCCESS)
        {
            rejected++;
            CHECK(strstr(last_error(), "invalid op graph") != NULL, "corrupted graph error: %s", last_error());
        }
        hipdnnPluginConstData_t d2 = {NULL, 0};
        st = P.GetEngineDetails(h, g_engine_id, &t, &d2);
        CHECK(st == HIPDNN_PLUGIN_STATUS_BAD_PARAM || st == HIPDNN_PLUGIN_STATUS_SUCCESS, "details of corrupted graph -> %s",
              status_name(st));
        if(st == HIPDNN_PLUGIN_STATUS_SUCCESS)
            EXPECT_OK(P.DestroyEngineDetails(h, &d2));
        total++;
    }
    printf("FUZZ graph %s: %d of %d mutated buffers rejected\n", c->name, rejected, total);
    free(b);
}

/* ---- NULL / unknown arguments ------------------------------------------------------------ */

static void null_checks(hipdnnEnginePluginHandle_t h, const test_case* c)
{
    const char* s = NULL;
    int dummy = 0;
    hipdnnEnginePluginHandle_t bogus = (hipdnnEnginePluginHandle_t)(void*)&dummy;
    hipdnnEnginePluginExecutionContext_t bogus_ctx = (hipdnnEnginePluginExecutionContext_t)(void*)&dummy;
    hipdnnPluginConstData_t graph = {c->graph, c->graph_size};
    hipdnnPluginConstData_t empty = {NULL, 10}, zero = {c->graph, 0};
    int64_t ids[2];
    uint32_t n = 0;
    size_t ws = 0;
    hipdnnPluginConstData_t d = {NULL, 0};
    hipdnnEnginePluginExecutionContext_t ctx = NULL;
    const hipdnnPluginStatus_t BAD = HIPDNN_PLUGIN_STATUS_BAD_PARAM;

    EXPECT_FAIL(P.GetVersion(NULL), BAD, "hipdnnPluginGetVersion", "NULL");
    EXPECT_FAIL(P.GetApiVersion(NULL), BAD, "hipdnnPluginGetApiVersion", "NULL");
    EXPECT_FAIL(P.GetType(NULL), BAD, "hipdnnPluginGetType", "NULL");
    EXPECT_FAIL(P.SetLoggingCallback(NULL), BAD, "hipdnnPluginSetLoggingCallback", "NULL");
    P.GetLastErrorString(NULL); /* no-op */
    EXPECT_FAIL(P.SetLogLevel((hipdnnSeverity_t)99), HIPDNN_PLUGIN_STATUS_INVALID_VALUE, "hipdnnPluginSetLogLevel",
                "99");
    EXPECT_FAIL(P.SetLogLevel((hipdnnSeverity_t)-1), HIPDNN_PLUGIN_STATUS_INVALID_VALUE, "hipdnnPluginSetLogLevel",
                "-1");
    EXPECT_FAIL(P.GetAllEngineIds(ids, 1, NULL), BAD, "hipdnnEnginePluginGetAllEngineIds", "num_engines");
    EXPECT_FAIL(P.GetAllEngineIds(NULL, 3, &n), BAD, "hipdnnEnginePluginGetAllEngineIds", "engine_ids");
    EXPECT_FAIL(P.GetEngineName(g_engine_id, NULL), BAD, "hipdnnEnginePluginGetEngineName", "NULL");
    EXPECT_FAIL(P.GetEngineName(g_engine_id + 1, &s), HIPDNN_PLUGIN_STATUS_INVALID_VALUE,
                "hipdnnEnginePluginGetEngineName", "unknown engine id");
    EXPECT_FAIL(P.Create(NULL), BAD, "hipdnnEnginePluginCreate", "NULL");
    EXPECT_FAIL(P.Destroy(NULL), BAD, "hipdnnEnginePluginDestroy", "NULL");
    EXPECT_FAIL(P.Destroy(bogus), BAD, "hipdnnEnginePluginDestroy", "unknown");
    EXPECT_FAIL(P.SetStream(NULL, NULL), BAD, "hipdnnEnginePluginSetStream", "NULL");
    EXPECT_FAIL(P.SetStream(bogus, NULL), BAD, "hipdnnEnginePluginSetStream", "unknown");

    const char* GA = "hipdnnEnginePluginGetApplicableEngineIds";
    EXPECT_FAIL(P.GetApplicableEngineIds(NULL, &graph, ids, 1, &n), BAD, GA, "NULL");
    EXPECT_FAIL(P.GetApplicableEngineIds(bogus, &graph, ids, 1, &n), BAD, GA, "unknown");
    EXPECT_FAIL(P.GetApplicableEngineIds(h, NULL, ids, 1, &n), BAD, GA, "op graph is NULL");
    EXPECT_FAIL(P.GetApplicableEngineIds(h, &empty, ids, 1, &n), BAD, GA, "empty");
    EXPECT_FAIL(P.GetApplicableEngineIds(h, &zero, ids, 1, &n), BAD, GA, "empty");
    EXPECT_FAIL(P.GetApplicableEngineIds(h, &graph, NULL, 1, &n), BAD, GA, "engine_ids");
    EXPECT_FAIL(P.GetApplicableEngineIds(h, &graph, ids, 1, NULL), BAD, GA, "num_engines");

    const char* GD = "hipdnnEnginePluginGetEngineDetails";
    EXPECT_FAIL(P.GetEngineDetails(NULL, g_engine_id, &graph, &d), BAD, GD, "NULL");
    EXPECT_FAIL(P.GetEngineDetails(bogus, g_engine_id, &graph, &d), BAD, GD, "unknown");
    EXPECT_FAIL(P.GetEngineDetails(h, g_engine_id, NULL, &d), BAD, GD, "op graph");
    EXPECT_FAIL(P.GetEngineDetails(h, g_engine_id, &graph, NULL), BAD, GD, "engine_details");
    EXPECT_FAIL(P.GetEngineDetails(h, g_engine_id + 1, &graph, &d), HIPDNN_PLUGIN_STATUS_INVALID_VALUE, GD,
                "unknown engine id");
    CHECK(d.ptr == NULL, "details written on failure");
    EXPECT_FAIL(P.DestroyEngineDetails(h, NULL), BAD, "hipdnnEnginePluginDestroyEngineDetails", "NULL");
    EXPECT_FAIL(P.DestroyEngineDetails(NULL, &d), BAD, "hipdnnEnginePluginDestroyEngineDetails", "NULL");
    hipdnnPluginConstData_t foreign = {c->graph, c->graph_size};
    EXPECT_FAIL(P.DestroyEngineDetails(h, &foreign), BAD, "hipdnnEnginePluginDestroyEngineDetails",
                "not created by this plugin");

    const char* WS = "hipdnnEnginePluginGetWorkspaceSize";
    EXPECT_FAIL(P.GetWorkspaceSize(NULL, &g_cfg, &graph, &ws), BAD, WS, "NULL");
    EXPECT_FAIL(P.GetWorkspaceSize(h, NULL, &graph, &ws), BAD, WS, "engine config is NULL");
    EXPECT_FAIL(P.GetWorkspaceSize(h, &g_cfg, NULL, &ws), BAD, WS, "op graph is NULL");
    EXPECT_FAIL(P.GetWorkspaceSize(h, &g_cfg, &graph, NULL), BAD, WS, "workspace_size");
    EXPECT_FAIL(P.GetWorkspaceSize(h, &g_cfg_wrong, &graph, &ws), HIPDNN_PLUGIN_STATUS_INVALID_VALUE, WS,
                "engine config is for engine id");
    EXPECT_FAIL(P.GetWorkspaceSize(h, &g_cfg_knob, &graph, &ws), HIPDNN_PLUGIN_STATUS_INVALID_VALUE, WS,
                "'tile_size'");
    EXPECT_FAIL(P.GetWorkspaceSize(h, &g_cfg_junk, &graph, &ws), BAD, WS, "invalid engine config");

    const char* CE = "hipdnnEnginePluginCreateExecutionContext";
    EXPECT_FAIL(P.CreateExecutionContext(NULL, &g_cfg, &graph, &ctx), BAD, CE, "NULL");
    EXPECT_FAIL(P.CreateExecutionContext(bogus, &g_cfg, &graph, &ctx), BAD, CE, "unknown");
    EXPECT_FAIL(P.CreateExecutionContext(h, NULL, &graph, &ctx), BAD, CE, "engine config is NULL");
    EXPECT_FAIL(P.CreateExecutionContext(h, &g_cfg, NULL, &ctx), BAD, CE, "op graph is NULL");
    EXPECT_FAIL(P.CreateExecutionContext(h, &g_cfg, &graph, NULL), BAD, CE, "execution_context");
    EXPECT_FAIL(P.CreateExecutionContext(h, &g_cfg_wrong, &graph, &ctx), HIPDNN_PLUGIN_STATUS_INVALID_VALUE, CE,
                "engine config is for engine id");
    EXPECT_FAIL(P.CreateExecutionContext(h, &g_cfg_junk, &graph, &ctx), BAD, CE, "invalid engine config");
    CHECK(ctx == NULL, "context written on failure");

    EXPECT_FAIL(P.DestroyExecutionContext(h, NULL), BAD, "hipdnnEnginePluginDestroyExecutionContext", "NULL");
    EXPECT_FAIL(P.DestroyExecutionContext(h, bogus_ctx), BAD, "hipdnnEnginePluginDestroyExecutionContext", "unknown");

    EXPECT_OK(P.CreateExecutionContext(h, &g_cfg, &graph, &ctx));
    const char* WC = "hipdnnEnginePluginGetWorkspaceSizeFromExecutionContext";
    EXPECT_FAIL(P.GetWorkspaceSizeFromExecutionContext(NULL, ctx, &ws), BAD, WC, "NULL");
    EXPECT_FAIL(P.GetWorkspaceSizeFromExecutionContext(h, NULL, &ws), BAD, WC, "NULL");
    EXPECT_FAIL(P.GetWorkspaceSizeFromExecutionContext(h, ctx, NULL), BAD, WC, "NULL");
    EXPECT_FAIL(P.GetWorkspaceSizeFromExecutionContext(h, bogus_ctx, &ws), BAD, WC, "unknown");
    EXPECT_FAIL(P.DestroyExecutionContext(NULL, ctx), BAD, "hipdnnEnginePluginDestroyExecutionContext", "NULL");

    const char* EX = "hipdnnEnginePluginExecuteOpGraph";
    hipdnnPluginDeviceBuffer_t buf = {1, &dummy};
    EXPECT_FAIL(P.ExecuteOpGraph(NULL, ctx, NULL, &buf, 1), BAD, EX, "NULL");
    EXPECT_FAIL(P.ExecuteOpGraph(h, NULL, NULL, &buf, 1), BAD, EX, "NULL");
    EXPECT_FAIL(P.ExecuteOpGraph(h, bogus_ctx, NULL, &buf, 1), BAD, EX, "unknown");
    EXPECT_FAIL(P.ExecuteOpGraph(h, ctx, NULL, NULL, 2), BAD, EX, "device_buffers");
    const char* EO = "hipdnnEnginePluginExecuteOpGraphWithOverrides";
    EXPECT_FAIL(P.ExecuteOpGraphWithOverrides(h, ctx, NULL, &buf, 1, 1, NULL, NULL, NULL, NULL), BAD, EO,
                "override arrays");

    const char* SE = "hipdnnEnginePluginSerializeExecutionContextWithEngineId";
    EXPECT_FAIL(P.SerializeWithEngineId(NULL, g_engine_id, ctx, &d), BAD, SE, "NULL");
    EXPECT_FAIL(P.SerializeWithEngineId(h, g_engine_id, NULL, &d), BAD, SE, "NULL");
    EXPECT_FAIL(P.SerializeWithEngineId(h, g_engine_id, ctx, NULL), BAD, SE, "NULL");
    EXPECT_FAIL(P.SerializeWithEngineId(h, g_engine_id, bogus_ctx, &d), BAD, SE, "unknown");
    EXPECT_FAIL(P.SerializeLegacy(h, NULL, &d), BAD, "hipdnnEnginePluginSerializeExecutionContext", "NULL");
    EXPECT_FAIL(P.DestroySerialized(h, NULL), BAD, "hipdnnEnginePluginDestroySerializedExecutionContext", "NULL");
    EXPECT_FAIL(P.DestroySerialized(NULL, &d), BAD, "hipdnnEnginePluginDestroySerializedExecutionContext", "NULL");
    hipdnnEnginePluginExecutionContext_t ctx2 = NULL;
    EXPECT_FAIL(P.CreateFromSerialized(h, NULL, &ctx2), BAD, FROM_SER, "NULL");
    EXPECT_FAIL(P.CreateFromSerialized(NULL, &graph, &ctx2), BAD, FROM_SER, "NULL");
    EXPECT_FAIL(P.CreateFromSerialized(h, &graph, NULL), BAD, FROM_SER, "NULL");
    EXPECT_FAIL(P.CreateFromSerialized(h, &graph, &ctx2), HIPDNN_PLUGIN_STATUS_INVALID_VALUE, FROM_SER, "magic");
    CHECK(ctx2 == NULL, "context written on failure");
    EXPECT_OK(P.DestroyExecutionContext(h, ctx));
}

/* ---- override checks --------------------------------------------------------------------- */

static void override_checks(const test_case* c, hipdnnEnginePluginHandle_t h)
{
    if(c->novr == 0)
        return;
    hipdnnPluginConstData_t graph = {c->graph, c->graph_size};
    hipdnnEnginePluginExecutionContext_t ctx = NULL;
    EXPECT_OK(P.CreateExecutionContext(h, &g_cfg, &graph, &ctx));
    if(ctx == NULL)
        return;
    case_mem m;
    mem_init(c, &m);
    const char* EO = "hipdnnEnginePluginExecuteOpGraphWithOverrides";
    int64_t uid = c->ovr[0].uid;
    uint32_t len = c->ovr[0].len;
    const int64_t* shape = c->ovr[0].dims;
    const int64_t* stride = c->ovr[0].strides;
    int64_t unknown = 987654321;
    EXPECT_FAIL(P.ExecuteOpGraphWithOverrides(h, ctx, NULL, m.dev, c->nbuf, 1, &unknown, &len, &shape, &stride),
                HIPDNN_PLUGIN_STATUS_INVALID_VALUE, EO, "not in the graph");
    uint32_t zero = 0;
    EXPECT_FAIL(P.ExecuteOpGraphWithOverrides(h, ctx, NULL, m.dev, c->nbuf, 1, &uid, &zero, &shape, &stride),
                HIPDNN_PLUGIN_STATUS_INVALID_VALUE, EO, "dims");
    const int64_t* null_shape = NULL;
    EXPECT_FAIL(P.ExecuteOpGraphWithOverrides(h, ctx, NULL, m.dev, c->nbuf, 1, &uid, &len, &null_shape, &stride),
                HIPDNN_PLUGIN_STATUS_BAD_PARAM, EO, "NULL");
    int64_t uids2[2] = {uid, uid};
    uint32_t lens2[2] = {len, len};
    const int64_t* shapes2[2] = {shape, shape};
    const int64_t* strides2[2] = {stride, stride};
    EXPECT_FAIL(P.ExecuteOpGraphWithOverrides(h, ctx, NULL, m.dev, c->nbuf, 2, uids2, lens2, shapes2, strides2),
                HIPDNN_PLUGIN_STATUS_INVALID_VALUE, EO, "twice");
    /* Only the first override: the other tensors keep their graph shapes -> inconsistent. */
    EXPECT_FAIL(P.ExecuteOpGraphWithOverrides(h, ctx, NULL, m.dev, c->nbuf, 1, &uid, &len, &shape, &stride),
                HIPDNN_PLUGIN_STATUS_INVALID_VALUE, EO, "inconsistent");
    int64_t neg[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
    const int64_t* negp = neg;
    EXPECT_FAIL(P.ExecuteOpGraphWithOverrides(h, ctx, NULL, m.dev, c->nbuf, 1, &uid, &len, &negp, &stride),
                HIPDNN_PLUGIN_STATUS_INVALID_VALUE, EO, "bad dim");
    mem_free(c, &m);
    EXPECT_OK(P.DestroyExecutionContext(h, ctx));
}

/* ---- threads ----------------------------------------------------------------------------- */

typedef struct
{
    const test_case* c;
    hipdnnEnginePluginHandle_t h;
    hipdnnEnginePluginExecutionContext_t ctx;
    int index;
    int ok;
} thread_arg;

static void* thread_main(void* p)
{
    thread_arg* a = (thread_arg*)p;
    case_mem m;
    mem_init(a->c, &m);
    a->ok = 1;
    char needle[64];
    int64_t my_bad_id = g_engine_id ^ (int64_t)(a->index + 1);
    snprintf(needle, sizeof needle, "%lld", (long long)my_bad_id);
    hipdnnPluginConstData_t graph = {a->c->graph, a->c->graph_size};
    for(int it = 0; it < 60; it++)
    {
        mem_reset(a->c, &m);
        if(run_case(a->c, a->h, a->ctx, &m, 0) != HIPDNN_PLUGIN_STATUS_SUCCESS || !mem_matches(a->c, &m, "thread", 1))
            a->ok = 0;
        /* Per-thread last error: my failure, my message. */
        const char* name = NULL;
        if(P.GetEngineName(my_bad_id, &name) != HIPDNN_PLUGIN_STATUS_INVALID_VALUE || strstr(last_error(), needle) == NULL)
            a->ok = 0;
        /* Concurrent create/destroy of handles and contexts. */
        hipdnnEnginePluginHandle_t h2 = NULL;
        hipdnnEnginePluginExecutionContext_t ctx2 = NULL;
        if(P.Create(&h2) != HIPDNN_PLUGIN_STATUS_SUCCESS
           || P.CreateExecutionContext(h2, &g_cfg, &graph, &ctx2) != HIPDNN_PLUGIN_STATUS_SUCCESS)
            a->ok = 0;
        if(ctx2 != NULL && it % 2 == 0)
        {
            mem_reset(a->c, &m);
            if(run_case(a->c, h2, ctx2, &m, 0) != HIPDNN_PLUGIN_STATUS_SUCCESS || !mem_matches(a->c, &m, "thread2", 1))
                a->ok = 0;
        }
        if(P.DestroyExecutionContext(h2, ctx2) != HIPDNN_PLUGIN_STATUS_SUCCESS
           || P.Destroy(h2) != HIPDNN_PLUGIN_STATUS_SUCCESS)
            a->ok = 0;
        if(strstr(last_error(), needle) == NULL) /* successes leave my last error alone */
            a->ok = 0;
    }
    mem_free(a->c, &m);
    return NULL;
}

static void thread_checks(const test_case* c, hipdnnEnginePluginHandle_t h)
{
    hipdnnPluginConstData_t graph = {c->graph, c->graph_size};
    hipdnnEnginePluginExecutionContext_t ctx = NULL;
    EXPECT_OK(P.CreateExecutionContext(h, &g_cfg, &graph, &ctx));
    enum
    {
        NT = 8
    };
    pthread_t th[NT];
    thread_arg args[NT];
    for(int i = 0; i < NT; i++)
    {
        args[i] = (thread_arg){c, h, ctx, i, 0};
        pthread_create(&th[i], NULL, thread_main, &args[i]);
    }
    for(int i = 0; i < NT; i++)
    {
        pthread_join(th[i], NULL);
        CHECK(args[i].ok, "thread %d saw a wrong result or a foreign last error", i);
    }
    EXPECT_OK(P.DestroyExecutionContext(h, ctx));
    printf("THREADS %s ok\n", c->name);
}

/* ---- main -------------------------------------------------------------------------------- */

int main(int argc, char** argv)
{
    if(argc < 3)
    {
        fprintf(stderr, "usage: %s plugin.so workdir case...\n", argv[0]);
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    g_workdir = argv[2];
    g_lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if(g_lib == NULL)
    {
        fprintf(stderr, "dlopen failed: %s\n", dlerror());
        return 2;
    }
    if(!load_symbols())
        return 1;

    /* 1. Identity, in the order the backend's loader asks. */
    const char *name = NULL, *version = NULL, *api = NULL;
    hipdnnPluginType_t type = HIPDNN_PLUGIN_TYPE_UNSPECIFIED;
    EXPECT_OK(P.GetName(&name));
    EXPECT_OK(P.GetVersion(&version));
    EXPECT_OK(P.GetType(&type));
    EXPECT_OK(P.GetApiVersion(&api));
    printf("PLUGIN name=%s version=%s type=%d api=%s\n", name, version, (int)type, api);
    CHECK(name && strcmp(name, "hipdnn_c_sample_plugin") == 0, "name %s", name);
    CHECK(type == HIPDNN_PLUGIN_TYPE_ENGINE, "type %d", (int)type);
    CHECK(api && strcmp(api, "1.1.0") == 0, "api %s", api);

    /* 2. Logging. */
    EXPECT_OK(P.SetLoggingCallback(log_cb));
    EXPECT_OK(P.SetLogLevel(HIPDNN_SEV_INFO));

    /* 3. Engine ids: count query, then fetch. */
    uint32_t count = 0, count2 = 0;
    EXPECT_OK(P.GetAllEngineIds(NULL, 0, &count));
    CHECK(count == 1, "engine count %u", count);
    int64_t ids[4] = {0, 0, 0, 0};
    EXPECT_OK(P.GetAllEngineIds(ids, count, &count2));
    CHECK(count2 == count, "second count %u", count2);
    g_engine_id = ids[0];
    int64_t want_id = (int64_t)fnv1a64(ENGINE_NAME, strlen(ENGINE_NAME));
    printf("ENGINE id=%lld hex=0x%016llX\n", (long long)g_engine_id, (unsigned long long)g_engine_id);
    CHECK(g_engine_id == want_id, "engine id %lld, want %lld", (long long)g_engine_id, (long long)want_id);

    /* 4. Engine name (authoritative), must hash to the id. */
    const char* ename = NULL;
    EXPECT_OK(P.GetEngineName(g_engine_id, &ename));
    printf("ENGINE name=%s\n", ename ? ename : "(null)");
    CHECK(ename && strcmp(ename, ENGINE_NAME) == 0 && (int64_t)fnv1a64(ename, strlen(ename)) == g_engine_id,
          "engine name %s", ename);

    /* 5. Handles (one per hipDNN handle); SetStream(NULL) as hipdnnSetStream would. */
    hipdnnEnginePluginHandle_t h = NULL, h2 = NULL;
    EXPECT_OK(P.Create(&h));
    EXPECT_OK(P.Create(&h2));
    CHECK(h != NULL && h2 != NULL && h != h2, "handles %p %p", (void*)h, (void*)h2);
    EXPECT_OK(P.SetStream(h, NULL));
    EXPECT_OK(P.SetStream(h2, (hipStream_t)(uintptr_t)0x1000)); /* stored only */
    EXPECT_OK(P.SetStream(h2, NULL));

    /* Engine configs written by the pytest. */
    char path[1024];
    snprintf(path, sizeof path, "%s/engine_config.bin", g_workdir);
    g_cfg.ptr = read_file(path, &g_cfg.size);
    snprintf(path, sizeof path, "%s/engine_config_wrong_id.bin", g_workdir);
    g_cfg_wrong.ptr = read_file(path, &g_cfg_wrong.size);
    snprintf(path, sizeof path, "%s/engine_config_knob.bin", g_workdir);
    g_cfg_knob.ptr = read_file(path, &g_cfg_knob.size);
    snprintf(path, sizeof path, "%s/engine_config_junk.bin", g_workdir);
    g_cfg_junk.ptr = read_file(path, &g_cfg_junk.size);

    /* 6. Cases. */
    int ncases = argc - 3;
    test_case* cases = calloc((size_t)(ncases > 0 ? ncases : 1), sizeof *cases);
    const test_case* first_ok = NULL;
    const test_case* chain = NULL;
    for(int i = 0; i < ncases; i++)
    {
        load_case(argv[3 + i], &cases[i]);
        run_test_case(&cases[i], h, h2);
        override_checks(&cases[i], h);
        if(cases[i].applicable && cases[i].novr == 0)
        {
            if(first_ok == NULL)
                first_ok = &cases[i];
            if(strstr(cases[i].name, "chain") != NULL)
                chain = &cases[i];
        }
    }

    /* 7. Junk, NULLs, threads. */
    if(first_ok != NULL)
    {
        junk_graph_checks(first_ok, h);
        null_checks(h, first_ok);
        thread_checks(chain ? chain : first_ok, h);
    }

    /* 8. Teardown, as hipdnnDestroy does. */
    EXPECT_OK(P.Destroy(h2));
    EXPECT_OK(P.Destroy(h));
    EXPECT_FAIL(P.Destroy(h), HIPDNN_PLUGIN_STATUS_BAD_PARAM, "hipdnnEnginePluginDestroy", "unknown or destroyed");
    hipdnnPluginConstData_t graph = {first_ok ? first_ok->graph : NULL, first_ok ? first_ok->graph_size : 0};
    uint32_t n = 0;
    int64_t one[1];
    EXPECT_FAIL(P.GetApplicableEngineIds(h, &graph, one, 1, &n), HIPDNN_PLUGIN_STATUS_BAD_PARAM,
                "hipdnnEnginePluginGetApplicableEngineIds", "unknown or destroyed");

    printf("LOG messages=%d errors=%d\n", atomic_load(&g_log_count), atomic_load(&g_log_errors));
    CHECK(atomic_load(&g_log_errors) > 0, "failures were not logged through the callback");
    EXPECT_OK(P.SetLogLevel(HIPDNN_SEV_OFF));

    for(int i = 0; i < ncases; i++)
        free_case(&cases[i]);
    free(cases);
    free((void*)(uintptr_t)g_cfg.ptr);
    free((void*)(uintptr_t)g_cfg_wrong.ptr);
    free((void*)(uintptr_t)g_cfg_knob.ptr);
    free((void*)(uintptr_t)g_cfg_junk.ptr);
    dlclose(g_lib);

    int failures = atomic_load(&g_failures);
    printf("CHECKS %d FAILURES %d\n", atomic_load(&g_checks), failures);
    if(failures == 0)
        printf("ALL OK\n");
    return failures == 0 ? 0 : 1;
}
