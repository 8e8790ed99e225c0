/* hipdnn-cabi conformance: heuristic plugin driver.  dlopens one hipDNN heuristic plugin .so
 * (HeuristicsPluginApi.h) with RTLD_NOW | RTLD_LOCAL, the way a backend does, and runs one
 * scenario against it.  Like driver.c it judges nothing: every call is one JSON record on stdout
 * ("pre" before a call that may crash, "call" after it with the status and the plugin's last
 * error), plus mode-specific records; hipdnn_cabi/conformance/checks/heuristic.py decides.
 *
 *   heuristic_driver MODE PLUGIN.so [args...]
 *     type                                       hipdnnPluginGetType only (suite detection)
 *     probe UNKNOWN_ID                           symbols, strings, type, policy ids and names
 *     handle N                                   create/destroy, N live handles, Create(NULL)
 *     devprops CPU.bin GPU.bin                   SetDeviceProperties: valid, NULL, junk
 *     policy_desc REPEAT PIDS                    descriptor create/destroy per policy
 *     finalize DEVPROPS GRAPH CANDS PIDS         the policy pipeline per policy
 *     lasterr DEVPROPS GRAPH CANDS PIDS UNKNOWN  failing calls, each on a fresh thread
 *     null DEVPROPS GRAPH CANDS PIDS GROUP       NULL arguments of one group
 * CANDS and PIDS are comma-separated int64 lists.  A required symbol that is missing prints
 * {"t":"missing","fn":NAME} and exits 3.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hipdnn_plugin_sdk/HeuristicsPluginApi.h"

typedef hipdnnPluginStatus_t St;
typedef hipdnnHeuristicHandle_t H;
typedef hipdnnHeuristicPolicyDescriptor_t Pd;
typedef hipdnnPluginConstData_t CD;
typedef hipdnnHeuristicHostCallbacks_t Host;

#define SYMBOLS(X)                                                                                  \
    DRV_PLUGIN_SYMBOLS(X)                                                                           \
    X(hipdnnHeuristicPluginGetAllPolicyIds, St (*)(int64_t*, uint32_t, uint32_t*))                  \
    X(hipdnnHeuristicPluginGetPolicyName, St (*)(int64_t, const char**))                            \
    X(hipdnnHeuristicHandleCreate, St (*)(H*))                                                      \
    X(hipdnnHeuristicHandleDestroy, St (*)(H))                                                      \
    X(hipdnnHeuristicHandleSetDeviceProperties, St (*)(H, const CD*))                               \
    X(hipdnnHeuristicPolicyDescriptorCreate, St (*)(H, int64_t, Pd*))                               \
    X(hipdnnHeuristicPolicyDescriptorDestroy, St (*)(Pd))                                           \
    X(hipdnnHeuristicPolicySetEngineIds, St (*)(Pd, const int64_t*, size_t))                        \
    X(hipdnnHeuristicPolicySetSerializedGraph, St (*)(Pd, const CD*))                               \
    X(hipdnnHeuristicPolicyFinalize, St (*)(Pd, int32_t*))                                          \
    X(hipdnnHeuristicPolicyFinalizeWithHost, St (*)(Pd, const Host*, int32_t*))                     \
    X(hipdnnHeuristicPolicyGetEngineConfig, St (*)(Pd, int64_t, CD*))                               \
    X(hipdnnHeuristicPolicyGetSortedEngineIds, St (*)(Pd, int64_t*, size_t*))                       \
    X(hipdnnHeuristicPolicyGetTrace, St (*)(Pd, int64_t, const char**))


#define DRV_PLUGIN_IDENTITY 1
#include "driver_common.h"
#define QCALL(fn, expr) __extension__({ NEED(fn); P.fn expr; }) /* quiet: no records */

#define MAXIDS 256
static size_t parse_ids(const char* s, int64_t* out)
{
    size_t n = 0;
    char* q = (char*)s;
    while (q && *q && n < MAXIDS) {
        out[n++] = strtoll(q, &q, 10);
        if (*q == ',') q++;
        else break;
    }
    return n;
}

