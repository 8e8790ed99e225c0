/* Declares the same engine id twice: refused ("Duplicate engine IDs found"). */
#define OWN_GetAllEngineIds
#include "mini_plugin.c"
P hipdnnEnginePluginGetAllEngineIds(int64_t* ids, uint32_t max, uint32_t* n)
{
    *n = 2;
    for(uint32_t i = 0; ids && i < max && i < 2; i++) ids[i] = engine_id();
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}
