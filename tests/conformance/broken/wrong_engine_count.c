/* Fault: the size query reports 2 engines, the fill call then delivers 1. */
#define OVERRIDE_hipdnnEnginePluginGetAllEngineIds
#include "forward.h"
P hipdnnEnginePluginGetAllEngineIds(int64_t* ids, uint32_t max, uint32_t* n)
{
    St st = REAL(hipdnnEnginePluginGetAllEngineIds)(ids, max, n);
    if (st == HIPDNN_PLUGIN_STATUS_SUCCESS && !ids && n) *n += 1;
    return st;
}
