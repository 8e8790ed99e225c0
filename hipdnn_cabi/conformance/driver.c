/* hipdnn-cabi conformance driver: loads one hipDNN engine plugin .so with dlopen(RTLD_LOCAL) and
 * runs one scenario against it, the way a hipDNN backend calls a plugin.  It judges nothing: every
 * call is written to stdout as one JSON object per line (line-buffered, so the output up to a
 * crash survives), and the Python side (hipdnn_cabi/conformance/checks/) decides the verdicts.
 *
 *   conform_driver MODE PLUGIN.so [CASE-FILE|-] [args...]
 *
 * Records: {"t":"pre",...} is printed before a call that may crash, {"t":"call","tag":..,"fn":..,
 * "args":..,"st":N,"err":..} after it (err = the plugin's last error, read on the same thread
 * when st != 0), plus mode-specific records.  A required symbol that is missing prints
 * {"t":"missing","fn":NAME} and exits 3.
 *
 * A CASE file describes one (graph, engine) pair the plugin said it can run:
 *   graph PATH | config PATH | engine ID | in UID NBYTES PATH | out UID NBYTES
 *   in2 UID NBYTES PATH   (execute: the input's contents for the second execution)
 *   ovr UID NDIMS D... S...   (execute_ovr: one shape/stride override)
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hipdnn_plugin_sdk/EnginePluginApi.h"

typedef hipdnnPluginStatus_t St;
typedef hipdnnEnginePluginHandle_t H;
typedef hipdnnEnginePluginExecutionContext_t Ctx;
typedef hipdnnPluginConstData_t CD;
typedef hipdnnPluginDeviceBuffer_t DB;

/* ------------------------------------------------------------------ the symbol table */
#define SYMBOLS(X)                                                                                  \
    DRV_PLUGIN_SYMBOLS(X)                                                                           \
    X(hipdnnEnginePluginGetAllEngineIds, St (*)(int64_t*, uint32_t, uint32_t*))                     \
    X(hipdnnEnginePluginCreate, St (*)(H*))                                                         \
    X(hipdnnEnginePluginDestroy, St (*)(H))                                                         \
    X(hipdnnEnginePluginSetStream, St (*)(H, hipStream_t))                                          \
    X(hipdnnEnginePluginGetApplicableEngineIds, St (*)(H, const CD*, int64_t*, uint32_t, uint32_t*)) \
    X(hipdnnEnginePluginGetEngineDetails, St (*)(H, int64_t, const CD*, CD*))                       \
    X(hipdnnEnginePluginDestroyEngineDetails, St (*)(H, CD*))                                       \
    X(hipdnnEnginePluginGetWorkspaceSize, St (*)(H, const CD*, const CD*, size_t*))                 \
    X(hipdnnEnginePluginCreateExecutionContext, St (*)(H, const CD*, const CD*, Ctx*))              \
    X(hipdnnEnginePluginDestroyExecutionContext, St (*)(H, Ctx))                                    \
    X(hipdnnEnginePluginGetWorkspaceSizeFromExecutionContext, St (*)(H, Ctx, size_t*))              \
    X(hipdnnEnginePluginExecuteOpGraph, St (*)(H, Ctx, void*, const DB*, uint32_t))                 \
    X(hipdnnEnginePluginExecuteOpGraphWithOverrides,                                                \
      St (*)(H, Ctx, void*, const DB*, uint32_t, uint32_t, const int64_t*, const uint32_t*,         \
             const int64_t* const*, const int64_t* const*))                                         \
    X(hipdnnEnginePluginGetEngineName, St (*)(int64_t, const char**))                               \
    X(hipdnnEnginePluginSerializeExecutionContext, St (*)(H, Ctx, CD*))                             \
    X(hipdnnEnginePluginSerializeExecutionContextWithEngineId, St (*)(H, int64_t, Ctx, CD*))        \
    X(hipdnnEnginePluginDestroySerializedExecutionContext, St (*)(H, CD*))                          \
    X(hipdnnEnginePluginCreateExecutionContextFromSerialized, St (*)(H, const CD*, Ctx*))

static void* g_lib;
#define DRV_PLUGIN_IDENTITY 1
#include "driver_common.h"
#define QCALL(fn, expr) __extension__({ NEED(fn); P.fn expr; }) /* quiet: no records */

#define MAXBUF 16
#define GUARD 64
typedef struct {
    int64_t uid;
    size_t n;
    int is_out;
    unsigned char* init; /* input contents */
} BufSpec;
#define MAXDIMS 8
typedef struct {
    int64_t uid;
    uint32_t n;
    int64_t dims[MAXDIMS], strides[MAXDIMS];
} OvrSpec;
typedef struct {
    int have;
    CD graph, config;
    int64_t engine;
    int nbuf;
    BufSpec b[MAXBUF];
    unsigned char* in2[MAXBUF]; /* input contents for the second execution (rebinding), or NULL */
    int novr;
    OvrSpec ovr[MAXBUF];
} Case;
static Case C;

static void load_case(const char* path)
{
    memset(&C, 0, sizeof C);
    if (!path || !strcmp(path, "-")) return;
    FILE* f = fopen(path, "r");
    if (!f) { fprintf(stderr, "cannot open case %s\n", path); exit(2); }
    char line[4096], a[4000];
    long long uid;
    size_t n;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (sscanf(line, "graph %3999s", a) == 1) C.graph.ptr = slurp(a, &C.graph.size);
        else if (sscanf(line, "config %3999s", a) == 1) C.config.ptr = slurp(a, &C.config.size);
        else if (sscanf(line, "engine %lld", &uid) == 1) C.engine = uid;
        else if (sscanf(line, "in2 %lld %zu %3999s", &uid, &n, a) == 3) {
            for (int i = 0; i < C.nbuf; i++)
                if (C.b[i].uid == uid && !C.b[i].is_out && C.b[i].n == n) {
                    size_t got;
                    C.in2[i] = slurp(a, &got);
                    if (got != n) { fprintf(stderr, "in2 size mismatch %s\n", a); exit(2); }
                }
        } else if (sscanf(line, "in %lld %zu %3999s", &uid, &n, a) == 3 && C.nbuf < MAXBUF) {
            size_t got;
            C.b[C.nbuf] = (BufSpec){uid, n, 0, slurp(a, &got)};
            if (got != n) { fprintf(stderr, "input size mismatch %s\n", a); exit(2); }
            C.nbuf++;
        } else if (sscanf(line, "out %lld %zu", &uid, &n) == 2 && C.nbuf < MAXBUF)
            C.b[C.nbuf++] = (BufSpec){uid, n, 1, NULL};
        else if (!strncmp(line, "ovr ", 4) && C.novr < MAXBUF) {
            /* ovr UID NDIMS d0..dn-1 s0..sn-1 */
            OvrSpec* o = &C.ovr[C.novr];
            char* q = line + 4;
            o->uid = strtoll(q, &q, 10);
            o->n = (uint32_t)strtoul(q, &q, 10);
            if (o->n > MAXDIMS) { fprintf(stderr, "too many override dims\n"); exit(2); }
            for (uint32_t d = 0; d < o->n; d++) o->dims[d] = strtoll(q, &q, 10);
            for (uint32_t d = 0; d < o->n; d++) o->strides[d] = strtoll(q, &q, 10);
            C.novr++;
        }
    }
    fclose(f);
    C.have = C.graph.ptr && C.config.ptr;
}