static CD g_dev, g_graph;
static int64_t g_cands[MAXIDS], g_pids[MAXIDS];
static size_t g_ncand, g_npid;
static void load_inputs(int argc, char** argv, int first)
{
    if (argc < first + 4) { fprintf(stderr, "need DEVPROPS GRAPH CANDS PIDS\n"); exit(2); }
    g_dev.ptr = slurp(argv[first], &g_dev.size);
    g_graph.ptr = slurp(argv[first + 1], &g_graph.size);
    g_ncand = parse_ids(argv[first + 2], g_cands);
    g_npid = parse_ids(argv[first + 3], g_pids);
}

static H make_handle(void)
{
    H h = NULL;
    if (CALL("handle_create", hipdnnHeuristicHandleCreate, "&handle", (&h)) || !h)
        fatal("hipdnnHeuristicHandleCreate failed");
    return h;
}
static H make_handle_with_device(void)
{
    H h = make_handle();
    if (CALL("set_device", hipdnnHeuristicHandleSetDeviceProperties, "handle, &device_props", (h, &g_dev)))
        fatal("hipdnnHeuristicHandleSetDeviceProperties failed");
    return h;
}
/* a descriptor with the graph and the candidates set (NULL when any step fails: records say why) */
static Pd ready_desc(H h, int64_t pid, const char* pfx)
{
    Pd d = NULL;
    char tag[64];
    snprintf(tag, sizeof tag, "%sdesc_create", pfx);
    if (CALL(tag, hipdnnHeuristicPolicyDescriptorCreate, "handle, policy_id, &desc", (h, pid, &d)) || !d) return NULL;
    snprintf(tag, sizeof tag, "%sset_graph", pfx);
    if (CALL(tag, hipdnnHeuristicPolicySetSerializedGraph, "desc, &serialized_graph", (d, &g_graph))) goto bad;
    snprintf(tag, sizeof tag, "%sset_ids", pfx);
    if (CALL(tag, hipdnnHeuristicPolicySetEngineIds, "desc, candidate_ids, count", (d, g_cands, g_ncand))) goto bad;
    return d;
bad:
    QCALL(hipdnnHeuristicPolicyDescriptorDestroy, (d));
    return NULL;
}

/* ------------------------------------------------------------------ modes */
static int m_type(void)
{
    if (!P.hipdnnPluginGetType) {
        printf("{\"t\":\"type\",\"st\":-1,\"value\":-1}\n");
        done();
        return 0;
    }
    hipdnnPluginType_t t = (hipdnnPluginType_t)99;
    St st = CALL("type", hipdnnPluginGetType, "&type", (&t));
    printf("{\"t\":\"type\",\"st\":%d,\"value\":%d}\n", st, (int)t);
    done();
    return 0;
}

