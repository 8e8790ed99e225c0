/* Not a fault: a plugin whose engine applies only to graphs whose name contains "USERONLY" (none
 * of the conformance corpus), forwarding everything else to the C sample plugin.  Without --graph
 * the suite can run no graph on it: the verdict must be INCONCLUSIVE, not CONFORMANT. */
#define _GNU_SOURCE
#define OVERRIDE_hipdnnEnginePluginGetApplicableEngineIds
#include <string.h>
#include "../broken/forward.h"
P hipdnnEnginePluginGetApplicableEngineIds(H h, const CD* g, int64_t* ids, uint32_t max, uint32_t* n)
{
    St st = REAL(hipdnnEnginePluginGetApplicableEngineIds)(h, g, ids, max, n);
    if (st == HIPDNN_PLUGIN_STATUS_SUCCESS && n && g && g->ptr &&
        !memmem(g->ptr, g->size, "USERONLY", 8))
        *n = 0;
    return st;
}