/* Device (here: host) buffers with a guard zone after each. */
typedef struct {
    DB db[MAXBUF];
    unsigned char* mem[MAXBUF];
} Bufs;
static void bufs_alloc(Bufs* B)
{
    for (int i = 0; i < C.nbuf; i++) {
        B->mem[i] = malloc(C.b[i].n + GUARD);
        if (C.b[i].is_out) memset(B->mem[i], 0x7f, C.b[i].n);
        else memcpy(B->mem[i], C.b[i].init, C.b[i].n);
        memset(B->mem[i] + C.b[i].n, 0xa5, GUARD);
        B->db[i] = (DB){C.b[i].uid, B->mem[i]};
    }
}
static void bufs_reset_outputs(Bufs* B)
{
    for (int i = 0; i < C.nbuf; i++)
        if (C.b[i].is_out) memset(B->mem[i], 0x7f, C.b[i].n);
}
/* 0 = guards intact and inputs unmodified; else 1 + index of the first bad buffer */
static int bufs_check(Bufs* B, int* input_modified)
{
    *input_modified = 0;
    for (int i = 0; i < C.nbuf; i++) {
        for (int g = 0; g < GUARD; g++)
            if (B->mem[i][C.b[i].n + g] != 0xa5) return i + 1;
        if (!C.b[i].is_out && memcmp(B->mem[i], C.b[i].init, C.b[i].n)) *input_modified = i + 1;
    }
    return 0;
}
static void bufs_free(Bufs* B)
{
    for (int i = 0; i < C.nbuf; i++) free(B->mem[i]);
}
static void print_outputs(const char* tag, Bufs* B)
{
    for (int i = 0; i < C.nbuf; i++)
        if (C.b[i].is_out) {
            printf("{\"t\":\"output\",\"tag\":\"%s\",\"uid\":%lld,\"hex\":", tag, (long long)C.b[i].uid);
            jhex(B->mem[i], C.b[i].n);
            printf("}\n");
        }
}

static H make_handle(void)
{
    H h = NULL;
    if (CALL("create", hipdnnEnginePluginCreate, "&handle", (&h)) || !h) {
        printf("{\"t\":\"fatal\",\"msg\":\"hipdnnEnginePluginCreate failed\"}\n");
        exit(4);
    }
    return h;
}

static void* ws_alloc(size_t ws) { return ws ? calloc(1, ws + GUARD) : NULL; }

static int64_t wrong_engine_id(void)
{
    /* an id the plugin does not list */
    uint32_t n = 0;
    int64_t cand = 0x0123456789abcdefLL;
    if (!P.hipdnnEnginePluginGetAllEngineIds || P.hipdnnEnginePluginGetAllEngineIds(NULL, 0, &n) || n > 4096)
        return cand;
    int64_t* ids = calloc(n + 1, sizeof *ids);
    uint32_t m = 0;
    P.hipdnnEnginePluginGetAllEngineIds(ids, n, &m);
    for (int again = 1; again;) {
        again = 0;
        for (uint32_t i = 0; i < m && i < n; i++)
            if (ids[i] == cand) { cand++; again = 1; }
    }
    free(ids);
    return cand;
}

/* An EngineConfig FlatBuffer naming engine `id` (no knobs): root table with one int64 field. */
static unsigned char g_cfg_wrong[32];
static CD config_for(int64_t id)
{
    static const unsigned char tmpl[24] = {
        12, 0, 0, 0,            /* root uoffset -> table at 12 */
        0, 0,                   /* padding */
        6, 0, 12, 0, 4, 0,      /* vtable @6: vsize 6, tsize 12, field0 @4 */
        6, 0, 0, 0,             /* table @12: soffset 6 -> vtable @6 */
        0, 0, 0, 0, 0, 0, 0, 0  /* int64 engine_id @16 */
    };
    memcpy(g_cfg_wrong, tmpl, sizeof tmpl);
    memcpy(g_cfg_wrong + 16, &id, 8);
    return (CD){g_cfg_wrong, sizeof tmpl};
}

/* ------------------------------------------------------------------ modes */
static int m_probe(void)
{
    drv_probe_identity();
    if (P.hipdnnEnginePluginGetAllEngineIds) {
        uint32_t n = 0xdeadbeef, m = 0xdeadbeef;
        St st = CALL("count", hipdnnEnginePluginGetAllEngineIds, "NULL, 0, &num", (NULL, 0, &n));
        printf("{\"t\":\"count\",\"st\":%d,\"n\":%u}\n", st, n);
        if (st == 0 && n <= 65536) {
            int64_t* ids = calloc((size_t)n + 1, sizeof *ids);
            st = CALL("ids", hipdnnEnginePluginGetAllEngineIds, "ids, n, &num", (ids, n, &m));
            printf("{\"t\":\"ids\",\"st\":%d,\"n\":%u,\"ids\":[", st, m);
            for (uint32_t i = 0; i < m && i < n; i++) printf("%s\"%lld\"", i ? "," : "", (long long)ids[i]);
            printf("]}\n");
            if (st == 0 && P.hipdnnEnginePluginGetEngineName)
                for (uint32_t i = 0; i < m && i < n; i++) {
                    const char* nm = NULL;
                    St s = CALL("engine_name", hipdnnEnginePluginGetEngineName, "id, &name", (ids[i], &nm));
                    printf("{\"t\":\"engine_name\",\"id\":\"%lld\",\"st\":%d,\"name\":", (long long)ids[i], s);
                    jstr(s ? NULL : nm);
                    printf("}\n");
                }
            free(ids);
        }
    }
    done();
    return 0;
}

static int m_engine_ids(void)
{
    uint32_t n = 0, m;
    CALL("count", hipdnnEnginePluginGetAllEngineIds, "NULL, 0, &num", (NULL, 0, &n));
    if (n > 65536) n = 65536;
    const int64_t S = 0x5a5a5a5a5a5a5a5aLL;
    int64_t* ids = malloc(((size_t)n + 8) * sizeof *ids);
    uint32_t caps[3] = {0, n > 1 ? n - 1 : 0, n};
    for (int k = 0; k < 3; k++) {
        for (uint32_t i = 0; i < n + 8; i++) ids[i] = S;
        m = 0xdeadbeef;
        char args[64];
        snprintf(args, sizeof args, "ids, max_engines=%u, &num", caps[k]);
        St st = CALL("cap", hipdnnEnginePluginGetAllEngineIds, args, (ids, caps[k], &m));
        int over = 0;
        for (uint32_t i = caps[k]; i < n + 8; i++) over |= ids[i] != S;
        printf("{\"t\":\"cap\",\"max\":%u,\"st\":%d,\"num\":%u,\"wrote_past_max\":%d,\"ids\":[", caps[k], st, m, over);
        for (uint32_t i = 0; i < caps[k] && i < m; i++) printf("%s\"%lld\"", i ? "," : "", (long long)ids[i]);
        printf("]}\n");
    }
    free(ids);
    done();
    return 0;
}