static int m_probe(int64_t unknown)
{
    drv_probe_identity();
    if (P.hipdnnHeuristicPluginGetAllPolicyIds) {
        uint32_t n = 0xdeadbeef, m = 0xdeadbeef;
        St st = CALL("count", hipdnnHeuristicPluginGetAllPolicyIds, "NULL, 0, &num", (NULL, 0, &n));
        printf("{\"t\":\"count\",\"st\":%d,\"n\":%u}\n", st, n);
        if (st == 0 && n <= 4096) {
            const int64_t guard = 0x5a5a5a5a5a5a5a5aLL;
            int64_t* ids = calloc((size_t)n + 2, sizeof *ids);
            ids[n] = ids[n + 1] = guard;
            st = CALL("ids", hipdnnHeuristicPluginGetAllPolicyIds, "ids, n, &num", (ids, n, &m));
            printf("{\"t\":\"ids\",\"st\":%d,\"n\":%u,\"past\":%d,\"ids\":", st, m, ids[n] != guard);
            jids(ids, m < n ? m : n);
            printf("}\n");
            if (st == 0)
                for (uint32_t i = 0; i < m && i < n; i++) {
                    const char* nm = NULL;
                    St s = CALL("policy_name", hipdnnHeuristicPluginGetPolicyName, "policy_id, &name", (ids[i], &nm));
                    printf("{\"t\":\"policy_name\",\"id\":\"%lld\",\"st\":%d,\"name\":", (long long)ids[i], s);
                    jstr(s ? NULL : nm);
                    printf("}\n");
                }
            /* max_policies smaller than the count: nothing past it */
            if (st == 0 && n >= 1) {
                uint32_t cap = n - 1, k = 0xdeadbeef;
                int64_t* small = malloc(((size_t)n + 1) * sizeof *small);
                for (uint32_t i = 0; i <= n; i++) small[i] = guard;
                St s = CALL("ids_cap", hipdnnHeuristicPluginGetAllPolicyIds, "ids, n - 1, &num", (small, cap, &k));
                int past = 0;
                for (uint32_t i = cap; i <= n; i++) past |= small[i] != guard;
                printf("{\"t\":\"ids_cap\",\"st\":%d,\"max\":%u,\"num\":%u,\"past\":%d}\n", s, cap, k, past);
                free(small);
            }
            free(ids);
        }
        if (P.hipdnnHeuristicPluginGetPolicyName) {
            const char* nm = (const char*)0x1;
            St s = CALL("unknown_name", hipdnnHeuristicPluginGetPolicyName, "unknown policy_id, &name", (unknown, &nm));
            printf("{\"t\":\"unknown_name\",\"id\":\"%lld\",\"st\":%d}\n", (long long)unknown, s);
        }
    }
    done();
    return 0;
}

static int m_handle(int count)
{
    H h = NULL;
    St st = CALL("create", hipdnnHeuristicHandleCreate, "&handle", (&h));
    printf("{\"t\":\"handle\",\"null\":%d}\n", h == NULL);
    if (st == 0 && h) CALL("destroy", hipdnnHeuristicHandleDestroy, "live handle", (h));
    CALL("create_null", hipdnnHeuristicHandleCreate, "NULL", (NULL));
    H* hs = calloc((size_t)count + 1, sizeof *hs);
    int bad = 0, dup = 0;
    for (int i = 0; i < count; i++)
        if (QCALL(hipdnnHeuristicHandleCreate, (&hs[i])) || !hs[i]) bad++;
    for (int i = 0; i < count; i++)
        for (int j = 0; j < i; j++) dup += hs[i] && hs[i] == hs[j];
    for (int i = count - 1; i >= 0; i--)
        if (hs[i] && QCALL(hipdnnHeuristicHandleDestroy, (hs[i]))) bad++;
    printf("{\"t\":\"many\",\"n\":%d,\"failures\":%d,\"duplicates\":%d}\n", count, bad, dup);
    free(hs);
    done();
    return 0;
}

static int m_devprops(const char* cpu, const char* gpu)
{
    CD c, g, z = {NULL, 0};
    c.ptr = slurp(cpu, &c.size);
    g.ptr = slurp(gpu, &g.size);
    static const char junk[] = "this is not a DeviceProperties FlatBuffer";
    CD j = {junk, sizeof junk};
    H h = make_handle();
    CALL("valid_cpu", hipdnnHeuristicHandleSetDeviceProperties, "handle, &{CPU DeviceProperties (HDDP)}", (h, &c));
    CALL("valid_gpu", hipdnnHeuristicHandleSetDeviceProperties, "handle, &{GPU DeviceProperties (HDDP)}", (h, &g));
    CALL("null", hipdnnHeuristicHandleSetDeviceProperties, "handle, NULL", (h, NULL));
    CALL("null_ptr", hipdnnHeuristicHandleSetDeviceProperties, "handle, &{ptr=NULL, size=0}", (h, &z));
    CALL("junk", hipdnnHeuristicHandleSetDeviceProperties, "handle, &{42 junk bytes}", (h, &j));
    CALL("destroy", hipdnnHeuristicHandleDestroy, "handle", (h));
    done();
    return 0;
}

