/* Fault: for graphs the engine cannot run, GetApplicableEngineIds answers an id it never listed. */
#define OVERRIDE_hipdnnEnginePluginGetApplicableEngineIds
#include "forward.h"
P hipdnnEnginePluginGetApplicableEngineIds(H h, const CD* g, int64_t* ids, uint32_t max, uint32_t* n)
{
    St st = REAL(hipdnnEnginePluginGetApplicableEngineIds)(h, g, ids, max, n);
    if (st == HIPDNN_PLUGIN_STATUS_SUCCESS && n && *n == 0 && ids && max >= 1) {
        ids[0] = 4242;
        *n = 1;
    }
    return st;
}
