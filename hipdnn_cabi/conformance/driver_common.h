/* hipdnn-cabi conformance drivers: the record writer and small helpers all three drivers share
 * (driver.c, heuristic_driver.c, backend_driver.c).  Every record is one JSON object per line on
 * stdout, flushed at once, so the output up to a crash survives.
 *
 * The including driver defines `static const char* drv_last_error(void)` (plugin drivers get it
 * from this header, see DRV_PLUGIN_IDENTITY): the callee's last error string, read on the
 * calling thread after a failed call (NULL when there is none).  Then
 * `DRV_CALL(TABLE, tag, fn, args, expr)` checks that TABLE.fn was found, prints {"t":"pre",...},
 * runs TABLE.fn expr, prints {"t":"call",...,"st":N,"err":...} and yields the status as int.
 */
#ifndef HIPDNN_CABI_CONFORMANCE_DRIVER_COMMON_H
#define HIPDNN_CABI_CONFORMANCE_DRIVER_COMMON_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static const char* drv_last_error(void);

static inline void jstr(const char* s)
{
    if (!s) { fputs("null", stdout); return; }
    putchar('"');
    for (size_t i = 0; s[i] && i < 4096; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c < 0x20 || c >= 0x7f) printf("\\u%04x", c);
        else putchar(c);
    }
    putchar('"');
}
static inline void jhex(const void* p, size_t n)
{
    putchar('"');
    for (size_t i = 0; p && i < n; i++) printf("%02x", ((const unsigned char*)p)[i]);
    putchar('"');
}
static inline void jids(const int64_t* ids, size_t n)
{
    putchar('[');
    for (size_t i = 0; i < n; i++) printf("%s\"%lld\"", i ? "," : "", (long long)ids[i]);
    putchar(']');
}

/* a required symbol that is missing: {"t":"missing","fn":NAME}, exit 3 */
static inline void need(const void* p, const char* name)
{
    if (!p) {
        printf("{\"t\":\"missing\",\"fn\":\"%s\"}\n", name);
        fflush(stdout);
        exit(3);
    }
}