static int m_policy_desc(int repeat)
{
    H h = make_handle();
    Pd live[MAXIDS];
    int bad = 0, dup = 0, nlive = 0;
    for (size_t i = 0; i < g_npid; i++) {
        Pd d = NULL;
        St st = CALL("create", hipdnnHeuristicPolicyDescriptorCreate, "handle, policy_id, &desc", (h, g_pids[i], &d));
        printf("{\"t\":\"create\",\"id\":\"%lld\",\"st\":%d,\"null\":%d}\n", (long long)g_pids[i], st, d == NULL);
        if (st == 0 && d) live[nlive++] = d;
    }
    for (int i = 0; i < nlive; i++)
        for (int j = 0; j < i; j++) dup += live[i] == live[j];
    for (int i = 0; i < nlive; i++)
        CALL("destroy", hipdnnHeuristicPolicyDescriptorDestroy, "live desc", (live[i]));
    for (int r = 0; r < repeat; r++)
        for (size_t i = 0; i < g_npid; i++) {
            Pd d = NULL;
            if (QCALL(hipdnnHeuristicPolicyDescriptorCreate, (h, g_pids[i], &d)) || !d) bad++;
            else if (QCALL(hipdnnHeuristicPolicyDescriptorDestroy, (d))) bad++;
        }
    printf("{\"t\":\"repeat\",\"n\":%d,\"failures\":%d,\"duplicates\":%d}\n", repeat * (int)g_npid, bad, dup);
    CALL("destroy_handle", hipdnnHeuristicHandleDestroy, "handle", (h));
    done();
    return 0;
}

/* sorted ids of a finalized descriptor: the count query, the full fetch, short buffers */
static void sorted_ids(Pd d, const char* pfx, int64_t pid)
{
    const int64_t guard = 0x5a5a5a5a5a5a5a5aLL;
    char tag[64];
    size_t n = (size_t)0xdeadbeef;
    snprintf(tag, sizeof tag, "%ssorted_count", pfx);
    St st = CALL(tag, hipdnnHeuristicPolicyGetSortedEngineIds, "desc, NULL, &num", (d, NULL, &n));
    printf("{\"t\":\"%ssorted_count\",\"id\":\"%lld\",\"st\":%d,\"n\":%zu}\n", pfx, (long long)pid, st, n);
    if (st || n > 4096) return;
    int64_t* ids = malloc((n + 2) * sizeof *ids);
    for (size_t i = 0; i < n + 2; i++) ids[i] = guard;
    size_t m = n;
    snprintf(tag, sizeof tag, "%ssorted_fetch", pfx);
    st = CALL(tag, hipdnnHeuristicPolicyGetSortedEngineIds, "desc, ids, &num (num = count)", (d, ids, &m));
    printf("{\"t\":\"%ssorted\",\"id\":\"%lld\",\"st\":%d,\"n\":%zu,\"past\":%d,\"ids\":", pfx, (long long)pid, st, m,
           ids[n] != guard);
    jids(ids, m < n ? m : n);
    printf("}\n");
    /* short buffers: count - 1 and 1 (a prefix, SUCCESS, nothing written past) */
    size_t caps[2] = {n ? n - 1 : 0, 1};
    for (int c = 0; c < 2; c++) {
        size_t cap = caps[c];
        if (c == 1 && (n < 3)) break; /* 1 == n - 1 already, or no shorter buffer */
        int64_t* b = malloc((n + 2) * sizeof *b);
        for (size_t i = 0; i < n + 2; i++) b[i] = guard;
        size_t k = cap;
        snprintf(tag, sizeof tag, "%ssorted_short%d", pfx, c);
        St s = CALL(tag, hipdnnHeuristicPolicyGetSortedEngineIds, "desc, ids, &num (num < count)", (d, b, &k));
        int past = 0;
        for (size_t i = cap; i < n + 2; i++) past |= b[i] != guard;
        printf("{\"t\":\"%ssorted_short\",\"id\":\"%lld\",\"st\":%d,\"cap\":%zu,\"n\":%zu,\"past\":%d,\"ids\":", pfx,
               (long long)pid, s, cap, k, past);
        jids(b, k < cap ? k : cap);
        printf("}\n");
        free(b);
    }
    /* the optional per-engine queries, for every sorted id */
    for (size_t i = 0; !st && i < m && i < n; i++) {
        if (P.hipdnnHeuristicPolicyGetEngineConfig) {
            CD cfg = {NULL, 0};
            snprintf(tag, sizeof tag, "%sengine_config", pfx);
            St s = CALL(tag, hipdnnHeuristicPolicyGetEngineConfig, "desc, engine_id, &config", (d, ids[i], &cfg));
            printf("{\"t\":\"%sengine_config\",\"id\":\"%lld\",\"engine\":\"%lld\",\"st\":%d,\"null\":%d,\"size\":%zu,\"hex\":",
                   pfx, (long long)pid, (long long)ids[i], s, cfg.ptr == NULL, cfg.size);
            jhex(s == 0 ? cfg.ptr : NULL, cfg.size < 65536 ? cfg.size : 0);
            printf("}\n");
        }
        if (P.hipdnnHeuristicPolicyGetTrace) {
            const char* tr = NULL;
            snprintf(tag, sizeof tag, "%strace", pfx);
            St s = CALL(tag, hipdnnHeuristicPolicyGetTrace, "desc, engine_id, &trace_json", (d, ids[i], &tr));
            printf("{\"t\":\"%strace\",\"id\":\"%lld\",\"engine\":\"%lld\",\"st\":%d,\"null\":%d,\"text\":", pfx,
                   (long long)pid, (long long)ids[i], s, tr == NULL);
            jstr(s == 0 ? tr : NULL);
            printf("}\n");
        }
    }
    free(ids);
}

