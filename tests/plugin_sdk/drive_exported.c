/* Drives an exported Python engine plugin (.so) the way a hipDNN backend does and prints
 * key=value lines (compared by tests/plugin_sdk/test_plugin_sdk.py with the in-process run).
 * usage: drive_exported LIB GRAPH_FILE CONFIG_FILE N */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hipdnn_plugin_sdk/EnginePluginApi.h"

#define SYM(T, n) T n = (T)dlsym(lib, #n); if (!n) { printf("missing=%s\n", #n); return 2; }
typedef hipdnnPluginStatus_t (*S_str)(const char**);
typedef hipdnnPluginStatus_t (*S_type)(hipdnnPluginType_t*);
typedef void (*S_err)(const char**);
typedef hipdnnPluginStatus_t (*S_all)(int64_t*, uint32_t, uint32_t*);
typedef hipdnnPluginStatus_t (*S_create)(hipdnnEnginePluginHandle_t*);
typedef hipdnnPluginStatus_t (*S_destroy)(hipdnnEnginePluginHandle_t);
typedef hipdnnPluginStatus_t (*S_app)(hipdnnEnginePluginHandle_t, const hipdnnPluginConstData_t*, int64_t*, uint32_t, uint32_t*);
typedef hipdnnPluginStatus_t (*S_det)(hipdnnEnginePluginHandle_t, int64_t, const hipdnnPluginConstData_t*, hipdnnPluginConstData_t*);
typedef hipdnnPluginStatus_t (*S_ddet)(hipdnnEnginePluginHandle_t, hipdnnPluginConstData_t*);
typedef hipdnnPluginStatus_t (*S_ws)(hipdnnEnginePluginHandle_t, const hipdnnPluginConstData_t*, const hipdnnPluginConstData_t*, size_t*);
typedef hipdnnPluginStatus_t (*S_ctx)(hipdnnEnginePluginHandle_t, const hipdnnPluginConstData_t*, const hipdnnPluginConstData_t*, hipdnnEnginePluginExecutionContext_t*);
typedef hipdnnPluginStatus_t (*S_dctx)(hipdnnEnginePluginHandle_t, hipdnnEnginePluginExecutionContext_t);
typedef hipdnnPluginStatus_t (*S_wsc)(hipdnnEnginePluginHandle_t, hipdnnEnginePluginExecutionContext_t, size_t*);
typedef hipdnnPluginStatus_t (*S_exec)(hipdnnEnginePluginHandle_t, hipdnnEnginePluginExecutionContext_t, void*, const hipdnnPluginDeviceBuffer_t*, uint32_t);

static void* slurp(const char* p, size_t* n)
{
    FILE* f = fopen(p, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END); *n = (size_t)ftell(f); fseek(f, 0, SEEK_SET);
    void* b = malloc(*n ? *n : 1);
    if (fread(b, 1, *n, f) != *n) { fclose(f); free(b); return NULL; }
    fclose(f);
    return b;
}

