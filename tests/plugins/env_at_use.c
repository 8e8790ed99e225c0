/* Environment variables set with setenv() after the library started, and the plugin log level.
 * Every scenario first makes a hipDNN call that starts the library, so a value that
 * only Python's start-up copy of the environment held would be missed.
 *
 *   env_at_use dirs <dirA> <dirB>      HIPDNN_PLUGIN_DIR read at each load (EAGER unload between):
 *                                      prints "paths <label> <n>" then "path <p>" per loaded file
 *   env_at_use heur <dir> <graphdir>   HIPDNN_LOG_GRAPH_DIR at graph finalize, HIPDNN_HEUR_FALLBACK_
 *                                      ENGINE_ORDER and HIPDNN_HEUR_POLICY_ORDER at heuristic
 *                                      finalize: prints "heur <label> <status> <n> <ids...>"
 *   env_at_use log <file>              HIPDNN_LOG_LEVEL/HIPDNN_LOG_FILE set after the process started
 *                                      but before the first call that starts the library (logger
 *                                      initialisation) take effect; changing them later does not
 *   env_at_use levels <dir>            hipdnnPluginSetLogLevel at load and on every level change:
 *                                      prints "msg <phase> <severity> <message>" per message a sync
 *                                      user callback received
 * Exit 1 (with a message on stderr) when a call that must succeed fails. */
#define _POSIX_C_SOURCE 200809L
#include "../c_testlib.h"
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef hipdnnBackendDescriptor_t D;

static void start_library(void)
{
    hipdnnSeverity_t level;
    CHECK(hipdnnBackendGetGlobalLogLevel_ext(&level)); /* the embedded Python starts here */
}

static void print_paths(hipdnnHandle_t h, const char* label)
{
    size_t n = 0, maxlen = 0;
    CHECK(hipdnnGetLoadedEnginePluginPaths_ext(h, &n, NULL, &maxlen));
    printf("paths %s %zu\n", label, n);
    if(n == 0) return;
    char** bufs = calloc(n, sizeof *bufs);
    for(size_t i = 0; i < n; i++) bufs[i] = calloc(maxlen, 1);
    CHECK(hipdnnGetLoadedEnginePluginPaths_ext(h, &n, bufs, &maxlen));
    for(size_t i = 0; i < n; i++) { printf("path %s\n", bufs[i]); free(bufs[i]); }
    free(bufs);
}

static int dirs(const char* a, const char* b)
{
    unsetenv("HIPDNN_PLUGIN_DIR");
    start_library();
    CHECK(hipdnnSetPluginUnloadMode_ext(HIPDNN_PLUGIN_UNLOAD_EAGER));
    const char* dirs_[2] = {a, b};
    const char* labels[2] = {"A", "B"};
    for(int i = 0; i < 2; i++) {
        hipdnnHandle_t h;
        setenv("HIPDNN_PLUGIN_DIR", dirs_[i], 1);
        CHECK(hipdnnCreate(&h));
        print_paths(h, labels[i]);
        CHECK(hipdnnDestroy(h));
    }
    return 0;
}

static D tensor(int64_t uid)
{
    int64_t dims[2] = {1, 8}, strides[2] = {8, 1};
    return hdt_tensor(uid, NULL, HIPDNN_DATA_FLOAT, 2, dims, strides, false);
}

/* A finalized graph y = x + b on handle h. */
static D add_graph(hipdnnHandle_t h)
{
    D x = tensor(1), b = tensor(2), y = tensor(3), op, g;
    hipdnnPointwiseMode_t pm = HIPDNN_POINTWISE_ADD;
    hipdnnDataType_t ct = HIPDNN_DATA_FLOAT;
    CHECK(hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, &op));
    CHECK(hipdnnBackendSetAttribute(op, HIPDNN_ATTR_OPERATION_POINTWISE_IN_0_EXT, HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x));
    CHECK(hipdnnBackendSetAttribute(op, HIPDNN_ATTR_OPERATION_POINTWISE_IN_1_EXT, HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b));
    CHECK(hipdnnBackendSetAttribute(op, HIPDNN_ATTR_OPERATION_POINTWISE_OUT_0_EXT, HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y));
    CHECK(hipdnnBackendSetAttribute(op, HIPDNN_ATTR_POINTWISE_MODE, HIPDNN_TYPE_POINTWISE_MODE, 1, &pm));
    CHECK(hipdnnBackendSetAttribute(op, HIPDNN_ATTR_POINTWISE_MATH_PREC, HIPDNN_TYPE_DATA_TYPE, 1, &ct));
    CHECK(hipdnnBackendFinalize(op));
    CHECK(hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &g));
    CHECK(hipdnnBackendSetAttribute(g, HIPDNN_ATTR_OPERATIONGRAPH_OPS, HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, &op));
    CHECK(hipdnnBackendSetAttribute(g, HIPDNN_ATTR_OPERATIONGRAPH_HANDLE, HIPDNN_TYPE_HANDLE, 1, &h));
    CHECK(hipdnnBackendFinalize(g));
    D all[4] = {x, b, y, op};
    for(int i = 0; i < 4; i++) CHECK(hipdnnBackendDestroyDescriptor(all[i]));
    return g;
}