/* the host callback table: no predictions (every query answers NOT_APPLICABLE), as our host */
static int g_predictions;
static St no_prediction(void* ctx, int64_t engine_id, hipdnnEnginePredictionKind_t kind, CD* prediction)
{
    (void)ctx; (void)engine_id; (void)kind;
    __atomic_add_fetch(&g_predictions, 1, __ATOMIC_SEQ_CST);
    if (prediction) { prediction->ptr = NULL; prediction->size = 0; }
    return HIPDNN_PLUGIN_STATUS_NOT_APPLICABLE;
}

static int m_finalize(void)
{
    H h = make_handle_with_device();
    for (size_t i = 0; i < g_npid; i++) {
        int64_t pid = g_pids[i];
        /* finalize before the graph and the ids are set */
        Pd d0 = NULL;
        if (!CALL("early_desc_create", hipdnnHeuristicPolicyDescriptorCreate, "handle, policy_id, &desc", (h, pid, &d0)) && d0) {
            int32_t a = 7;
            size_t n = (size_t)0xdeadbeef;
            St st = CALL("early_finalize", hipdnnHeuristicPolicyFinalize, "desc (no graph, no engine ids), &applied", (d0, &a));
            St s2 = CALL("early_sorted", hipdnnHeuristicPolicyGetSortedEngineIds, "unfinalized desc, NULL, &num", (d0, NULL, &n));
            printf("{\"t\":\"early\",\"id\":\"%lld\",\"st\":%d,\"applied\":%d,\"sorted_st\":%d}\n", (long long)pid, st, a, s2);
            CALL("early_desc_destroy", hipdnnHeuristicPolicyDescriptorDestroy, "desc", (d0));
        }
        /* the pipeline: graph, candidates, finalize, sorted ids */
        Pd d = ready_desc(h, pid, "");
        if (d) {
            int32_t a = 7;
            St st = CALL("finalize", hipdnnHeuristicPolicyFinalize, "desc, &applied", (d, &a));
            printf("{\"t\":\"finalize\",\"id\":\"%lld\",\"st\":%d,\"applied\":%d}\n", (long long)pid, st, a);
            if (st == 0 && a == 1) sorted_ids(d, "", pid);
            CALL("desc_destroy", hipdnnHeuristicPolicyDescriptorDestroy, "desc", (d));
        }
        /* the same through FinalizeWithHost (when exported) */
        if (P.hipdnnHeuristicPolicyFinalizeWithHost && (d = ready_desc(h, pid, "host_"))) {
            Host host;
            memset(&host, 0, sizeof host);
            host.version = 1;
            host.struct_size = sizeof host;
            host.context = &g_predictions;
            host.get_prediction = no_prediction;
            host.ranking_metric = NULL;
            int32_t a = 7;
            g_predictions = 0;
            St st = CALL("host_finalize", hipdnnHeuristicPolicyFinalizeWithHost, "desc, &host (predictions NOT_APPLICABLE), &applied", (d, &host, &a));
            printf("{\"t\":\"host_finalize\",\"id\":\"%lld\",\"st\":%d,\"applied\":%d,\"predictions\":%d}\n", (long long)pid, st, a,
                   g_predictions);
            if (st == 0 && a == 1) sorted_ids(d, "host_", pid);
            CALL("host_desc_destroy", hipdnnHeuristicPolicyDescriptorDestroy, "desc", (d));
        }
    }
    CALL("handle_destroy", hipdnnHeuristicHandleDestroy, "handle", (h));
    done();
    return 0;
}

