/* Fault: the last-error string is always empty, even after a failure. */
#define OVERRIDE_hipdnnPluginGetLastErrorString
#include "forward.h"
HIPDNN_PLUGIN_EXPORT void hipdnnPluginGetLastErrorString(const char** e)
{
    if (e) *e = "";
}