/* Finalize an ENGINEHEUR on g; print the status and the engine ids of its results. */
static void heuristic(D g, const char* label)
{
    D heur;
    hipdnnBackendHeurMode_t hm = HIPDNN_HEUR_MODE_FALLBACK;
    CHECK(hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur));
    CHECK(hipdnnBackendSetAttribute(heur, HIPDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g));
    CHECK(hipdnnBackendSetAttribute(heur, HIPDNN_ATTR_ENGINEHEUR_MODE, HIPDNN_TYPE_HEUR_MODE, 1, &hm));
    hipdnnStatus_t st = hipdnnBackendFinalize(heur);
    printf("heur %s %d", label, (int)st);
    if(st == HIPDNN_STATUS_SUCCESS) {
        int64_t count = 0, n = 0;
        D cfgs[8];
        CHECK(hipdnnBackendGetAttribute(heur, HIPDNN_ATTR_ENGINEHEUR_RESULTS, HIPDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, NULL));
        if(count > 8) count = 8;
        for(int64_t i = 0; i < count; i++) CHECK(hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfgs[i]));
        if(count) CHECK(hipdnnBackendGetAttribute(heur, HIPDNN_ATTR_ENGINEHEUR_RESULTS, HIPDNN_TYPE_BACKEND_DESCRIPTOR, count, &n, cfgs));
        printf(" %lld", (long long)n);
        for(int64_t i = 0; i < n; i++) {
            D eng;
            int64_t eid = 0;
            CHECK(hipdnnBackendFinalize(cfgs[i]));
            CHECK(hipdnnBackendGetAttribute(cfgs[i], HIPDNN_ATTR_ENGINECFG_ENGINE, HIPDNN_TYPE_BACKEND_DESCRIPTOR, 1, NULL, &eng));
            CHECK(hipdnnBackendGetAttribute(eng, HIPDNN_ATTR_ENGINE_GLOBAL_INDEX, HIPDNN_TYPE_INT64, 1, NULL, &eid));
            printf(" %lld", (long long)eid);
            CHECK(hipdnnBackendDestroyDescriptor(eng));
        }
        for(int64_t i = 0; i < count; i++) CHECK(hipdnnBackendDestroyDescriptor(cfgs[i]));
    }
    printf("\n");
    CHECK(hipdnnBackendDestroyDescriptor(heur));
}

static int heur(const char* dir, const char* graphdir)
{
    unsetenv("HIPDNN_LOG_GRAPH_DIR");
    unsetenv("HIPDNN_HEUR_FALLBACK_ENGINE_ORDER");
    unsetenv("HIPDNN_HEUR_POLICY_ORDER");
    start_library();
    hipdnnHandle_t h;
    setenv("HIPDNN_PLUGIN_DIR", dir, 1);
    CHECK(hipdnnCreate(&h));
    D g1 = add_graph(h);                         /* no graph dir yet: nothing written */
    setenv("HIPDNN_LOG_GRAPH_DIR", graphdir, 1);
    D g2 = add_graph(h);                         /* written */
    unsetenv("HIPDNN_LOG_GRAPH_DIR");
    D g3 = add_graph(h);                         /* not written */
    heuristic(g2, "plain");
    setenv("HIPDNN_HEUR_FALLBACK_ENGINE_ORDER", "MINI_q", 1);
    heuristic(g2, "fallback_q");
    setenv("HIPDNN_HEUR_FALLBACK_ENGINE_ORDER", "MINI_q,MINI_p", 1);
    heuristic(g2, "fallback_qp");
    unsetenv("HIPDNN_HEUR_FALLBACK_ENGINE_ORDER");
    setenv("HIPDNN_HEUR_POLICY_ORDER", "SelectionHeuristic::Config", 1);
    heuristic(g2, "policy_config");
    unsetenv("HIPDNN_HEUR_POLICY_ORDER");
    heuristic(g2, "plain_again");
    CHECK(hipdnnBackendDestroyDescriptor(g1));
    CHECK(hipdnnBackendDestroyDescriptor(g2));
    CHECK(hipdnnBackendDestroyDescriptor(g3));
    CHECK(hipdnnDestroy(h));
    return 0;
}

