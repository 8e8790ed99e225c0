/* hipdnnEnginePluginSetStream fails: hipdnnSetStream answers PLUGIN_ERROR with the plugin's text. */
#define OWN_SetStream
#include "mini_plugin.c"
P hipdnnEnginePluginSetStream(hipdnnEnginePluginHandle_t h, hipStream_t s)
{
    (void)h; (void)s;
    g_err = "mini: no such stream";
    return HIPDNN_PLUGIN_STATUS_INVALID_VALUE;
}