int main(int argc, char** argv)
{
    if (argc < 5) return 2;
    void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) { printf("dlopen=%s\n", dlerror()); return 2; }
    SYM(S_str, hipdnnPluginGetName) SYM(S_str, hipdnnPluginGetVersion) SYM(S_str, hipdnnPluginGetApiVersion)
    SYM(S_type, hipdnnPluginGetType) SYM(S_err, hipdnnPluginGetLastErrorString)
    SYM(S_all, hipdnnEnginePluginGetAllEngineIds) SYM(S_create, hipdnnEnginePluginCreate)
    SYM(S_destroy, hipdnnEnginePluginDestroy) SYM(S_app, hipdnnEnginePluginGetApplicableEngineIds)
    SYM(S_det, hipdnnEnginePluginGetEngineDetails) SYM(S_ddet, hipdnnEnginePluginDestroyEngineDetails)
    SYM(S_ws, hipdnnEnginePluginGetWorkspaceSize) SYM(S_ctx, hipdnnEnginePluginCreateExecutionContext)
    SYM(S_dctx, hipdnnEnginePluginDestroyExecutionContext)
    SYM(S_wsc, hipdnnEnginePluginGetWorkspaceSizeFromExecutionContext)
    SYM(S_exec, hipdnnEnginePluginExecuteOpGraph)
    const char* s = NULL;
    const char* e = NULL;
    int st;
    st = hipdnnPluginGetName(&s); printf("name=%d:%s\n", st, s);
    st = hipdnnPluginGetVersion(&s); printf("version=%d:%s\n", st, s);
    st = hipdnnPluginGetApiVersion(&s); printf("api_version=%d:%s\n", st, s);
    hipdnnPluginType_t t = HIPDNN_PLUGIN_TYPE_UNSPECIFIED;
    st = hipdnnPluginGetType(&t); printf("type=%d:%d\n", st, (int)t);
    uint32_t n = 0, m = 0;
    st = hipdnnEnginePluginGetAllEngineIds(NULL, 0, &n); printf("all_count=%d:%u\n", st, n);
    int64_t ids[16] = {0}, sentinel = 0x5a5a;
    ids[0] = sentinel;
    st = hipdnnEnginePluginGetAllEngineIds(ids, 0, &m); printf("all_max0=%d:%u:%d\n", st, m, ids[0] == sentinel);
    st = hipdnnEnginePluginGetAllEngineIds(ids, n, &m); printf("all_ids=%d:%u", st, m);
    for (uint32_t i = 0; i < m && i < 16; i++) printf(":%lld", (long long)ids[i]);
    printf("\n");
    hipdnnEnginePluginHandle_t h = NULL;
    st = hipdnnEnginePluginCreate(&h); printf("create=%d:%d\n", st, h != NULL);
    size_t gsz = 0, csz = 0;
    void* gbuf = slurp(argv[2], &gsz);
    void* cbuf = slurp(argv[3], &csz);
    if (!gbuf || !cbuf) { printf("read=failed\n"); return 2; }
    hipdnnPluginConstData_t graph = {gbuf, gsz}, cfg = {cbuf, csz};
    int64_t app[16] = {0};
    uint32_t na = 0;
    st = hipdnnEnginePluginGetApplicableEngineIds(h, &graph, app, 16, &na); printf("applicable=%d:%u", st, na);
    for (uint32_t i = 0; i < na && i < 16; i++) printf(":%lld", (long long)app[i]);
    printf("\n");
    hipdnnPluginConstData_t det = {NULL, 0};
    st = hipdnnEnginePluginGetEngineDetails(h, ids[0], &graph, &det);
    printf("details=%d:", st);
    for (size_t i = 0; i < det.size; i++) printf("%02x", ((const unsigned char*)det.ptr)[i]);
    printf("\n");
    st = hipdnnEnginePluginDestroyEngineDetails(h, &det); printf("destroy_details=%d:%d\n", st, det.ptr == NULL);
    size_t ws = 99;
    st = hipdnnEnginePluginGetWorkspaceSize(h, &cfg, &graph, &ws); printf("workspace=%d:%zu\n", st, ws);
    hipdnnEnginePluginExecutionContext_t ctx = NULL;
    st = hipdnnEnginePluginCreateExecutionContext(h, &cfg, &graph, &ctx); printf("context=%d:%d\n", st, ctx != NULL);
    ws = 99;
    st = hipdnnEnginePluginGetWorkspaceSizeFromExecutionContext(h, ctx, &ws); printf("workspace_ctx=%d:%zu\n", st, ws);
    int N = atoi(argv[4]);
    float* x = malloc(sizeof(float) * N); float* b = malloc(sizeof(float) * N); float* y = malloc(sizeof(float) * N);
    for (int i = 0; i < N; i++) { x[i] = (float)i - 2.5f; b[i] = 0.5f * (float)i + 1.0f; y[i] = -99.0f; }
    hipdnnPluginDeviceBuffer_t bufs[3] = {{1, x}, {2, b}, {3, y}};
    st = hipdnnEnginePluginExecuteOpGraph(h, ctx, NULL, bufs, 3); printf("execute=%d", st);
    for (int i = 0; i < N; i++) printf(":%.6g", y[i]);
    printf("\n");
    st = hipdnnEnginePluginExecuteOpGraph(h, ctx, NULL, bufs, 2); hipdnnPluginGetLastErrorString(&e);
    printf("execute_missing=%d:%s\n", st, e);
    st = hipdnnEnginePluginDestroyExecutionContext(h, ctx); printf("destroy_context=%d\n", st);
    /* NULL arguments: an error status, never a crash */
    st = hipdnnPluginGetName(NULL); hipdnnPluginGetLastErrorString(&e); printf("null_name=%d:%s\n", st, e);
    st = hipdnnEnginePluginGetAllEngineIds(NULL, 0, NULL); printf("null_num=%d\n", st);
    st = hipdnnEnginePluginGetAllEngineIds(NULL, 4, &m); printf("null_ids=%d\n", st);
    st = hipdnnEnginePluginCreate(NULL); printf("null_create=%d\n", st);
    st = hipdnnEnginePluginGetApplicableEngineIds(h, NULL, app, 16, &na); printf("null_graph=%d\n", st);
    hipdnnPluginConstData_t junk = {"garbage!garbage!", 16};
    st = hipdnnEnginePluginGetApplicableEngineIds(h, &junk, app, 16, &na); printf("junk_graph=%d\n", st);
    st = hipdnnEnginePluginGetWorkspaceSize(h, &cfg, &graph, NULL); printf("null_ws=%d\n", st);
    st = hipdnnEnginePluginExecuteOpGraph(h, NULL, NULL, bufs, 3); printf("null_ctx=%d\n", st);
    st = hipdnnEnginePluginDestroy(h); printf("destroy=%d\n", st);
    st = hipdnnEnginePluginDestroy(h); printf("destroy_again=%d\n", st);
    hipdnnPluginGetLastErrorString(NULL);
    free(x); free(b); free(y); free(gbuf); free(cbuf);
    return 0;
}
