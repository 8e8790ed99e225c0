/* Calls an engine it never declared applicable: PLUGIN_ERROR at heuristic finalize. */
#define OWN_GetApplicableEngineIds
#include "mini_plugin.c"
P hipdnnEnginePluginGetApplicableEngineIds(hipdnnEnginePluginHandle_t h, const hipdnnPluginConstData_t* g,
                                           int64_t* ids, uint32_t max, uint32_t* n)
{
    (void)h; (void)g; (void)max;
    ids[0] = 12345;
    *n = 1;
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}