static int m_lifecycle(int count, int repeat)
{
    H* hs = calloc((size_t)count, sizeof *hs);
    int bad = 0, dup = 0;
    for (int order = 0; order < 3; order++) {
        for (int i = 0; i < count; i++)
            if (QCALL(hipdnnEnginePluginCreate, (&hs[i])) || !hs[i]) bad++;
        for (int i = 0; i < count; i++)
            for (int j = 0; j < i; j++) dup += hs[i] && hs[i] == hs[j];
        for (int k = 0; k < count; k++) {
            int i = order == 0 ? count - 1 - k /* LIFO */ : order == 1 ? k /* FIFO */
                                                     : (k < (count + 1) / 2 ? 2 * k : 2 * (k - (count + 1) / 2) + 1);
            if (hs[i] && QCALL(hipdnnEnginePluginDestroy, (hs[i]))) bad++;
        }
        printf("{\"t\":\"many\",\"order\":%d,\"failures\":%d,\"duplicates\":%d}\n", order, bad, dup);
        fflush(stdout);
    }
    int rbad = 0;
    for (int r = 0; r < repeat; r++) {
        H h = NULL;
        if (QCALL(hipdnnEnginePluginCreate, (&h)) || !h) rbad++;
        else if (QCALL(hipdnnEnginePluginDestroy, (h))) rbad++;
    }
    printf("{\"t\":\"repeat\",\"n\":%d,\"failures\":%d}\n", repeat, rbad);
    free(hs);
    done();
    return 0;
}

static int m_set_stream(void)
{
    H h = make_handle();
    CALL("set_null_stream", hipdnnEnginePluginSetStream, "handle, stream=NULL", (h, NULL));
    CALL("destroy", hipdnnEnginePluginDestroy, "handle", (h));
    done();
    return 0;
}

/* applicable GRAPH... : each graph file queried with max = #engines and with max = 0 */
static int m_applicable(int ng, char** graphs)
{
    uint32_t n = 0;
    CALL("count", hipdnnEnginePluginGetAllEngineIds, "NULL, 0, &num", (NULL, 0, &n));
    if (n > 65536) n = 65536;
    H h = make_handle();
    const int64_t S = 0x5a5a5a5a5a5a5a5aLL;
    int64_t* ids = malloc(((size_t)n + 8) * sizeof *ids);
    for (int g = 0; g < ng; g++) {
        CD gd;
        gd.ptr = slurp(graphs[g], &gd.size);
        uint32_t caps[2] = {n, 0};
        for (int k = 0; k < 2; k++) {
            for (uint32_t i = 0; i < n + 8; i++) ids[i] = S;
            uint32_t m = 0xdeadbeef;
            char args[4200];
            snprintf(args, sizeof args, "handle, graph=%s, ids, max_engines=%u, &num", graphs[g], caps[k]);
            St st = CALL("applicable", hipdnnEnginePluginGetApplicableEngineIds, args, (h, &gd, ids, caps[k], &m));
            int over = 0;
            for (uint32_t i = caps[k]; i < n + 8; i++) over |= ids[i] != S;
            printf("{\"t\":\"applicable\",\"graph\":%d,\"max\":%u,\"st\":%d,\"num\":%u,\"wrote_past_max\":%d,\"ids\":[",
                   g, caps[k], st, m, over);
            for (uint32_t i = 0; st == 0 && i < caps[k] && i < m; i++) printf("%s\"%lld\"", i ? "," : "", (long long)ids[i]);
            printf("]}\n");
        }
        free((void*)gd.ptr);
    }
    free(ids);
    CALL("destroy", hipdnnEnginePluginDestroy, "handle", (h));
    done();
    return 0;
}

static int m_details(int nid, char** idv)
{
    H h = make_handle();
    for (int i = 0; i < nid; i++) {
        int64_t id = strtoll(idv[i], NULL, 10);
        CD d = {NULL, 0};
        St st = CALL("details", hipdnnEnginePluginGetEngineDetails, "handle, engine_id, graph, &details", (h, id, &C.graph, &d));
        printf("{\"t\":\"details\",\"id\":\"%lld\",\"st\":%d,\"size\":%zu,\"hex\":", (long long)id, st, d.size);
        jhex(st == 0 && d.size < (1u << 22) ? d.ptr : NULL, d.size);
        printf("}\n");
        if (st == 0) CALL("destroy_details", hipdnnEnginePluginDestroyEngineDetails, "handle, &details", (h, &d));
    }
    CALL("destroy", hipdnnEnginePluginDestroy, "handle", (h));
    done();
    return 0;
}

static int m_workspace(void)
{
    H h = make_handle();
    size_t ws1 = (size_t)-1, ws2 = (size_t)-1;
    Ctx ctx = NULL;
    St a = CALL("ws_config", hipdnnEnginePluginGetWorkspaceSize, "handle, config, graph, &size", (h, &C.config, &C.graph, &ws1));
    St b = CALL("create_ctx", hipdnnEnginePluginCreateExecutionContext, "handle, config, graph, &ctx", (h, &C.config, &C.graph, &ctx));
    St c = 99;
    if (b == 0) c = CALL("ws_ctx", hipdnnEnginePluginGetWorkspaceSizeFromExecutionContext, "handle, ctx, &size", (h, ctx, &ws2));
    printf("{\"t\":\"workspace\",\"st_config\":%d,\"st_create\":%d,\"st_ctx\":%d,\"ws_config\":%zu,\"ws_ctx\":%zu,\"ctx_null\":%d}\n",
           a, b, c, ws1, ws2, ctx == NULL);
    if (b == 0) CALL("destroy_ctx", hipdnnEnginePluginDestroyExecutionContext, "handle, ctx", (h, ctx));
    CALL("destroy", hipdnnEnginePluginDestroy, "handle", (h));
    done();
    return 0;
}

static Ctx make_ctx(H h, size_t* ws)
{
    Ctx ctx = NULL;
    if (CALL("create_ctx", hipdnnEnginePluginCreateExecutionContext, "handle, config, graph, &ctx", (h, &C.config, &C.graph, &ctx)) || !ctx) {
        printf("{\"t\":\"fatal\",\"msg\":\"hipdnnEnginePluginCreateExecutionContext failed\"}\n");
        exit(4);
    }
    *ws = 0;
    CALL("ws_ctx", hipdnnEnginePluginGetWorkspaceSizeFromExecutionContext, "handle, ctx, &size", (h, ctx, ws));
    return ctx;
}

