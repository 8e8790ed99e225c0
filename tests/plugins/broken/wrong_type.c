/* Says it is a heuristic plugin: refused ("Wrong plugin type"). */
#define OWN_GetType
#include "mini_plugin.c"
P hipdnnPluginGetType(hipdnnPluginType_t* t) { *t = HIPDNN_PLUGIN_TYPE_HEURISTIC; return HIPDNN_PLUGIN_STATUS_SUCCESS; }
