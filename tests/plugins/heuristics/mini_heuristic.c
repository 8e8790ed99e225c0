/* A configurable heuristic plugin for the heuristic-host tests.  Compile-time switches:
 *   HEUR_TAG="x"          plugin name "mini_heur_x"
 *   POLICY_NAME="P"       the one policy's name (default "MiniHeuristic::<tag>"); id = FNV-1a-64
 *   SECOND_POLICY="Q"     a second policy (always declines)
 *   MODE_REVERSE          order = candidates reversed (default: candidates as given)
 *   MODE_DECLINE          Finalize reports applied = 0
 *   MODE_FAIL             Finalize fails with INTERNAL_ERROR and a message
 *   MODE_WRONG_IDS        GetSortedEngineIds answers an id that is not a candidate
 *   MODE_DUP_IDS          GetSortedEngineIds repeats the first id
 *   MODE_EMPTY            applied, but zero sorted ids
 *   SLEEP_MS=n            Finalize sleeps n ms (a slow policy)
 *   BAD_POLICY_HASH       the policy id is not the hash of its name (rejected at load)
 *   NO_FINALIZE           omit the required hipdnnHeuristicPolicyFinalize (rejected at load)
 *   WITH_HOST             export FinalizeWithHost (records the ranking metric and a prediction)
 *   WITH_TRACE            export GetTrace
 *   WITH_CONFIG           export GetEngineConfig (not applicable for every engine)
 *   API_VERSION="v"       hipdnnPluginGetApiVersion answer (default HIPDNN_HEURISTIC_API_VERSION)
 *   RECORD_FILE="path"    append one line per call of interest (handle create/destroy, device
 *                         properties size, finalize, log level) to this file
 * Faults for the conformance self-tests (tests/conformance/test_heuristic_conformance.py):
 *   CRASH_ON_NULL_GRAPH   SetSerializedGraph dereferences a NULL graph (SIGSEGV)
 *   NULL_LAST_ERROR       GetLastErrorString answers NULL
 *   SHORT_BUFFER_FAILS    GetSortedEngineIds fails on a buffer shorter than the count (no prefix)
 *   CONFIG_JUNK           export GetEngineConfig answering SUCCESS with bytes that are no EngineConfig
 */
#define _POSIX_C_SOURCE 200809L
#include <hipdnn_plugin_sdk/HeuristicsPluginApi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef HEUR_TAG
#define HEUR_TAG "a"
#endif
#ifndef POLICY_NAME
#define POLICY_NAME "MiniHeuristic::" HEUR_TAG
#endif
#ifndef API_VERSION
#define API_VERSION HIPDNN_HEURISTIC_API_VERSION
#endif
#define P HIPDNN_PLUGIN_EXPORT hipdnnPluginStatus_t

static const char* g_err = "";
static int g_handle_tag;

static void record(const char* fmt, long a) {
#ifdef RECORD_FILE
    FILE* f = fopen(RECORD_FILE, "a");
    if (f) { fprintf(f, fmt, a); fputc('\n', f); fclose(f); }
#else
    (void)fmt; (void)a;
#endif
}

__attribute__((unused)) static int64_t fnv(const char* s) {
    uint64_t h = 0xCBF29CE484222325ull;
    for (; *s; ++s) { h ^= (unsigned char)*s; h *= 0x100000001B3ull; }
    return (int64_t)h;
}

typedef struct {
    int64_t policy;
    int64_t ids[64];
    size_t n;
    int64_t sorted[64];
    size_t ns;
    int finalized;
    int have_graph;
} Policy;

P hipdnnPluginGetName(const char** name) { if (!name) return HIPDNN_PLUGIN_STATUS_BAD_PARAM; *name = "mini_heur_" HEUR_TAG; return HIPDNN_PLUGIN_STATUS_SUCCESS; }
P hipdnnPluginGetVersion(const char** v) { if (!v) return HIPDNN_PLUGIN_STATUS_BAD_PARAM; *v = "1.2.3"; return HIPDNN_PLUGIN_STATUS_SUCCESS; }
P hipdnnPluginGetApiVersion(const char** v) { if (!v) return HIPDNN_PLUGIN_STATUS_BAD_PARAM; *v = API_VERSION; return HIPDNN_PLUGIN_STATUS_SUCCESS; }
P hipdnnPluginGetType(hipdnnPluginType_t* t) { if (!t) return HIPDNN_PLUGIN_STATUS_BAD_PARAM; *t = HIPDNN_PLUGIN_TYPE_HEURISTIC; return HIPDNN_PLUGIN_STATUS_SUCCESS; }
#ifdef NULL_LAST_ERROR
HIPDNN_PLUGIN_EXPORT void hipdnnPluginGetLastErrorString(const char** s) { (void)g_err; if (s) *s = NULL; }
#else
HIPDNN_PLUGIN_EXPORT void hipdnnPluginGetLastErrorString(const char** s) { if (s) *s = g_err; }
#endif
P hipdnnPluginSetLoggingCallback(hipdnnCallback_t cb) { (void)cb; return HIPDNN_PLUGIN_STATUS_SUCCESS; }
P hipdnnPluginSetLogLevel(hipdnnSeverity_t level) { record("loglevel %ld", (long)level); return HIPDNN_PLUGIN_STATUS_SUCCESS; }

