/* Fault: ExecuteOpGraph gets the first element of the last buffer (an output) wrong by 1.0. */
#define OVERRIDE_hipdnnEnginePluginExecuteOpGraph
#include "forward.h"
P hipdnnEnginePluginExecuteOpGraph(H h, Ctx c, void* ws, const DB* b, uint32_t n)
{
    St st = REAL(hipdnnEnginePluginExecuteOpGraph)(h, c, ws, b, n);
    if (st == HIPDNN_PLUGIN_STATUS_SUCCESS && n) ((float*)b[n - 1].ptr)[0] += 1.0f;
    return st;
}