/* ------------------------------------------------------------------ last error */
enum { LE_NAME, LE_CREATE_NULL, LE_DEVPROPS_NULL, LE_EARLY_FINALIZE, LE_UNFINALIZED_SORTED, N_LE };
static const char* LE_FN[N_LE] = {"hipdnnHeuristicPluginGetPolicyName", "hipdnnHeuristicHandleCreate",
                                  "hipdnnHeuristicHandleSetDeviceProperties", "hipdnnHeuristicPolicyFinalize",
                                  "hipdnnHeuristicPolicyGetSortedEngineIds"};
static const char* LE_ARGS[N_LE] = {"unknown policy_id, &name", "NULL", "handle, NULL",
                                    "desc (no graph, no engine ids), &applied", "unfinalized desc, NULL, &num"};
typedef struct {
    int which;
    H h;
    Pd d;
    int64_t unknown;
    St st;
    int null_err;
    char err[1024];
} LeJob;
static void* le_thread(void* arg)
{
    LeJob* j = arg;
    const char* nm = NULL;
    int32_t a = 7;
    size_t n = 0;
    switch (j->which) {
    case LE_NAME: j->st = P.hipdnnHeuristicPluginGetPolicyName(j->unknown, &nm); break;
    case LE_CREATE_NULL: j->st = P.hipdnnHeuristicHandleCreate(NULL); break;
    case LE_DEVPROPS_NULL: j->st = P.hipdnnHeuristicHandleSetDeviceProperties(j->h, NULL); break;
    case LE_EARLY_FINALIZE: j->st = P.hipdnnHeuristicPolicyFinalize(j->d, &a); break;
    case LE_UNFINALIZED_SORTED: j->st = P.hipdnnHeuristicPolicyGetSortedEngineIds(j->d, NULL, &n); break;
    }
    const char* e = (const char*)0x1;
    P.hipdnnPluginGetLastErrorString(&e);
    j->null_err = e == NULL;
    snprintf(j->err, sizeof j->err, "%s", e ? e : "");
    return NULL;
}
static int m_lasterr(int64_t unknown)
{
    NEED(hipdnnPluginGetLastErrorString);
    const void* fns[N_LE] = {(const void*)P.hipdnnHeuristicPluginGetPolicyName, (const void*)P.hipdnnHeuristicHandleCreate,
                             (const void*)P.hipdnnHeuristicHandleSetDeviceProperties,
                             (const void*)P.hipdnnHeuristicPolicyFinalize,
                             (const void*)P.hipdnnHeuristicPolicyGetSortedEngineIds};
    H h = make_handle();
    for (int w = 0; w < N_LE; w++) {
        Pd d = NULL;
        if (!fns[w]) continue; /* not exported: conform.heuristic.required_symbols */
        if (w >= LE_EARLY_FINALIZE &&
            (!g_npid || CALL("desc_create", hipdnnHeuristicPolicyDescriptorCreate, "handle, policy_id, &desc", (h, g_pids[0], &d)) || !d))
            continue;
        LeJob j;
        memset(&j, 0, sizeof j);
        j.which = w; j.h = h; j.d = d; j.unknown = unknown;
        pthread_t t;
        pre("failing", LE_FN[w], LE_ARGS[w]);
        pthread_create(&t, NULL, le_thread, &j);
        pthread_join(t, NULL);
        printf("{\"t\":\"failing\",\"fn\":\"%s\",\"args\":\"%s\",\"st\":%d,\"null\":%d,\"after\":", LE_FN[w], LE_ARGS[w],
               j.st, j.null_err);
        jstr(j.null_err ? NULL : j.err);
        printf("}\n");
        fflush(stdout);
        if (d) QCALL(hipdnnHeuristicPolicyDescriptorDestroy, (d));
    }
    CALL("handle_destroy", hipdnnHeuristicHandleDestroy, "handle", (h));
    done();
    return 0;
}