static int64_t policy_id(void) {
#ifdef BAD_POLICY_HASH
    return 12345;
#else
    return fnv(POLICY_NAME);
#endif
}

P hipdnnHeuristicPluginGetAllPolicyIds(int64_t* ids, uint32_t max, uint32_t* n) {
    if (!n) return HIPDNN_PLUGIN_STATUS_BAD_PARAM;
#ifdef SECOND_POLICY
    uint32_t total = 2;
#else
    uint32_t total = 1;
#endif
    if (!ids) { *n = total; return HIPDNN_PLUGIN_STATUS_SUCCESS; }
    uint32_t k = 0;
    if (k < max) ids[k++] = policy_id();
#ifdef SECOND_POLICY
    if (k < max) ids[k++] = fnv(SECOND_POLICY);
#endif
    *n = k;
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}

P hipdnnHeuristicPluginGetPolicyName(int64_t id, const char** name) {
    if (!name) return HIPDNN_PLUGIN_STATUS_BAD_PARAM;
    if (id == policy_id()) { *name = POLICY_NAME; return HIPDNN_PLUGIN_STATUS_SUCCESS; }
#ifdef SECOND_POLICY
    if (id == fnv(SECOND_POLICY)) { *name = SECOND_POLICY; return HIPDNN_PLUGIN_STATUS_SUCCESS; }
#endif
    g_err = "unknown policy id";
    return HIPDNN_PLUGIN_STATUS_BAD_PARAM;
}

P hipdnnHeuristicHandleCreate(hipdnnHeuristicHandle_t* out) {
    if (!out) return HIPDNN_PLUGIN_STATUS_BAD_PARAM;
    *out = (hipdnnHeuristicHandle_t)&g_handle_tag;
    record("create %ld", 0);
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}
P hipdnnHeuristicHandleDestroy(hipdnnHeuristicHandle_t h) {
    if (h != (hipdnnHeuristicHandle_t)&g_handle_tag) return HIPDNN_PLUGIN_STATUS_BAD_PARAM;
    record("destroy %ld", 0);
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}
P hipdnnHeuristicHandleSetDeviceProperties(hipdnnHeuristicHandle_t h, const hipdnnPluginConstData_t* d) {
    if (!h || !d || !d->ptr) return HIPDNN_PLUGIN_STATUS_BAD_PARAM;
    /* A FlatBuffer with file identifier "HDDP" at bytes 4..7. */
    if (d->size < 8 || memcmp((const char*)d->ptr + 4, "HDDP", 4) != 0) {
        g_err = "device properties are not an HDDP FlatBuffer";
        return HIPDNN_PLUGIN_STATUS_BAD_PARAM;
    }
    record("devprops %ld", (long)d->size);
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}

P hipdnnHeuristicPolicyDescriptorCreate(hipdnnHeuristicHandle_t h, int64_t id, hipdnnHeuristicPolicyDescriptor_t* out) {
    if (!h || !out) return HIPDNN_PLUGIN_STATUS_BAD_PARAM;
    Policy* p = calloc(1, sizeof(Policy));
    if (!p) return HIPDNN_PLUGIN_STATUS_ALLOC_FAILED;
    p->policy = id;
    *out = (hipdnnHeuristicPolicyDescriptor_t)p;
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}
P hipdnnHeuristicPolicyDescriptorDestroy(hipdnnHeuristicPolicyDescriptor_t d) {
    if (!d) return HIPDNN_PLUGIN_STATUS_BAD_PARAM;
    record("policy_destroy %ld", 0);
    free(d);
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}
P hipdnnHeuristicPolicySetEngineIds(hipdnnHeuristicPolicyDescriptor_t d, const int64_t* ids, size_t n) {
    Policy* p = (Policy*)d;
    if (!p || (n && !ids) || n > 64) return HIPDNN_PLUGIN_STATUS_BAD_PARAM;
    memcpy(p->ids, ids, n * sizeof(int64_t));
    p->n = n;
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}
P hipdnnHeuristicPolicySetSerializedGraph(hipdnnHeuristicPolicyDescriptor_t d, const hipdnnPluginConstData_t* g) {
    Policy* p = (Policy*)d;
#ifdef CRASH_ON_NULL_GRAPH
    if (p && ((const volatile hipdnnPluginConstData_t*)g)->size == 0) return HIPDNN_PLUGIN_STATUS_BAD_PARAM;
#endif
    if (!p || !g || !g->ptr || !g->size) return HIPDNN_PLUGIN_STATUS_BAD_PARAM;
    p->have_graph = 1;
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}

