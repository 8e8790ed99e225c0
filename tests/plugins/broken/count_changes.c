/* Answers 2 engines to the count query and 1 to the fetch: refused. */
#define OWN_GetAllEngineIds
#include "mini_plugin.c"
P hipdnnEnginePluginGetAllEngineIds(int64_t* ids, uint32_t max, uint32_t* n)
{
    *n = ids ? 1 : 2;
    if(ids && max >= 1) ids[0] = engine_id();
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}
