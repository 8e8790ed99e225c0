/* Fault: a plugin reporting API 1.2.0 that ignores the host pointer of a user-supplied runtime
 * pass-by-value scalar and uses the value the graph carries for it instead (none: 0.0).
 *
 * The rest is a correct 1.2.0 plugin built on the C sample (which implements 1.1.0 and declines
 * runtime graphs): every graph it is given has its is_runtime_pass_by_value flags cleared and a
 * 1.2.0 min_required_engine_api_version stamp lowered to 1.1.0 (a patched copy), so a runtime-with-
 * default scalar becomes the baked constant (override inert) and a user-supplied one an ordinary
 * one-element input read through the device-buffer array (a host pointer, which the C sample can
 * read) -- and missing from that array it gives INVALID_VALUE.  The fault is in execute: the
 * entries of user-supplied runtime uids are replaced by a pointer to 0.0f. */
#define OVERRIDE_hipdnnPluginGetApiVersion
#define OVERRIDE_hipdnnEnginePluginGetApplicableEngineIds
#define OVERRIDE_hipdnnEnginePluginGetEngineDetails
#define OVERRIDE_hipdnnEnginePluginGetWorkspaceSize
#define OVERRIDE_hipdnnEnginePluginCreateExecutionContext
#define OVERRIDE_hipdnnEnginePluginExecuteOpGraph
#define OVERRIDE_hipdnnEnginePluginExecuteOpGraphWithOverrides
#include <pthread.h>
#include <stdint.h>
#include "forward.h"

P hipdnnPluginGetApiVersion(const char** v)
{
    if (!v) return HIPDNN_PLUGIN_STATUS_BAD_PARAM;
    *v = "1.2.0";
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}

/* ---- a bounds-checked walk over Graph.tensors (slots: graph.fbs / tensor_attributes.fbs) */
enum { GRAPH_TENSORS = 4, GRAPH_MIN_API = 8, T_UID = 0, T_VALUE_TYPE = 6, T_RUNTIME = 8 };
#define MAXRT 8
typedef struct { int n; int64_t uid[MAXRT]; } RtUids;

static int rd(const unsigned char* b, size_t n, size_t off, void* v, size_t k)
{
    if (off > n || k > n - off) return 0;
    memcpy(v, b + off, k);
    return 1;
}
static size_t field(const unsigned char* b, size_t n, size_t t, unsigned slot)
{
    int32_t so;
    uint16_t vsz, fo;
    if (!rd(b, n, t, &so, 4)) return 0;
    long long vt = (long long)t - so;
    if (vt < 0 || !rd(b, n, (size_t)vt, &vsz, 2) || 4u + 2u * slot + 2u > vsz) return 0;
    if (!rd(b, n, (size_t)vt + 4 + 2 * slot, &fo, 2) || !fo || (size_t)fo >= n - t) return 0;
    return t + fo;
}
/* A patched copy of the graph (or NULL: nothing to patch); user-supplied runtime uids in *rt. */
static unsigned char* patch_graph(const CD* g, RtUids* rt)
{
    rt->n = 0;
    if (!g || !g->ptr || g->size < 8) return NULL;
    size_t n = g->size;
    unsigned char* b = malloc(n);
    memcpy(b, g->ptr, n);
    uint32_t root, vec, len, u;
    int patched = 0;
    size_t f;
    if (!rd(b, n, 0, &root, 4) || !(f = field(b, n, root, GRAPH_TENSORS)) || !rd(b, n, f, &u, 4)) goto none;
    vec = (uint32_t)f + u;
    if (!rd(b, n, vec, &len, 4)) goto none;
    for (uint32_t i = 0; i < len && i < 4096; i++) {
        size_t e = vec + 4 + 4 * (size_t)i, fr, fu, fv;
        uint8_t flag = 0, vt = 0;
        int64_t uid = 0;
        if (!rd(b, n, e, &u, 4)) goto none;
        size_t t = e + u;
        if (!(fr = field(b, n, t, T_RUNTIME)) || !rd(b, n, fr, &flag, 1) || !flag) continue;
        if ((fu = field(b, n, t, T_UID))) rd(b, n, fu, &uid, 8);
        if ((fv = field(b, n, t, T_VALUE_TYPE))) rd(b, n, fv, &vt, 1);
        b[fr] = 0;
        patched = 1;
        if (!vt && rt->n < MAXRT) rt->uid[rt->n++] = uid;
    }
    if ((f = field(b, n, root, GRAPH_MIN_API))) {
        uint32_t ver[3];
        if (rd(b, n, f, ver, 12) && ver[0] == 1 && ver[1] == 2) {
            ver[1] = 1; ver[2] = 0;
            memcpy(b + f, ver, 12);
            patched = 1;
        }
    }
    if (patched) return b;
none:
    free(b);
    rt->n = 0;
    return NULL;
}
#define WITH_PATCHED(g, call)                                                                        \
    __extension__({                                                                                  \
        RtUids _rt;                                                                                  \
        unsigned char* _b = patch_graph(g, &_rt);                                                    \
        CD _pg = {_b, _b ? (g)->size : 0};                                                           \
        const CD* pg = _b ? &_pg : (g);                                                              \
        St _st = call;                                                                               \
        free(_b);                                                                                    \
        _st;                                                                                         \
    })

