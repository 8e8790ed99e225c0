/* Fault: GetApplicableEngineIds dereferences a NULL op_graph (SIGSEGV). */
#define OVERRIDE_hipdnnEnginePluginGetApplicableEngineIds
#include "forward.h"
P hipdnnEnginePluginGetApplicableEngineIds(H h, const CD* g, int64_t* ids, uint32_t max, uint32_t* n)
{
    volatile size_t size = g->size; /* no NULL check */
    (void)size;
    return REAL(hipdnnEnginePluginGetApplicableEngineIds)(h, g, ids, max, n);
}
