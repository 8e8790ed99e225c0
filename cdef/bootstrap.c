/* Interpreter bootstrap for libhipdnn_backend.so (pasted first into cffi's set_source()).
 *
 * - A constructor re-opens libpython RTLD_GLOBAL, so extension modules (_cffi_backend, numpy)
 *   resolve Python's symbols even when the host dlopen()ed us RTLD_LOCAL.
 * - hipdnn_cabi_bootstrap() starts Python with a PyConfig whose program_name is the interpreter of
 *   the environment this library was built for (HIPDNN_CABI_PYTHON overrides it), so PATH and an
 *   activated foreign venv do not matter; a failure is reported as a status, never exit().
 *   When Python is already running (a Python host), it is reused.  An installed library (in
 *   <prefix>/lib/pythonX.Y/site-packages) starts <prefix>/bin/pythonX.Y instead (see below).
 * - pthread_atfork handlers keep the GIL consistent across fork() from C threads.
 * - hipdnn_cabi_start_embedded() runs cffi's embedding start once, with a fix for Python < 3.12
 *   (see below and docs/embedding.md).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef HIPDNN_CABI_DEFAULT_PYTHON
#define HIPDNN_CABI_DEFAULT_PYTHON ""
#endif

static char g_boot_error[768] = "";
static int g_boot_status = 0;
static int g_we_started_python = 0;
static pthread_once_t g_boot_once = PTHREAD_ONCE_INIT;
static char g_library_path[4096] = "";
/* The folder of the path the loader used for this library (a symlink's folder, not its
 * target's), absolute: relative plugin paths resolve against it, as hipDNN's
 * getCurrentModuleDirectory does. */
static char g_library_dir[4096] = "";

