/* Fault: ExecuteOpGraph is not reentrant: a call overlapping another one fails. */
#define OVERRIDE_hipdnnEnginePluginExecuteOpGraph
#include <unistd.h>
#include "forward.h"
static volatile int g_busy;
P hipdnnEnginePluginExecuteOpGraph(H h, Ctx c, void* ws, const DB* b, uint32_t n)
{
    if (__atomic_exchange_n(&g_busy, 1, __ATOMIC_SEQ_CST)) return HIPDNN_PLUGIN_STATUS_INTERNAL_ERROR;
    usleep(2000);
    St st = REAL(hipdnnEnginePluginExecuteOpGraph)(h, c, ws, b, n);
    __atomic_store_n(&g_busy, 0, __ATOMIC_SEQ_CST);
    return st;
}