static pthread_mutex_t drv_out_lock = PTHREAD_MUTEX_INITIALIZER;
static inline void pre(const char* tag, const char* fn, const char* args)
{
    pthread_mutex_lock(&drv_out_lock);
    printf("{\"t\":\"pre\",\"tag\":\"%s\",\"fn\":\"%s\",\"args\":", tag, fn);
    jstr(args);
    printf("}\n");
    fflush(stdout);
    pthread_mutex_unlock(&drv_out_lock);
}
static inline void post(const char* tag, const char* fn, const char* args, int st)
{
    const char* e = st ? drv_last_error() : NULL;
    pthread_mutex_lock(&drv_out_lock);
    printf("{\"t\":\"call\",\"tag\":\"%s\",\"fn\":\"%s\",\"args\":", tag, fn);
    jstr(args);
    printf(",\"st\":%d,\"err\":", st);
    jstr(e);
    printf("}\n");
    fflush(stdout);
    pthread_mutex_unlock(&drv_out_lock);
}
#define DRV_CALL(TABLE, tag, fn, args, expr)                                                        \
    __extension__({                                                                                 \
        need((const void*)TABLE.fn, #fn);                                                           \
        pre(tag, #fn, args);                                                                        \
        int _st = (int)(TABLE.fn expr);                                                             \
        post(tag, #fn, args, _st);                                                                  \
        _st;                                                                                        \
    })

static inline void done(void) { printf("{\"t\":\"done\"}\n"); fflush(stdout); }
/* the driver cannot go on: {"t":"fatal","msg":...}, exit 4 */
static inline void fatal(const char* msg)
{
    printf("{\"t\":\"fatal\",\"msg\":");
    jstr(msg);
    printf("}\n");
    fflush(stdout);
    exit(4);
}

/* a whole file in memory (exit 2 when it cannot be read) */
static inline void* slurp(const char* p, size_t* n)
{
    FILE* f = fopen(p, "rb");
    if (!f) { fprintf(stderr, "cannot open %s\n", p); exit(2); }
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    void* b = malloc(sz > 0 ? (size_t)sz : 1);
    if (sz > 0 && fread(b, 1, (size_t)sz, f) != (size_t)sz) { fprintf(stderr, "short read %s\n", p); exit(2); }
    fclose(f);
    *n = (size_t)sz;
    return b;
}

#ifdef DRV_PLUGIN_IDENTITY
/* Plugin drivers define DRV_PLUGIN_IDENTITY, the typedef St (the plugin status) and SYMBOLS(X) -
 * DRV_PLUGIN_SYMBOLS(X) (the symbols every plugin kind exports) followed by their own kind's -
 * before including this header, which then gives them the symbol table P (one function pointer
 * per symbol, NULL when not exported), drv_last_error(), NEED(fn) and CALL(tag, fn, args, expr). */
#define DRV_PLUGIN_SYMBOLS(X)                                                                       \
    X(hipdnnPluginGetName, St (*)(const char**))                                                    \
    X(hipdnnPluginGetVersion, St (*)(const char**))                                                 \
    X(hipdnnPluginGetApiVersion, St (*)(const char**))                                              \
    X(hipdnnPluginGetType, St (*)(hipdnnPluginType_t*))                                             \
    X(hipdnnPluginGetLastErrorString, void (*)(const char**))                                       \
    X(hipdnnPluginSetLoggingCallback, St (*)(hipdnnCallback_t))                                     \
    X(hipdnnPluginSetLogLevel, St (*)(hipdnnSeverity_t))

#define X_FIELD(n, T) __typeof__(&n) n;
static struct { SYMBOLS(X_FIELD) } P;

static const char* drv_last_error(void)
{
    const char* e = NULL;
    if (P.hipdnnPluginGetLastErrorString) P.hipdnnPluginGetLastErrorString(&e);
    return e;
}
#define NEED(n) need((const void*)P.n, #n)
/* CALL(tag, fn, "args", expr): print "pre", run P.fn expr (a status), print "call"; yields it. */
#define CALL(tag, fn, args, expr) ((St)DRV_CALL(P, tag, fn, args, expr))

/* The records
 * of a plugin's identity - {"t":"sym"} per symbol, {"t":"string"} for name / version /
 * api_version (each asked twice: a static string keeps its pointer; a value only when the call
 * succeeded), {"t":"type"}. */
static inline void drv_str2(const char* tag, const char* fn, hipdnnPluginStatus_t (*f)(const char**))
{
    if (!f)
        return;
    char t1[48], t2[48];
    snprintf(t1, sizeof t1, "%s_1", tag);
    snprintf(t2, sizeof t2, "%s_2", tag);
    const char *s1 = NULL, *s2 = NULL;
    pre(t1, fn, "&str");
    int a = (int)f(&s1);
    post(t1, fn, "&str", a);
    pre(t2, fn, "&str");
    int b = (int)f(&s2);
    post(t2, fn, "&str", b);
    printf("{\"t\":\"string\",\"tag\":\"%s\",\"st1\":%d,\"st2\":%d,\"same_ptr\":%d,\"value\":", tag, a, b,
           s1 == s2 && s1 != NULL);
    jstr(a ? NULL : s1);
    printf(",\"value2\":");
    jstr(b ? NULL : s2);
    printf("}\n");
}
static inline void drv_probe_identity(void)
{
#define DRV_X_SYM(n, T) printf("{\"t\":\"sym\",\"fn\":\"%s\",\"found\":%d}\n", #n, P.n != NULL);
    SYMBOLS(DRV_X_SYM)
#undef DRV_X_SYM
    drv_str2("name", "hipdnnPluginGetName", P.hipdnnPluginGetName);
    drv_str2("version", "hipdnnPluginGetVersion", P.hipdnnPluginGetVersion);
    drv_str2("api_version", "hipdnnPluginGetApiVersion", P.hipdnnPluginGetApiVersion);
    if (P.hipdnnPluginGetType) {
        hipdnnPluginType_t t = (hipdnnPluginType_t)99;
        int st = DRV_CALL(P, "type", hipdnnPluginGetType, "&type", (&t));
        printf("{\"t\":\"type\",\"st\":%d,\"value\":%d}\n", st, (int)t);
    }
}
#endif

#endif