P hipdnnEnginePluginGetApplicableEngineIds(H h, const CD* g, int64_t* ids, uint32_t max, uint32_t* num)
{
    return WITH_PATCHED(g, REAL(hipdnnEnginePluginGetApplicableEngineIds)(h, pg, ids, max, num));
}
P hipdnnEnginePluginGetEngineDetails(H h, int64_t id, const CD* g, CD* d)
{
    return WITH_PATCHED(g, REAL(hipdnnEnginePluginGetEngineDetails)(h, id, pg, d));
}
P hipdnnEnginePluginGetWorkspaceSize(H h, const CD* cfg, const CD* g, size_t* ws)
{
    return WITH_PATCHED(g, REAL(hipdnnEnginePluginGetWorkspaceSize)(h, cfg, pg, ws));
}

/* ---- contexts with user-supplied runtime uids */
#define MAXCTX 64
static pthread_mutex_t g_mx = PTHREAD_MUTEX_INITIALIZER;
static struct { Ctx ctx; RtUids rt; } g_ctx[MAXCTX];

P hipdnnEnginePluginCreateExecutionContext(H h, const CD* cfg, const CD* g, Ctx* out)
{
    RtUids rt;
    unsigned char* b = patch_graph(g, &rt);
    CD pg = {b, b ? g->size : 0};
    St st = REAL(hipdnnEnginePluginCreateExecutionContext)(h, cfg, b ? &pg : g, out);
    free(b);
    if (st == HIPDNN_PLUGIN_STATUS_SUCCESS && out && rt.n) {
        pthread_mutex_lock(&g_mx);
        for (int i = 0; i < MAXCTX; i++)
            if (!g_ctx[i].ctx || g_ctx[i].ctx == *out) { g_ctx[i].ctx = *out; g_ctx[i].rt = rt; break; }
        pthread_mutex_unlock(&g_mx);
    }
    return st;
}

static const float g_default = 0.0f;
/* The fault: entries of user-supplied runtime uids point at the "default" instead of the host value. */
static DB* rebind(Ctx c, const DB* b, uint32_t n)
{
    RtUids rt = {0};
    pthread_mutex_lock(&g_mx);
    for (int i = 0; i < MAXCTX; i++)
        if (c && g_ctx[i].ctx == c) rt = g_ctx[i].rt;
    pthread_mutex_unlock(&g_mx);
    if (!rt.n || !b || !n) return NULL;
    DB* nb = malloc(n * sizeof *nb);
    memcpy(nb, b, n * sizeof *nb);
    for (uint32_t k = 0; k < n; k++)
        for (int i = 0; i < rt.n; i++)
            if (nb[k].uid == rt.uid[i]) nb[k].ptr = (void*)&g_default;
    return nb;
}
P hipdnnEnginePluginExecuteOpGraph(H h, Ctx c, void* ws, const DB* b, uint32_t n)
{
    DB* nb = rebind(c, b, n);
    St st = REAL(hipdnnEnginePluginExecuteOpGraph)(h, c, ws, nb ? nb : b, n);
    free(nb);
    return st;
}
P hipdnnEnginePluginExecuteOpGraphWithOverrides(H h, Ctx c, void* ws, const DB* b, uint32_t n, uint32_t no,
                                                const int64_t* u, const uint32_t* l, const int64_t* const* sh,
                                                const int64_t* const* st_)
{
    DB* nb = rebind(c, b, n);
    St st = REAL(hipdnnEnginePluginExecuteOpGraphWithOverrides)(h, c, ws, nb ? nb : b, n, no, u, l, sh, st_);
    free(nb);
    return st;
}