/* One execution set-up of the case: a handle, its context, the workspace and the buffers. */
typedef struct {
    H h;
    size_t ws;
    Ctx ctx;
    void* w;
    Bufs B;
} Run;

static void run_open(Run* r)
{
    r->h = make_handle();
    r->ctx = make_ctx(r->h, &r->ws);
    r->w = ws_alloc(r->ws);
    bufs_alloc(&r->B);
}

/* destroys the context (unless already destroyed: ctx NULL) and the handle, frees the rest */
static void run_close(Run* r)
{
    if (r->ctx) CALL("destroy_ctx", hipdnnEnginePluginDestroyExecutionContext, "handle, ctx", (r->h, r->ctx));
    CALL("destroy", hipdnnEnginePluginDestroy, "handle", (r->h));
    bufs_free(&r->B);
    free(r->w);
}

/* the {"t":"exec"} record of one execute (guards and inputs checked) and its outputs */
static void exec_record(int run, St st, Bufs* B)
{
    int mod, g = bufs_check(B, &mod);
    printf("{\"t\":\"exec\",\"run\":%d,\"st\":%d,\"guard_broken\":%d,\"input_modified\":%d}\n", run, st, g, mod);
    print_outputs(run == 1 ? "run1" : "run2", B);
}

static int m_execute(void)
{
    Run r;
    run_open(&r);
    for (int run = 1; run <= 2; run++) {
        if (run == 2) {
            bufs_reset_outputs(&r.B);
            for (int i = 0; i < C.nbuf; i++) /* rebind: new input contents in the same buffers */
                if (C.in2[i]) {
                    memcpy(r.B.mem[i], C.in2[i], C.b[i].n);
                    C.b[i].init = C.in2[i];
                }
        }
        St st = CALL(run == 1 ? "execute_1" : "execute_2", hipdnnEnginePluginExecuteOpGraph,
                     "handle, ctx, workspace, buffers, n", (r.h, r.ctx, r.w, r.B.db, (uint32_t)C.nbuf));
        exec_record(run, st, &r.B);
    }
    run_close(&r);
    done();
    return 0;
}

/* execute_ovr: one ExecuteOpGraphWithOverrides with the case's `ovr` lines (none: num_overrides 0) */
static int m_execute_ovr(void)
{
    Run r;
    run_open(&r);
    int64_t uids[MAXBUF];
    uint32_t lens[MAXBUF];
    const int64_t* shapes[MAXBUF];
    const int64_t* strides[MAXBUF];
    char args[1024];
    int k = snprintf(args, sizeof args, "handle, ctx, workspace, buffers, %d, num_overrides=%d", C.nbuf, C.novr);
    for (int i = 0; i < C.novr; i++) {
        uids[i] = C.ovr[i].uid;
        lens[i] = C.ovr[i].n;
        shapes[i] = C.ovr[i].dims;
        strides[i] = C.ovr[i].strides;
        k += snprintf(args + k, sizeof args - (size_t)k, "%s uid %lld dims [", i ? ";" : ",", (long long)uids[i]);
        for (uint32_t d = 0; d < lens[i] && k < 900; d++) k += snprintf(args + k, sizeof args - (size_t)k, "%s%lld", d ? "," : "", (long long)shapes[i][d]);
        k += snprintf(args + k, sizeof args - (size_t)k, "] strides [");
        for (uint32_t d = 0; d < lens[i] && k < 900; d++) k += snprintf(args + k, sizeof args - (size_t)k, "%s%lld", d ? "," : "", (long long)strides[i][d]);
        k += snprintf(args + k, sizeof args - (size_t)k, "]");
    }
    St st = CALL("execute_ovr", hipdnnEnginePluginExecuteOpGraphWithOverrides, args,
                 (r.h, r.ctx, r.w, r.B.db, (uint32_t)C.nbuf, (uint32_t)C.novr, C.novr ? uids : NULL, C.novr ? lens : NULL,
                  C.novr ? shapes : NULL, C.novr ? strides : NULL));
    exec_record(1, st, &r.B);
    run_close(&r);
    done();
    return 0;
}

/* ------------------------------------------------------------------ NULL and malformed arguments */
static const char k_junk[] = "this is not a FlatBuffer graph!!this is not a FlatBuffer graph!!";