__attribute__((constructor)) static void hipdnn_cabi_promote_libpython(void)
{
    Dl_info info;
    if (dladdr((void*)&Py_IsInitialized, &info) && info.dli_fname != NULL)
        (void)dlopen(info.dli_fname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
    if (dladdr((void*)&hipdnn_cabi_promote_libpython, &info) && info.dli_fname != NULL) {
        char* real = realpath(info.dli_fname, NULL);
        snprintf(g_library_path, sizeof g_library_path, "%s", real ? real : info.dli_fname);
        free(real);
        char cwd[4096] = "";
        const char* slash = strrchr(info.dli_fname, '/');
        size_t len = slash ? (size_t)(slash - info.dli_fname) : 0;
        if (info.dli_fname[0] != '/' && getcwd(cwd, sizeof cwd) == NULL)
            cwd[0] = '\0';
        if (info.dli_fname[0] == '/')
            snprintf(g_library_dir, sizeof g_library_dir, "%.*s", (int)(len ? len : 1),
                     info.dli_fname);
        else if (len)
            snprintf(g_library_dir, sizeof g_library_dir, "%s/%.*s", cwd, (int)len,
                     info.dli_fname);
        else
            snprintf(g_library_dir, sizeof g_library_dir, "%s", cwd);
    }
}

static const char* hipdnn_cabi_library_path(void) { return g_library_path; }
static const char* hipdnn_cabi_library_dir(void) { return g_library_dir; }

/* fork() safety: hold the GIL across fork so the child never inherits it mid-use. */
static __thread PyGILState_STATE g_fork_gil;
static __thread int g_fork_held = 0;

static void hipdnn_cabi_atfork_prepare(void)
{
    if (Py_IsInitialized() && !PyGILState_Check()) {
        g_fork_gil = PyGILState_Ensure();
        PyOS_BeforeFork();
        g_fork_held = 1;
    }
}

static void hipdnn_cabi_atfork_parent(void)
{
    if (g_fork_held) {
        g_fork_held = 0;
        PyOS_AfterFork_Parent();
        PyGILState_Release(g_fork_gil);
    }
}

static void hipdnn_cabi_atfork_child(void)
{
    if (g_fork_held) {
        g_fork_held = 0;
        PyOS_AfterFork_Child();
        PyGILState_Release(g_fork_gil);
    }
}

/* An installed wheel cannot know at build time which interpreter it will be installed for (pip
 * builds it in a throw-away environment).  When this library sits in an installation's
 * site-packages (<prefix>/lib/pythonX.Y/site-packages/<pkg>/lib/<this .so>), the interpreter is
 * <prefix>/bin/pythonX.Y (or python3): that is the program_name which gives Python the right
 * sys.prefix and site-packages (a venv's pyvenv.cfg is found beside its bin/).  Returns 1 and
 * fills `out` when found. */
static int hipdnn_cabi_installed_python(char* out, size_t n)
{
    char buf[4096];
    char* comp[64];
    int k = 0;
    snprintf(buf, sizeof buf, "%s", g_library_path);
    for (char* p = buf; *p && k < 64; ++p)
        if (*p == '/') {
            *p = '\0';
            comp[k++] = p + 1;
        }
    /* comp[k-1] = the .so, k-2 = "lib", k-3 = package, k-4 = site-packages, k-5 = pythonX.Y,
     * k-6 = lib / lib64 */
    if (k < 7)
        return 0;
    if (strcmp(comp[k - 4], "site-packages") != 0 && strcmp(comp[k - 4], "dist-packages") != 0)
        return 0;
    if (strncmp(comp[k - 5], "python", 6) != 0)
        return 0;
    if (strcmp(comp[k - 6], "lib") != 0 && strcmp(comp[k - 6], "lib64") != 0)
        return 0;
    comp[k - 6][-1] = '\0'; /* buf now holds <prefix> */
    const char* names[2] = {comp[k - 5], "python3"};
    for (int i = 0; i < 2; ++i) {
        size_t lb = strlen(buf), ln = strlen(names[i]);
        if (lb + ln + 6 > n)
            continue;
        memcpy(out, buf, lb);
        memcpy(out + lb, "/bin/", 5);
        memcpy(out + lb + 5, names[i], ln + 1);
        if (access(out, X_OK) == 0)
            return 1;
    }
    return 0;
}

static void hipdnn_cabi_boot_once(void)
{
    if (Py_IsInitialized())
        return; /* a Python host (or another embedded library) already runs an interpreter */

    static char installed[4096];
    const char* python = getenv("HIPDNN_CABI_PYTHON");
    if (python == NULL || python[0] == '\0')
        python = hipdnn_cabi_installed_python(installed, sizeof installed) ? installed
                                                                            : HIPDNN_CABI_DEFAULT_PYTHON;

    PyConfig config;
    PyConfig_InitPythonConfig(&config);
    config.install_signal_handlers = 0;
    config.parse_argv = 0;
    config.buffered_stdio = 1;
    PyStatus st;
    if (python[0] != '\0') {
        st = PyConfig_SetBytesString(&config, &config.program_name, python);
        if (PyStatus_Exception(st))
            goto fail;
    }
    st = Py_InitializeFromConfig(&config);
    if (PyStatus_Exception(st))
        goto fail;
    PyConfig_Clear(&config);
    g_we_started_python = 1;
    PyEval_SaveThread(); /* release the GIL: cffi takes it per call */
    pthread_atfork(hipdnn_cabi_atfork_prepare, hipdnn_cabi_atfork_parent, hipdnn_cabi_atfork_child);
    return;
fail:
    snprintf(g_boot_error, sizeof g_boot_error, "%s%s%s (program_name=%.400s)",
             st.func ? st.func : "", st.func ? ": " : "", st.err_msg ? st.err_msg : "unknown error",
             python[0] ? python : "<default>");
    PyConfig_Clear(&config);
    g_boot_status = -1;
}

static int hipdnn_cabi_bootstrap(void)
{
    pthread_once(&g_boot_once, hipdnn_cabi_boot_once);
    return g_boot_status;
}

/* cffi's embedding start (_cffi_carefully_make_gil in cffi/_embedding.h) serialises interpreter
 * start-up with a spin lock stored in a field of libpython that is supposed to stay 0.  Before
 * Python 3.12 that field is PyCapsule_Type.tp_version_tag: the spin loop waits until it reads 0.
 * But CPython assigns a version tag to any type whose attributes are looked up through the type
 * cache, so once the running program has looked up an attribute on any capsule object (the
 * datetime C API import done by torch/pandas/..., `hasattr(datetime.datetime_CAPI, "x")`, numpy's
 * and cffi's own capsules), the tag is a non-zero number forever and the first extern "Python" call
 * spins for ever.  Python >= 3.12 uses PyCapsule_Type.tp_as_buffer instead, which nothing sets.
 *
 * Fix: take the GIL (so no Python code can run and re-tag the type meanwhile), invalidate the type's
 * version tag with the public PyType_Modified() (it only clears the method cache for the type: the
 * tag is 0 again and the next lookup assigns a fresh one), and run cffi's start while still holding
 * the GIL (cffi takes the GIL re-entrantly with PyGILState_Ensure).  pthread_once serialises our own
 * callers, so no second thread of ours waits for cffi's internal mutex while we hold the GIL. */
static pthread_once_t g_start_once = PTHREAD_ONCE_INIT;
static int g_start_status = 0;

static void hipdnn_cabi_start_once(void)
{
#if PY_VERSION_HEX >= 0x03080000 && PY_VERSION_HEX < 0x030C0000 && !defined(PYPY_VERSION)
    PyGILState_STATE gil = PyGILState_Ensure();
    PyType_Modified(&PyCapsule_Type);
    g_start_status = cffi_start_python();
    PyGILState_Release(gil);
#else
    g_start_status = cffi_start_python();
#endif
}

static int hipdnn_cabi_start_embedded(void)
{
    pthread_once(&g_start_once, hipdnn_cabi_start_once);
    return g_start_status;
}
