/* Answers GetEngineDetails with the bytes of the file named by MINI_DETAILS_FILE (read at each call),
 * so a test can hand the host any EngineDetails FlatBuffer (knobs, notes); the config it gets at
 * GetWorkspaceSize is written to MINI_CONFIG_FILE when that is set. */
#define _POSIX_C_SOURCE 200809L
#define OWN_GetEngineDetails
#define OWN_DestroyEngineDetails
#define OWN_GetWorkspaceSize
#include "mini_plugin.c"
#include <stdio.h>
#include <stdlib.h>
P hipdnnEnginePluginGetEngineDetails(hipdnnEnginePluginHandle_t h, int64_t id, const hipdnnPluginConstData_t* g,
                                     hipdnnPluginConstData_t* d)
{
    (void)h; (void)id; (void)g;
    const char* path = getenv("MINI_DETAILS_FILE");
    FILE* f = path ? fopen(path, "rb") : NULL;
    if(!f) { g_err = "mini: MINI_DETAILS_FILE unreadable"; return HIPDNN_PLUGIN_STATUS_INTERNAL_ERROR; }
    unsigned char* buf = malloc(1 << 16);
    size_t n = fread(buf, 1, 1 << 16, f);
    fclose(f);
    d->ptr = buf;
    d->size = n;
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}
P hipdnnEnginePluginDestroyEngineDetails(hipdnnEnginePluginHandle_t h, hipdnnPluginConstData_t* d)
{
    (void)h;
    free((void*)d->ptr);
    d->ptr = NULL;
    d->size = 0;
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}
P hipdnnEnginePluginGetWorkspaceSize(hipdnnEnginePluginHandle_t h, const hipdnnPluginConstData_t* c,
                                     const hipdnnPluginConstData_t* g, size_t* ws)
{
    (void)h; (void)g;
    const char* path = getenv("MINI_CONFIG_FILE");
    FILE* f = path ? fopen(path, "wb") : NULL;
    if(f) { fwrite(c->ptr, 1, c->size, f); fclose(f); }
    *ws = 64;
    return HIPDNN_PLUGIN_STATUS_SUCCESS;
}