static int m_null(const char* group)
{
    CD junk = {k_junk, sizeof k_junk - 1};
    CD empty = {NULL, 0};
    CD trunc = {C.graph.ptr, C.graph.size / 2};
    int64_t wrong = wrong_engine_id();
    CD wrongcfg = config_for(wrong);
    const char* s = NULL;
    uint32_t m = 0;
    int64_t ids[64];
    size_t ws = 0;
    if (!strcmp(group, "plugin_info")) {
        CALL("n", hipdnnPluginGetName, "NULL", (NULL));
        CALL("n", hipdnnPluginGetVersion, "NULL", (NULL));
        CALL("n", hipdnnPluginGetType, "NULL", (NULL));
        if (P.hipdnnPluginGetApiVersion) CALL("n", hipdnnPluginGetApiVersion, "NULL", (NULL));
        if (P.hipdnnEnginePluginGetEngineName) CALL("n", hipdnnEnginePluginGetEngineName, "id, NULL", (wrong, NULL));
        (void)s;
    } else if (!strcmp(group, "get_all_engine_ids")) {
        CALL("n", hipdnnEnginePluginGetAllEngineIds, "NULL, 0, num=NULL", (NULL, 0, NULL));
        CALL("n", hipdnnEnginePluginGetAllEngineIds, "ids=NULL, max_engines=4, &num", (NULL, 4, &m));
        CALL("n", hipdnnEnginePluginGetAllEngineIds, "ids, 4, num=NULL", (ids, 4, NULL));
    } else if (!strcmp(group, "create_destroy")) {
        CALL("n", hipdnnEnginePluginCreate, "NULL", (NULL));
        CALL("n", hipdnnEnginePluginDestroy, "handle=NULL", (NULL));
    } else if (!strcmp(group, "last_error")) {
        pre("null_out", "hipdnnPluginGetLastErrorString", "NULL");
        NEED(hipdnnPluginGetLastErrorString);
        P.hipdnnPluginGetLastErrorString(NULL);
        printf("{\"t\":\"null_out_ok\"}\n");
    } else if (!strcmp(group, "set_stream")) {
        CALL("n", hipdnnEnginePluginSetStream, "handle=NULL, stream=NULL", (NULL, NULL));
    } else {
        H h = make_handle();
        CD g = C.have ? C.graph : junk;
        CD cfg = C.have ? C.config : wrongcfg;
        int64_t eid = C.have ? C.engine : wrong;
        if (!strcmp(group, "get_applicable_engine_ids")) {
            CALL("n", hipdnnEnginePluginGetApplicableEngineIds, "handle=NULL, graph, ids, 64, &num", (NULL, &g, ids, 64, &m));
            CALL("n", hipdnnEnginePluginGetApplicableEngineIds, "handle, graph=NULL, ids, 64, &num", (h, NULL, ids, 64, &m));
            CALL("n", hipdnnEnginePluginGetApplicableEngineIds, "handle, graph={NULL,0}, ids, 64, &num", (h, &empty, ids, 64, &m));
            CALL("n", hipdnnEnginePluginGetApplicableEngineIds, "handle, graph=junk bytes, ids, 64, &num", (h, &junk, ids, 64, &m));
            if (C.have) {
                CALL("n", hipdnnEnginePluginGetApplicableEngineIds, "handle, graph=truncated, ids, 64, &num", (h, &trunc, ids, 64, &m));
                CALL("n", hipdnnEnginePluginGetApplicableEngineIds, "handle, graph, ids=NULL, 64, &num", (h, &g, NULL, 64, &m));
                CALL("n", hipdnnEnginePluginGetApplicableEngineIds, "handle, graph, ids, 64, num=NULL", (h, &g, ids, 64, NULL));
            }
        } else if (!strcmp(group, "get_engine_details")) {
            CD d = {NULL, 0};
            CALL("n", hipdnnEnginePluginGetEngineDetails, "handle=NULL, id, graph, &details", (NULL, eid, &g, &d));
            CALL("n", hipdnnEnginePluginGetEngineDetails, "handle, id, graph=NULL, &details", (h, eid, NULL, &d));
            CALL("n", hipdnnEnginePluginGetEngineDetails, "handle, id, graph=junk, &details", (h, eid, &junk, &d));
            CALL("n", hipdnnEnginePluginGetEngineDetails, "handle, wrong engine id, graph, &details", (h, wrong, &g, &d));
            if (C.have) CALL("n", hipdnnEnginePluginGetEngineDetails, "handle, id, graph, details=NULL", (h, eid, &g, NULL));
            CALL("n", hipdnnEnginePluginDestroyEngineDetails, "handle, details=NULL", (h, NULL));
            CALL("n", hipdnnEnginePluginDestroyEngineDetails, "handle=NULL, &details", (NULL, &d));
        } else if (!strcmp(group, "get_workspace_size")) {
            CALL("n", hipdnnEnginePluginGetWorkspaceSize, "handle=NULL, config, graph, &size", (NULL, &cfg, &g, &ws));
            CALL("n", hipdnnEnginePluginGetWorkspaceSize, "handle, config=NULL, graph, &size", (h, NULL, &g, &ws));
            CALL("n", hipdnnEnginePluginGetWorkspaceSize, "handle, config, graph=NULL, &size", (h, &cfg, NULL, &ws));
            CALL("n", hipdnnEnginePluginGetWorkspaceSize, "handle, config=junk, graph, &size", (h, &junk, &g, &ws));
            CALL("n", hipdnnEnginePluginGetWorkspaceSize, "handle, config, graph=junk, &size", (h, &cfg, &junk, &ws));
            CALL("n", hipdnnEnginePluginGetWorkspaceSize, "handle, config(wrong engine id), graph, &size", (h, &wrongcfg, &g, &ws));
            if (C.have) CALL("n", hipdnnEnginePluginGetWorkspaceSize, "handle, config, graph, size=NULL", (h, &cfg, &g, NULL));
        } else if (!strcmp(group, "execution_context")) {
            Ctx ctx = NULL;
            CALL("n", hipdnnEnginePluginCreateExecutionContext, "handle=NULL, config, graph, &ctx", (NULL, &cfg, &g, &ctx));
            CALL("n", hipdnnEnginePluginCreateExecutionContext, "handle, config=NULL, graph, &ctx", (h, NULL, &g, &ctx));
            CALL("n", hipdnnEnginePluginCreateExecutionContext, "handle, config, graph=NULL, &ctx", (h, &cfg, NULL, &ctx));
            CALL("n", hipdnnEnginePluginCreateExecutionContext, "handle, config=junk, graph, &ctx", (h, &junk, &g, &ctx));
            CALL("n", hipdnnEnginePluginCreateExecutionContext, "handle, config, graph=junk, &ctx", (h, &cfg, &junk, &ctx));
            CALL("n", hipdnnEnginePluginCreateExecutionContext, "handle, config(wrong engine id), graph, &ctx", (h, &wrongcfg, &g, &ctx));
            if (C.have) CALL("n", hipdnnEnginePluginCreateExecutionContext, "handle, config, graph, ctx=NULL", (h, &cfg, &g, NULL));
            CALL("n", hipdnnEnginePluginDestroyExecutionContext, "handle, ctx=NULL", (h, NULL));
            CALL("n", hipdnnEnginePluginGetWorkspaceSizeFromExecutionContext, "handle, ctx=NULL, &size", (h, NULL, &ws));
            if (C.have) {
                size_t w;
                Ctx c = make_ctx(h, &w);
                CALL("n", hipdnnEnginePluginDestroyExecutionContext, "handle=NULL, ctx", (NULL, c));
                CALL("n", hipdnnEnginePluginGetWorkspaceSizeFromExecutionContext, "handle, ctx, size=NULL", (h, c, NULL));
                CALL("destroy_ctx", hipdnnEnginePluginDestroyExecutionContext, "handle, ctx", (h, c));
            }
        } else if (!strcmp(group, "execute_op_graph")) {
            DB one = {1, NULL};
            CALL("n", hipdnnEnginePluginExecuteOpGraph, "handle, ctx=NULL, NULL, buffers, 1", (h, NULL, NULL, &one, 1));
            if (C.have) {
                size_t w;
                Ctx c = make_ctx(h, &w);
                void* wsp = ws_alloc(w);
                Bufs B;
                bufs_alloc(&B);
                CALL("n", hipdnnEnginePluginExecuteOpGraph, "handle=NULL, ctx, ws, buffers, n", (NULL, c, wsp, B.db, (uint32_t)C.nbuf));
                CALL("n", hipdnnEnginePluginExecuteOpGraph, "handle, ctx, ws, buffers=NULL, n", (h, c, wsp, NULL, (uint32_t)C.nbuf));
                CALL("n", hipdnnEnginePluginExecuteOpGraph, "handle, ctx, ws, buffers, 0", (h, c, wsp, B.db, 0));
                /* missing device buffer: drop the last entry (an output) */
                CALL("n", hipdnnEnginePluginExecuteOpGraph, "handle, ctx, ws, buffers without the output uid, n-1", (h, c, wsp, B.db, (uint32_t)C.nbuf - 1));
                DB nulled[MAXBUF];
                memcpy(nulled, B.db, sizeof nulled);
                nulled[0].ptr = NULL;
                CALL("n", hipdnnEnginePluginExecuteOpGraph, "handle, ctx, ws, buffers with ptr=NULL for the first uid, n", (h, c, wsp, nulled, (uint32_t)C.nbuf));
                CALL("destroy_ctx", hipdnnEnginePluginDestroyExecutionContext, "handle, ctx", (h, c));
                bufs_free(&B);
                free(wsp);
            }
        } else if (!strcmp(group, "serialization")) {
            CD pay = {NULL, 0};
            Ctx ctx = NULL;
            if (P.hipdnnEnginePluginSerializeExecutionContext)
                CALL("n", hipdnnEnginePluginSerializeExecutionContext, "handle, ctx=NULL, &payload", (h, NULL, &pay));
            if (P.hipdnnEnginePluginSerializeExecutionContextWithEngineId)
                CALL("n", hipdnnEnginePluginSerializeExecutionContextWithEngineId, "handle, id, ctx=NULL, &payload", (h, eid, NULL, &pay));
            if (P.hipdnnEnginePluginDestroySerializedExecutionContext)
                CALL("n", hipdnnEnginePluginDestroySerializedExecutionContext, "handle=NULL, &payload", (NULL, &pay));
            if (P.hipdnnEnginePluginCreateExecutionContextFromSerialized) {
                CALL("n", hipdnnEnginePluginCreateExecutionContextFromSerialized, "handle, payload=NULL, &ctx", (h, NULL, &ctx));
                CALL("n", hipdnnEnginePluginCreateExecutionContextFromSerialized, "handle, payload={NULL,0}, &ctx", (h, &empty, &ctx));
                CALL("n", hipdnnEnginePluginCreateExecutionContextFromSerialized, "handle, payload=junk, &ctx", (h, &junk, &ctx));
                CALL("n", hipdnnEnginePluginCreateExecutionContextFromSerialized, "handle=NULL, payload=junk, &ctx", (NULL, &junk, &ctx));
                CALL("n", hipdnnEnginePluginCreateExecutionContextFromSerialized, "handle, payload=junk, ctx=NULL", (h, &junk, NULL));
            }
        } else {
            fprintf(stderr, "unknown null group %s\n", group);
            return 2;
        }
        CALL("destroy", hipdnnEnginePluginDestroy, "handle", (h));
    }
    done();
    return 0;
}

