/* Fault: every hipdnnEnginePluginCreate leaks 16 KiB (touched, so it counts in RSS). */
#define OVERRIDE_hipdnnEnginePluginCreate
#include "forward.h"
void* volatile g_lost;
P hipdnnEnginePluginCreate(H* h)
{
    St st = REAL(hipdnnEnginePluginCreate)(h);
    if (st == HIPDNN_PLUGIN_STATUS_SUCCESS) {
        void** lost = malloc(16384);
        if (lost) {
            memset(lost, 0x5a, 16384);
            *lost = g_lost; /* kept reachable through a global, so the compiler cannot drop it */
            g_lost = lost;
        }
    }
    return st;
}
