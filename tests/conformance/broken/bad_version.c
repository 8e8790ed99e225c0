/* Fault: the API version string is not MAJOR.MINOR.PATCH. */
#define OVERRIDE_hipdnnPluginGetApiVersion
#include "forward.h"
P hipdnnPluginGetApiVersion(const char** v)
{
    if (!v) return HIPDNN_PLUGIN_STATUS_BAD_PARAM;
    *v = "1.1";
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}