/* ------------------------------------------------------------------ last error */
typedef struct {
    int which;
    H h;
    St st;
    char before[256], after[2048];
    int before_null, after_null;
    const char* desc;
    const char* fn;
} LeJob;

static void copy_err(char* dst, size_t n, int* isnull)
{
    const char* e = drv_last_error();
    *isnull = e == NULL;
    snprintf(dst, n, "%s", e ? e : "");
}

static CD g_junk = {k_junk, sizeof k_junk - 1};
static Ctx g_pending_ctx;
static St failing_call(int which, H h, const char** desc, const char** fn)
{
    uint32_t m;
    int64_t ids[64];
    CD d = {NULL, 0};
    size_t ws;
    Ctx ctx = NULL;
    int64_t wrong = wrong_engine_id();
    switch (which) {
    case 0:
        *fn = "hipdnnEnginePluginGetApplicableEngineIds"; *desc = "handle, graph=junk bytes, ids, 64, &num";
        return QCALL(hipdnnEnginePluginGetApplicableEngineIds, (h, &g_junk, ids, 64, &m));
    case 1:
        *fn = "hipdnnEnginePluginGetEngineDetails"; *desc = "handle, wrong engine id, graph, &details";
        return QCALL(hipdnnEnginePluginGetEngineDetails, (h, wrong, C.have ? &C.graph : &g_junk, &d));
    case 2: {
        CD wc = config_for(wrong);
        *fn = "hipdnnEnginePluginCreateExecutionContext"; *desc = "handle, config(wrong engine id), graph, &ctx";
        St st = QCALL(hipdnnEnginePluginCreateExecutionContext, (h, &wc, C.have ? &C.graph : &g_junk, &ctx));
        return st;
    }
    case 3:
        *fn = "hipdnnEnginePluginGetWorkspaceSize"; *desc = "handle, config=junk, graph, &size";
        return QCALL(hipdnnEnginePluginGetWorkspaceSize, (h, &g_junk, C.have ? &C.graph : &g_junk, &ws));
    case 4: {
        *fn = "hipdnnEnginePluginExecuteOpGraph"; *desc = "handle, ctx, ws, buffers without the output uid, n-1";
        if (!C.have) return 0;
        size_t w = 0;
        Ctx c = NULL;
        if (QCALL(hipdnnEnginePluginCreateExecutionContext, (h, &C.config, &C.graph, &c))) return 0;
        QCALL(hipdnnEnginePluginGetWorkspaceSizeFromExecutionContext, (h, c, &w));
        void* wsp = ws_alloc(w);
        Bufs B;
        bufs_alloc(&B);
        St st = QCALL(hipdnnEnginePluginExecuteOpGraph, (h, c, wsp, B.db, (uint32_t)C.nbuf - 1));
        /* the context is destroyed later (by the caller, after it read the last error) */
        g_pending_ctx = c;
        bufs_free(&B);
        free(wsp);
        return st;
    }
    }
    return 0;
}
#define N_FAILING 5

static void* le_thread(void* arg)
{
    LeJob* j = arg;
    copy_err(j->before, sizeof j->before, &j->before_null);
    j->st = failing_call(j->which, j->h, &j->desc, &j->fn);
    copy_err(j->after, sizeof j->after, &j->after_null);
    return NULL;
}

static void print_job(const char* t, LeJob* j)
{
    printf("{\"t\":\"%s\",\"fn\":\"%s\",\"args\":", t, j->fn);
    jstr(j->desc);
    printf(",\"st\":%d,\"before\":", j->st);
    jstr(j->before_null ? NULL : j->before);
    printf(",\"after\":");
    jstr(j->after_null ? NULL : j->after);
    printf("}\n");
    fflush(stdout);
}

/* each failing call on a fresh thread: the error slot must be set afterwards */
static int m_lasterr_set(void)
{
    H h = make_handle();
    for (int w = 0; w < N_FAILING; w++) {
        LeJob j;
        memset(&j, 0, sizeof j);
        j.which = w;
        j.h = h;
        pthread_t t;
        pre("failing", "thread", "");
        pthread_create(&t, NULL, le_thread, &j);
        pthread_join(t, NULL);
        print_job("failing", &j);
        if (g_pending_ctx) QCALL(hipdnnEnginePluginDestroyExecutionContext, (h, g_pending_ctx));
        g_pending_ctx = NULL;
    }
    CALL("destroy", hipdnnEnginePluginDestroy, "handle", (h));
    done();
    return 0;
}

