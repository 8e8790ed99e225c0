/* Records the stream it is given; ExecuteOpGraph writes {stream, number of SetStream calls} into the
 * first buffer (two int64), so a test can see what hipdnnSetStream forwarded. */
#define OWN_SetStream
#define OWN_ExecuteOpGraph
#include "mini_plugin.c"
static hipStream_t g_stream;
static int64_t g_calls;
P hipdnnEnginePluginSetStream(hipdnnEnginePluginHandle_t h, hipStream_t s) { (void)h; g_stream = s; g_calls++; return HIPDNN_PLUGIN_STATUS_SUCCESS; }
P hipdnnEnginePluginExecuteOpGraph(hipdnnEnginePluginHandle_t h, hipdnnEnginePluginExecutionContext_t x, void* ws,
                                   const hipdnnPluginDeviceBuffer_t* b, uint32_t n)
{
    (void)h; (void)x; (void)ws;
    if(n < 1 || !b[0].ptr) return HIPDNN_PLUGIN_STATUS_BAD_PARAM;
    ((int64_t*)b[0].ptr)[0] = (int64_t)(intptr_t)g_stream;
    ((int64_t*)b[0].ptr)[1] = g_calls;
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}
