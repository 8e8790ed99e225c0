/* hipdnnEnginePluginCreate succeeds with a NULL handle: the plugin stays unused for that handle. */
#define OWN_Create
#include "mini_plugin.c"
P hipdnnEnginePluginCreate(hipdnnEnginePluginHandle_t* h) { *h = NULL; return HIPDNN_PLUGIN_STATUS_SUCCESS; }
