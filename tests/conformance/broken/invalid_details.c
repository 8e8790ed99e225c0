/* Fault: GetEngineDetails returns bytes that are not an EngineDetails FlatBuffer. */
#define OVERRIDE_hipdnnEnginePluginGetEngineDetails
#define OVERRIDE_hipdnnEnginePluginDestroyEngineDetails
#include "forward.h"
static const unsigned char k_junk[16] = {0xff, 0xff, 0xff, 0x7f, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
P hipdnnEnginePluginGetEngineDetails(H h, int64_t id, const CD* g, CD* d)
{
    CD real = {NULL, 0};
    St st = REAL(hipdnnEnginePluginGetEngineDetails)(h, id, g, d ? &real : NULL);
    if (st) return st;
    REAL(hipdnnEnginePluginDestroyEngineDetails)(h, &real);
    d->ptr = k_junk;
    d->size = sizeof k_junk;
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}
P hipdnnEnginePluginDestroyEngineDetails(H h, CD* d)
{
    if (d && d->ptr == k_junk) { d->ptr = NULL; d->size = 0; return HIPDNN_PLUGIN_STATUS_SUCCESS; }
    return REAL(hipdnnEnginePluginDestroyEngineDetails)(h, d);
}