/* ------------------------------------------------------------------ NULL arguments */
static int m_null(const char* only)
{
    int64_t ids[MAXIDS];
    int64_t pid = g_npid ? g_pids[0] : 0;
    /* N(group, ...): one call of a group (conform.heuristic.null_args_<group>), when exported */
#define N(group, fn, args, expr)                                                                    \
    do {                                                                                            \
        if (P.fn && !strcmp(only, group)) CALL("n_" group, fn, args, expr);                         \
    } while (0)
    N("plugin_info", hipdnnPluginGetName, "NULL", (NULL));
    N("plugin_info", hipdnnPluginGetVersion, "NULL", (NULL));
    N("plugin_info", hipdnnPluginGetApiVersion, "NULL", (NULL));
    N("plugin_info", hipdnnPluginGetType, "NULL", (NULL));
    if (P.hipdnnPluginGetLastErrorString && !strcmp(only, "plugin_info")) {
        pre("last_error_null", "hipdnnPluginGetLastErrorString", "NULL");
        P.hipdnnPluginGetLastErrorString(NULL);
        printf("{\"t\":\"last_error_null_ok\"}\n");
    }
    N("policies", hipdnnHeuristicPluginGetAllPolicyIds, "NULL, 0, NULL", (NULL, 0, NULL));
    N("policies", hipdnnHeuristicPluginGetAllPolicyIds, "ids, 4, NULL", (ids, 4, NULL));
    N("policies", hipdnnHeuristicPluginGetPolicyName, "policy_id, NULL", (pid, NULL));
    H h = make_handle_with_device();
    N("handle", hipdnnHeuristicHandleDestroy, "NULL", (NULL));
    N("handle", hipdnnHeuristicHandleSetDeviceProperties, "NULL, &device_props", (NULL, &g_dev));
    Pd d = NULL;
    N("policy_desc", hipdnnHeuristicPolicyDescriptorCreate, "NULL, policy_id, &desc", (NULL, pid, &d));
    N("policy_desc", hipdnnHeuristicPolicyDescriptorCreate, "handle, policy_id, NULL", (h, pid, NULL));
    N("policy_desc", hipdnnHeuristicPolicyDescriptorDestroy, "NULL", (NULL));
    N("policy_desc", hipdnnHeuristicPolicySetEngineIds, "NULL, ids, count", (NULL, g_cands, g_ncand));
    N("policy_desc", hipdnnHeuristicPolicySetSerializedGraph, "NULL, &graph", (NULL, &g_graph));
    int32_t a = 7;
    size_t n = 4;
    N("policy_desc", hipdnnHeuristicPolicyFinalize, "NULL, &applied", (NULL, &a));
    N("policy_desc", hipdnnHeuristicPolicyGetSortedEngineIds, "NULL, ids, &num", (NULL, ids, &n));
    d = NULL;
    if (strcmp(only, "policy_desc")) g_npid = 0; /* the descriptor cases below belong to policy_desc */
    if (g_npid && P.hipdnnHeuristicPolicyDescriptorCreate && P.hipdnnHeuristicPolicyDescriptorDestroy &&
        !QCALL(hipdnnHeuristicPolicyDescriptorCreate, (h, pid, &d)) && d) {
        N("policy_desc", hipdnnHeuristicPolicySetEngineIds, "desc, NULL, 2", (d, NULL, 2));
        N("policy_desc", hipdnnHeuristicPolicySetSerializedGraph, "desc, NULL", (d, NULL));
        CD empty = {NULL, 0};
        N("policy_desc", hipdnnHeuristicPolicySetSerializedGraph, "desc, &{ptr=NULL, size=0}", (d, &empty));
        QCALL(hipdnnHeuristicPolicyDescriptorDestroy, (d));
    }
    /* on a finalized descriptor: the first policy that applies (Finalize(desc, NULL) on the first) */
    int applied_one = 0;
    for (size_t i = 0; i < g_npid && !applied_one; i++) {
        if (!(P.hipdnnHeuristicPolicySetSerializedGraph && P.hipdnnHeuristicPolicySetEngineIds &&
              P.hipdnnHeuristicPolicyFinalize && (d = ready_desc(h, g_pids[i], "q_"))))
            break;
        if (i == 0) N("policy_desc", hipdnnHeuristicPolicyFinalize, "desc, NULL", (d, NULL));
        int32_t ap = 7;
        if (!QCALL(hipdnnHeuristicPolicyFinalize, (d, &ap)) && ap == 1) {
            applied_one = 1;
            N("policy_desc", hipdnnHeuristicPolicyGetSortedEngineIds, "desc, ids, NULL", (d, ids, NULL));
            N("policy_desc", hipdnnHeuristicPolicyGetEngineConfig, "desc, engine_id, NULL", (d, g_cands[0], NULL));
            N("policy_desc", hipdnnHeuristicPolicyGetTrace, "desc, engine_id, NULL", (d, g_cands[0], NULL));
        }
        QCALL(hipdnnHeuristicPolicyDescriptorDestroy, (d));
    }
    CALL("handle_destroy", hipdnnHeuristicHandleDestroy, "handle", (h));
    done();
    return 0;
}