/* thread A fails; thread B (fresh) must not see A's message; B fails; A still sees its own. */
static pthread_mutex_t g_mx = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static int g_phase;
static void wait_phase(int p)
{
    pthread_mutex_lock(&g_mx);
    while (g_phase < p) pthread_cond_wait(&g_cv, &g_mx);
    pthread_mutex_unlock(&g_mx);
}
static void set_phase(int p)
{
    pthread_mutex_lock(&g_mx);
    g_phase = p;
    pthread_cond_broadcast(&g_cv);
    pthread_mutex_unlock(&g_mx);
}
static LeJob g_a, g_b;
static char g_a_again[2048];
static int g_a_again_null;
static void* thread_a(void* arg)
{
    (void)arg;
    le_thread(&g_a);
    set_phase(1);
    wait_phase(2);
    copy_err(g_a_again, sizeof g_a_again, &g_a_again_null);
    return NULL;
}
static void* thread_b(void* arg)
{
    (void)arg;
    wait_phase(1);
    le_thread(&g_b);
    set_phase(2);
    return NULL;
}
static int m_lasterr_threads(void)
{
    H h = make_handle();
    g_a.which = 0; g_a.h = h;
    g_b.which = 1; g_b.h = h;
    pthread_t a, b;
    pthread_create(&a, NULL, thread_a, NULL);
    pthread_create(&b, NULL, thread_b, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    print_job("thread_a", &g_a);
    print_job("thread_b", &g_b);
    printf("{\"t\":\"thread_a_again\",\"err\":");
    jstr(g_a_again_null ? NULL : g_a_again);
    printf("}\n");
    CALL("destroy", hipdnnEnginePluginDestroy, "handle", (h));
    done();
    return 0;
}

/* ------------------------------------------------------------------ serialization */
static int m_serialize(const char* what)
{
    int round = !strcmp(what, "round");
    H h = make_handle();
    size_t ws;
    Ctx ctx = make_ctx(h, &ws);
    CD pay = {NULL, 0};
    St st;
    if (P.hipdnnEnginePluginSerializeExecutionContextWithEngineId)
        st = CALL("serialize", hipdnnEnginePluginSerializeExecutionContextWithEngineId, "handle, engine_id, ctx, &payload", (h, C.engine, ctx, &pay));
    else
        st = CALL("serialize", hipdnnEnginePluginSerializeExecutionContext, "handle, ctx, &payload", (h, ctx, &pay));
    printf("{\"t\":\"serialized\",\"st\":%d,\"size\":%zu,\"null\":%d}\n", st, pay.size, pay.ptr == NULL);
    if (st == 0 && pay.ptr && pay.size && round) {
        Ctx c2 = NULL;
        St s2 = CALL("from_serialized", hipdnnEnginePluginCreateExecutionContextFromSerialized, "handle, payload, &ctx", (h, &pay, &c2));
        CALL("destroy_serialized", hipdnnEnginePluginDestroySerializedExecutionContext, "handle, &payload", (h, &pay));
        if (s2 == 0 && c2) {
            size_t ws2 = (size_t)-1;
            CALL("ws_ctx2", hipdnnEnginePluginGetWorkspaceSizeFromExecutionContext, "handle, ctx2, &size", (h, c2, &ws2));
            printf("{\"t\":\"ws_pair\",\"ws\":%zu,\"ws2\":%zu}\n", ws, ws2);
            size_t wmax = ws > ws2 ? ws : ws2;
            void* w = ws_alloc(wmax);
            Bufs B;
            bufs_alloc(&B);
            CALL("exec_orig", hipdnnEnginePluginExecuteOpGraph, "handle, ctx, ws, buffers, n", (h, ctx, w, B.db, (uint32_t)C.nbuf));
            print_outputs("orig", &B);
            bufs_reset_outputs(&B);
            CALL("exec_round", hipdnnEnginePluginExecuteOpGraph, "handle, ctx_from_serialized, ws, buffers, n", (h, c2, w, B.db, (uint32_t)C.nbuf));
            print_outputs("round", &B);
            bufs_free(&B);
            free(w);
            CALL("destroy_ctx2", hipdnnEnginePluginDestroyExecutionContext, "handle, ctx2", (h, c2));
        }
    } else if (st == 0 && pay.ptr && pay.size) {
        /* corrupt payloads: every one must be rejected */
        size_t n = pay.size;
        unsigned char* copy = malloc(n);
        memcpy(copy, pay.ptr, n);
        CALL("destroy_serialized", hipdnnEnginePluginDestroySerializedExecutionContext, "handle, &payload", (h, &pay));
        unsigned char* bad = malloc(n + 1);
        struct { const char* what; size_t len; int mode; } cases[] = {
            {"handle, payload truncated to 4 bytes, &ctx", 4, 0}, {"handle, payload truncated to half, &ctx", n / 2, 0},
            {"handle, payload minus its last byte, &ctx", n - 1, 0}, {"handle, payload of 0xff bytes, &ctx", n, 1},
            {"handle, payload with the first 8 bytes inverted, &ctx", n, 2}, {"handle, payload of zero bytes, &ctx", n, 3}};
        for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
            size_t len = cases[k].len < n ? cases[k].len : n;
            memcpy(bad, copy, n);
            if (cases[k].mode == 1) memset(bad, 0xff, n);
            if (cases[k].mode == 2) for (size_t i = 0; i < 8 && i < n; i++) bad[i] ^= 0xff;
            if (cases[k].mode == 3) memset(bad, 0, n);
            CD cp = {bad, len};
            Ctx c3 = NULL;
            St s3 = CALL("corrupt", hipdnnEnginePluginCreateExecutionContextFromSerialized, cases[k].what, (h, &cp, &c3));
            if (s3 == 0 && c3) QCALL(hipdnnEnginePluginDestroyExecutionContext, (h, c3));
        }
        free(bad);
        free(copy);
    } else if (P.hipdnnEnginePluginDestroySerializedExecutionContext && pay.ptr) {
        CALL("destroy_serialized", hipdnnEnginePluginDestroySerializedExecutionContext, "handle, &payload", (h, &pay));
    }
    CALL("destroy_ctx", hipdnnEnginePluginDestroyExecutionContext, "handle, ctx", (h, ctx));
    CALL("destroy", hipdnnEnginePluginDestroy, "handle", (h));
    done();
    return 0;
}

/* ------------------------------------------------------------------ threads */
typedef struct {
    H shared;
    int separate, iters, failures, mismatches;
    unsigned char** expect;
    char msg[512];
} ThJob;