__attribute__((unused)) static hipdnnPluginStatus_t finalize(Policy* p, int32_t* applied) {
    if (!p || !applied) return HIPDNN_PLUGIN_STATUS_BAD_PARAM;
    if (!p->have_graph) { g_err = "graph not set"; return HIPDNN_PLUGIN_STATUS_BAD_PARAM; }
#ifdef SLEEP_MS
    struct timespec ts = {SLEEP_MS / 1000, (SLEEP_MS % 1000) * 1000000L};
    nanosleep(&ts, NULL);
#endif
    record("finalize %ld", (long)p->n);
#ifdef SECOND_POLICY
    if (p->policy == fnv(SECOND_POLICY)) { *applied = 0; return HIPDNN_PLUGIN_STATUS_SUCCESS; }
#endif
#if defined(MODE_FAIL)
    g_err = "mini heuristic: finalize failed on purpose";
    return HIPDNN_PLUGIN_STATUS_INTERNAL_ERROR;
#elif defined(MODE_DECLINE)
    *applied = 0;
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
#else
    for (size_t i = 0; i < p->n; ++i) {
#ifdef MODE_REVERSE
        p->sorted[i] = p->ids[p->n - 1 - i];
#else
        p->sorted[i] = p->ids[i];
#endif
    }
    p->ns = p->n;
#ifdef MODE_WRONG_IDS
    if (p->ns) p->sorted[0] = 424242;
#endif
#ifdef MODE_DUP_IDS
    if (p->ns > 1) p->sorted[1] = p->sorted[0];
#endif
#ifdef MODE_EMPTY
    p->ns = 0;
#endif
    p->finalized = 1;
    *applied = 1;
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
#endif
}

#ifndef NO_FINALIZE
P hipdnnHeuristicPolicyFinalize(hipdnnHeuristicPolicyDescriptor_t d, int32_t* applied) {
    record("finalize_plain %ld", 0);
    return finalize((Policy*)d, applied);
}
#endif

#ifdef WITH_HOST
P hipdnnHeuristicPolicyFinalizeWithHost(hipdnnHeuristicPolicyDescriptor_t d, const hipdnnHeuristicHostCallbacks_t* host, int32_t* applied) {
    if (!host || host->struct_size < sizeof(hipdnnHeuristicHostCallbacks_t) || !host->get_prediction)
        return HIPDNN_PLUGIN_STATUS_BAD_PARAM;
    Policy* p = (Policy*)d;
    hipdnnPluginConstData_t pred = {NULL, 0};
    hipdnnPluginStatus_t st = p && p->n ? host->get_prediction(host->context, p->ids[0], HIPDNN_ENGINE_PREDICTION_ENGINE, &pred) : HIPDNN_PLUGIN_STATUS_SUCCESS;
    record("with_host prediction_status %ld", (long)st);
    record(host->ranking_metric ? "with_host metric %ld" : "with_host nometric %ld",
           host->ranking_metric ? (long)strlen(host->ranking_metric) : 0L);
    return finalize(p, applied);
}
#endif

P hipdnnHeuristicPolicyGetSortedEngineIds(hipdnnHeuristicPolicyDescriptor_t d, int64_t* ids, size_t* n) {
    Policy* p = (Policy*)d;
    if (!p || !n) return HIPDNN_PLUGIN_STATUS_BAD_PARAM;
    if (!p->finalized) { g_err = "not finalized"; return HIPDNN_PLUGIN_STATUS_NOT_INITIALIZED; }
    if (!ids) { *n = p->ns; return HIPDNN_PLUGIN_STATUS_SUCCESS; }
#ifdef SHORT_BUFFER_FAILS
    if (*n < p->ns) { g_err = "buffer too small"; return HIPDNN_PLUGIN_STATUS_BAD_PARAM; }
#endif
    size_t k = *n < p->ns ? *n : p->ns;
    memcpy(ids, p->sorted, k * sizeof(int64_t));
    *n = k;
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}

#ifdef WITH_CONFIG
P hipdnnHeuristicPolicyGetEngineConfig(hipdnnHeuristicPolicyDescriptor_t d, int64_t id, hipdnnPluginConstData_t* cfg) {
    (void)d; (void)id;
    if (!cfg) return HIPDNN_PLUGIN_STATUS_BAD_PARAM;
    return HIPDNN_PLUGIN_STATUS_NOT_APPLICABLE;
}
#endif

#ifdef CONFIG_JUNK
P hipdnnHeuristicPolicyGetEngineConfig(hipdnnHeuristicPolicyDescriptor_t d, int64_t id, hipdnnPluginConstData_t* cfg) {
    static const char junk[] = "not an EngineConfig";
    (void)d; (void)id;
    if (!cfg) return HIPDNN_PLUGIN_STATUS_BAD_PARAM;
    cfg->ptr = junk;
    cfg->size = sizeof junk;
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}
#endif

#ifdef WITH_TRACE
P hipdnnHeuristicPolicyGetTrace(hipdnnHeuristicPolicyDescriptor_t d, int64_t id, const char** trace) {
    (void)d; (void)id;
    if (!trace) return HIPDNN_PLUGIN_STATUS_BAD_PARAM;
    *trace = "{\"mini\": \"trace\"}";
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}
#endif