static int logenv(const char* file)
{
    (void)hipdnnGetErrorString(HIPDNN_STATUS_SUCCESS); /* answered in C: the library is not started */
    setenv("HIPDNN_LOG_LEVEL", "info", 1);
    setenv("HIPDNN_LOG_FILE", file, 1);
    hipdnnHandle_t h;
    CHECK(hipdnnCreate(&h));                           /* starts the library: the logger reads both */
    setenv("HIPDNN_LOG_LEVEL", "off", 1);              /* read once, as in hipDNN: no effect */
    CHECK(hipdnnDestroy(h));
    hipdnnSeverity_t level;
    CHECK(hipdnnBackendGetGlobalLogLevel_ext(&level));
    printf("level %d\n", (int)level);
    return 0;
}

static const char* g_phase = "none";

static void record(hipdnnUserLogCallbackHandle_t user, hipdnnSeverity_t sev, const char* msg)
{
    (void)user;
    /* one line per message: only the first line of a multi-line message */
    printf("msg %s %d %.*s\n", g_phase, (int)sev, (int)strcspn(msg, "\n"), msg);
}

static int levels(const char* dir)
{
    static int user;
    start_library();
    CHECK(hipdnnSetUserLogCallback_ext(record, HIPDNN_SEV_INFO, HIPDNN_LOG_CALLBACK_SYNC, &user));
    setenv("HIPDNN_PLUGIN_DIR", dir, 1);
    /* OFF at load: the plugins are told OFF (4) and stay quiet */
    CHECK(hipdnnBackendSetGlobalLogLevel_ext(HIPDNN_SEV_OFF));
    CHECK(hipdnnSetPluginUnloadMode_ext(HIPDNN_PLUGIN_UNLOAD_EAGER));
    hipdnnHandle_t h;
    g_phase = "load_off";
    CHECK(hipdnnCreate(&h));
    CHECK(hipdnnDestroy(h)); /* EAGER: unloaded */
    /* INFO at load */
    g_phase = "set_info";
    CHECK(hipdnnBackendSetGlobalLogLevel_ext(HIPDNN_SEV_INFO));
    g_phase = "load_info";
    CHECK(hipdnnCreate(&h));
    /* level changes while loaded */
    g_phase = "set_warn";
    CHECK(hipdnnBackendSetGlobalLogLevel_ext(HIPDNN_SEV_WARN));
    g_phase = "set_info_again";
    CHECK(hipdnnBackendSetGlobalLogLevel_ext(HIPDNN_SEV_INFO));
    g_phase = "set_off";
    CHECK(hipdnnBackendSetGlobalLogLevel_ext(HIPDNN_SEV_OFF));
    g_phase = "done";
    CHECK(hipdnnDestroy(h));
    CHECK(hipdnnSetUserLogCallback_ext(record, HIPDNN_SEV_OFF, HIPDNN_LOG_CALLBACK_SYNC, &user));
    printf("ok\n");
    return 0;
}

int main(int argc, char** argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if(argc == 4 && strcmp(argv[1], "dirs") == 0) return dirs(argv[2], argv[3]);
    if(argc == 4 && strcmp(argv[1], "heur") == 0) return heur(argv[2], argv[3]);
    if(argc == 3 && strcmp(argv[1], "levels") == 0) return levels(argv[2]);
    if(argc == 3 && strcmp(argv[1], "log") == 0) return logenv(argv[2]);
    fprintf(stderr, "usage: env_at_use dirs <dirA> <dirB> | heur <dir> <graphdir> | log <file> | levels <dir>\n");
    return 2;
}