static void* th_body(void* arg)
{
    ThJob* j = arg;
    H h = j->shared;
    if (j->separate && (QCALL(hipdnnEnginePluginCreate, (&h)) || !h)) {
        j->failures++;
        snprintf(j->msg, sizeof j->msg, "hipdnnEnginePluginCreate failed");
        return NULL;
    }
    int64_t ids[64];
    uint32_t m;
    Bufs B;
    bufs_alloc(&B);
    for (int it = 0; it < j->iters; it++) {
        St st = QCALL(hipdnnEnginePluginGetApplicableEngineIds, (h, &C.graph, ids, 64, &m));
        if (st) { j->failures++; snprintf(j->msg, sizeof j->msg, "GetApplicableEngineIds status %d: %s", st, drv_last_error()); continue; }
        CD d = {NULL, 0};
        st = QCALL(hipdnnEnginePluginGetEngineDetails, (h, C.engine, &C.graph, &d));
        if (st) { j->failures++; snprintf(j->msg, sizeof j->msg, "GetEngineDetails status %d: %s", st, drv_last_error()); continue; }
        QCALL(hipdnnEnginePluginDestroyEngineDetails, (h, &d));
        Ctx c = NULL;
        st = QCALL(hipdnnEnginePluginCreateExecutionContext, (h, &C.config, &C.graph, &c));
        if (st) { j->failures++; snprintf(j->msg, sizeof j->msg, "CreateExecutionContext status %d: %s", st, drv_last_error()); continue; }
        size_t w = 0;
        QCALL(hipdnnEnginePluginGetWorkspaceSizeFromExecutionContext, (h, c, &w));
        void* wsp = ws_alloc(w);
        bufs_reset_outputs(&B);
        st = QCALL(hipdnnEnginePluginExecuteOpGraph, (h, c, wsp, B.db, (uint32_t)C.nbuf));
        if (st) { j->failures++; snprintf(j->msg, sizeof j->msg, "ExecuteOpGraph status %d: %s", st, drv_last_error()); }
        else
            for (int i = 0; i < C.nbuf; i++)
                if (C.b[i].is_out && memcmp(B.mem[i], j->expect[i], C.b[i].n)) {
                    j->mismatches++;
                    snprintf(j->msg, sizeof j->msg, "output uid %lld differs from the single-threaded result", (long long)C.b[i].uid);
                }
        QCALL(hipdnnEnginePluginDestroyExecutionContext, (h, c));
        free(wsp);
    }
    bufs_free(&B);
    if (j->separate) QCALL(hipdnnEnginePluginDestroy, (h));
    return NULL;
}

static int m_threads(int nthreads, int iters, int separate)
{
    Run r;
    run_open(&r);
    CALL("execute_1", hipdnnEnginePluginExecuteOpGraph, "handle, ctx, ws, buffers, n", (r.h, r.ctx, r.w, r.B.db, (uint32_t)C.nbuf));
    CALL("destroy_ctx", hipdnnEnginePluginDestroyExecutionContext, "handle, ctx", (r.h, r.ctx));
    r.ctx = NULL;
    unsigned char* expect[MAXBUF];
    for (int i = 0; i < C.nbuf; i++) expect[i] = r.B.mem[i];
    ThJob* jobs = calloc((size_t)nthreads, sizeof *jobs);
    pthread_t* ts = calloc((size_t)nthreads, sizeof *ts);
    pre("threads", "threads", separate ? "separate handles" : "one shared handle");
    for (int t = 0; t < nthreads; t++) {
        jobs[t] = (ThJob){r.h, separate, iters, 0, 0, expect, ""};
        pthread_create(&ts[t], NULL, th_body, &jobs[t]);
    }
    int fails = 0, mism = 0;
    const char* msg = "";
    for (int t = 0; t < nthreads; t++) {
        pthread_join(ts[t], NULL);
        fails += jobs[t].failures;
        mism += jobs[t].mismatches;
        if (jobs[t].msg[0]) msg = jobs[t].msg;
    }
    printf("{\"t\":\"threads\",\"threads\":%d,\"iters\":%d,\"failures\":%d,\"mismatches\":%d,\"msg\":", nthreads, iters, fails, mism);
    jstr(msg);
    printf("}\n");
    run_close(&r);
    free(jobs);
    free(ts);
    done();
    return 0;
}

/* ------------------------------------------------------------------ leak */
static long rss_kib(void)
{
    FILE* f = fopen("/proc/self/statm", "r");
    long pages = 0, res = 0;
    if (f) { if (fscanf(f, "%ld %ld", &pages, &res) != 2) res = 0; fclose(f); }
    return res * (sysconf(_SC_PAGESIZE) / 1024);
}
static int leak_cycle(void)
{
    H h = NULL;
    if (QCALL(hipdnnEnginePluginCreate, (&h)) || !h) return 1;
    int bad = 0;
    if (C.have) {
        CD d = {NULL, 0};
        if (QCALL(hipdnnEnginePluginGetEngineDetails, (h, C.engine, &C.graph, &d))) bad = 1;
        else if (QCALL(hipdnnEnginePluginDestroyEngineDetails, (h, &d))) bad = 1;
        Ctx c = NULL;
        if (QCALL(hipdnnEnginePluginCreateExecutionContext, (h, &C.config, &C.graph, &c)) || !c) bad = 1;
        else if (QCALL(hipdnnEnginePluginDestroyExecutionContext, (h, c))) bad = 1;
    }
    if (QCALL(hipdnnEnginePluginDestroy, (h))) bad = 1;
    return bad;
}
static int m_leak(int n)
{
    int bad = 0, warm = n / 10 > 200 ? 200 : n / 10 + 1;
    for (int i = 0; i < warm; i++) bad += leak_cycle();
    long before = rss_kib();
    for (int i = 0; i < n; i++) bad += leak_cycle();
    long after = rss_kib();
    printf("{\"t\":\"leak\",\"cycles\":%d,\"warmup\":%d,\"rss_before_kib\":%ld,\"rss_after_kib\":%ld,\"failures\":%d,\"with_context\":%d}\n",
           n, warm, before, after, bad, C.have);
    done();
    return 0;
}

/* ------------------------------------------------------------------ main */
int main(int argc, char** argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODE PLUGIN [CASE] [args]\n", argv[0]);
        return 2;
    }
    const char* mode = argv[1];
    g_lib = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
    if (!g_lib) {
        printf("{\"t\":\"dlopen\",\"error\":");
        jstr(dlerror());
        printf("}\n");
        return 5;
    }
#define X_LOAD(n, T) *(void**)(&P.n) = dlsym(g_lib, #n);
    SYMBOLS(X_LOAD)
    load_case(argc > 3 ? argv[3] : NULL);
    if (!strcmp(mode, "probe")) return m_probe();
    if (!strcmp(mode, "engine_ids")) return m_engine_ids();
    if (!strcmp(mode, "lifecycle")) return m_lifecycle(atoi(argv[4]), atoi(argv[5]));
    if (!strcmp(mode, "set_stream")) return m_set_stream();
    if (!strcmp(mode, "applicable")) return m_applicable(argc - 4, argv + 4);
    if (!strcmp(mode, "details")) return m_details(argc - 4, argv + 4);
    if (!strcmp(mode, "workspace")) return m_workspace();
    if (!strcmp(mode, "execute")) return m_execute();
    if (!strcmp(mode, "execute_ovr")) return m_execute_ovr();
    if (!strcmp(mode, "null")) return m_null(argv[4]);
    if (!strcmp(mode, "lasterr_set")) return m_lasterr_set();
    if (!strcmp(mode, "lasterr_threads")) return m_lasterr_threads();
    if (!strcmp(mode, "serialize")) return m_serialize(argv[4]);
    if (!strcmp(mode, "threads")) return m_threads(atoi(argv[4]), atoi(argv[5]), atoi(argv[6]));
    if (!strcmp(mode, "leak")) return m_leak(atoi(argv[4]));
    fprintf(stderr, "unknown mode %s\n", mode);
    return 2;
}
