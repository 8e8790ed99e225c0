/* A plugin-style host: dlopen(RTLD_LOCAL) the backend, resolve by name, use it, and call it again
 * from an atexit handler (after main returns). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include "hipdnn_backend.h"

typedef hipdnnStatus_t (*create_t)(hipdnnHandle_t*);
typedef hipdnnStatus_t (*destroy_t)(hipdnnHandle_t);
typedef hipdnnStatus_t (*cdesc_t)(hipdnnBackendDescriptorType_t, hipdnnBackendDescriptor_t*);
typedef hipdnnStatus_t (*ddesc_t)(hipdnnBackendDescriptor_t);
static create_t p_create;
static destroy_t p_destroy;
static cdesc_t p_cdesc;
static ddesc_t p_ddesc;

static void at_exit(void)
{
    hipdnnHandle_t h = NULL;
    hipdnnStatus_t s = p_create(&h);
    hipdnnBackendDescriptor_t d = NULL;
    hipdnnStatus_t s2 = p_cdesc(HIPDNN_BACKEND_TENSOR_DESCRIPTOR, &d);
    printf("atexit: create=%d desc=%d\n", (int)s, (int)s2);
    if (s == HIPDNN_STATUS_SUCCESS)
        p_destroy(h);
    if (s2 == HIPDNN_STATUS_SUCCESS)
        p_ddesc(d);
    fflush(stdout);
}

int main(int argc, char** argv)
{
    if (argc < 2)
        return 2;
    void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        printf("dlopen failed: %s\n", dlerror());
        return 1;
    }
    p_create = (create_t)dlsym(lib, "hipdnnCreate");
    p_destroy = (destroy_t)dlsym(lib, "hipdnnDestroy");
    p_cdesc = (cdesc_t)dlsym(lib, "hipdnnBackendCreateDescriptor");
    p_ddesc = (ddesc_t)dlsym(lib, "hipdnnBackendDestroyDescriptor");
    if (!p_create || !p_destroy || !p_cdesc || !p_ddesc)
        return 3;
    hipdnnHandle_t h = NULL;
    hipdnnStatus_t s = p_create(&h);
    printf("main: create=%d\n", (int)s);
    if (s != HIPDNN_STATUS_SUCCESS)
        return 4;
    p_destroy(h);
    atexit(at_exit);
    return 0;
}
