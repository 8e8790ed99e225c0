/* Reports more applicable engines than the buffer holds (writes none past it): PLUGIN_ERROR. */
#define OWN_GetApplicableEngineIds
#include "mini_plugin.c"
P hipdnnEnginePluginGetApplicableEngineIds(hipdnnEnginePluginHandle_t h, const hipdnnPluginConstData_t* g,
                                           int64_t* ids, uint32_t max, uint32_t* n)
{
    (void)h; (void)g;
    for(uint32_t i = 0; i < max; i++) ids[i] = engine_id();
    *n = max + 1;
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}
