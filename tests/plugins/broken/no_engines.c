/* Declares no engine: refused ("No engines found in the plugin"). */
#define OWN_GetAllEngineIds
#include "mini_plugin.c"
P hipdnnEnginePluginGetAllEngineIds(int64_t* ids, uint32_t max, uint32_t* n) { (void)ids; (void)max; *n = 0; return HIPDNN_PLUGIN_STATUS_SUCCESS; }
