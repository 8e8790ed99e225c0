/* GetEngineDetails succeeds with an empty answer: PLUGIN_ERROR at engine finalize. */
#define OWN_GetEngineDetails
#include "mini_plugin.c"
P hipdnnEnginePluginGetEngineDetails(hipdnnEnginePluginHandle_t h, int64_t id, const hipdnnPluginConstData_t* g,
                                     hipdnnPluginConstData_t* d)
{
    (void)h; (void)id; (void)g;
    d->ptr = NULL;
    d->size = 0;
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}
