/* Fault: the required hipdnnEnginePluginSetStream is not exported. */
#define OMIT_hipdnnEnginePluginSetStream
#include "forward.h"