int main(int argc, char** argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODE PLUGIN [args]\n", argv[0]);
        return 2;
    }
    const char* mode = argv[1];
    void* lib = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        printf("{\"t\":\"dlopen\",\"error\":");
        jstr(dlerror());
        printf("}\n");
        return 5;
    }
#define X_LOAD(n, T) *(void**)(&P.n) = dlsym(lib, #n);
    SYMBOLS(X_LOAD)
    if (!strcmp(mode, "type")) return m_type();
    if (!strcmp(mode, "probe") && argc > 3) return m_probe(strtoll(argv[3], NULL, 10));
    if (!strcmp(mode, "handle") && argc > 3) return m_handle(atoi(argv[3]));
    if (!strcmp(mode, "devprops") && argc > 4) return m_devprops(argv[3], argv[4]);
    if (!strcmp(mode, "policy_desc") && argc > 4) {
        g_npid = parse_ids(argv[4], g_pids);
        return m_policy_desc(atoi(argv[3]));
    }
    if (!strcmp(mode, "finalize")) { load_inputs(argc, argv, 3); return m_finalize(); }
    if (!strcmp(mode, "lasterr") && argc > 7) { load_inputs(argc, argv, 3); return m_lasterr(strtoll(argv[7], NULL, 10)); }
    if (!strcmp(mode, "null") && argc > 7) { load_inputs(argc, argv, 3); return m_null(argv[7]); }
    fprintf(stderr, "unknown mode %s\n", mode);
    return 2;
}
