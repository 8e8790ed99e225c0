/* Leaves out the required hipdnnEnginePluginSetStream: refused ("Failed to get symbol: ..."). */
#define OWN_SetStream
#include "mini_plugin.c"
