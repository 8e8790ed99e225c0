#define _DEFAULT_SOURCE
/* fork() with an ASYNC user log callback registered.
 *
 * Case "busy": the parent's delivery thread is inside a slow (~3 ms) callback when fork() runs.
 * Case "idle": the parent's queue has drained before fork().
 * In each child: unregistering must return (not hang on a lock the parent's delivery thread held),
 * and a callback registered in the child must receive the child's own messages (a fresh pipeline). */
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "hipdnn_backend.h"

static atomic_int g_calls;
static int g_tag;
static int g_child_tag;

static void slow_cb(hipdnnUserLogCallbackHandle_t user, hipdnnSeverity_t sev, const char* msg)
{
    (void)user; (void)sev; (void)msg;
    usleep(3000);
    atomic_fetch_add(&g_calls, 1);
}

static void fast_cb(hipdnnUserLogCallbackHandle_t user, hipdnnSeverity_t sev, const char* msg)
{
    (void)user; (void)sev; (void)msg;
    atomic_fetch_add(&g_calls, 1);
}

static void queue_errors(int n)
{
    for (int i = 0; i < n; ++i)
        (void)hipdnnBackendFinalize(NULL);
}

static int child(void)
{
    alarm(30); /* a deadlocked child dies by SIGALRM instead of hanging the test */
    if (hipdnnSetUserLogCallback_ext(slow_cb, HIPDNN_SEV_OFF, HIPDNN_LOG_CALLBACK_ASYNC, &g_tag)
        != HIPDNN_STATUS_SUCCESS)
        return 2;
    atomic_store(&g_calls, 0);
    if (hipdnnSetUserLogCallback_ext(fast_cb, HIPDNN_SEV_ERROR, HIPDNN_LOG_CALLBACK_ASYNC, &g_child_tag)
        != HIPDNN_STATUS_SUCCESS)
        return 3;
    queue_errors(3);
    for (int i = 0; i < 2000 && atomic_load(&g_calls) == 0; ++i)
        usleep(5000);
    if (atomic_load(&g_calls) == 0)
        return 4; /* the child's ASYNC callback never ran */
    if (hipdnnSetUserLogCallback_ext(fast_cb, HIPDNN_SEV_OFF, HIPDNN_LOG_CALLBACK_ASYNC, &g_child_tag)
        != HIPDNN_STATUS_SUCCESS)
        return 5;
    return 0;
}

static int run_case(const char* name, int busy)
{
    atomic_store(&g_calls, 0);
    if (hipdnnSetUserLogCallback_ext(slow_cb, HIPDNN_SEV_INFO, HIPDNN_LOG_CALLBACK_ASYNC, &g_tag)
        != HIPDNN_STATUS_SUCCESS)
        return 1;
    queue_errors(40);
    if (busy) {
        for (int i = 0; i < 2000 && atomic_load(&g_calls) == 0; ++i)
            usleep(500); /* the delivery thread is now inside slow_cb with ~39 more queued */
    } else {
        for (int i = 0; i < 4000 && atomic_load(&g_calls) < 40; ++i)
            usleep(1000);
        usleep(20000);
    }
    pid_t pid = fork();
    if (pid == 0)
        _exit(child());
    int status = 0;
    waitpid(pid, &status, 0);
    int bad = 0;
    if (WIFSIGNALED(status)) {
        printf("%s: child killed by signal %d%s\n", name, WTERMSIG(status),
               WTERMSIG(status) == SIGALRM ? " (hung)" : "");
        bad = 1;
    } else if (WEXITSTATUS(status) != 0) {
        printf("%s: child exited with %d\n", name, WEXITSTATUS(status));
        bad = 1;
    }
    /* The parent's pipeline keeps working and can be unregistered. */
    if (hipdnnSetUserLogCallback_ext(slow_cb, HIPDNN_SEV_OFF, HIPDNN_LOG_CALLBACK_ASYNC, &g_tag)
        != HIPDNN_STATUS_SUCCESS) {
        printf("%s: parent unregister failed\n", name);
        bad = 1;
    }
    return bad;
}

int main(void)
{
    if (hipdnnBackendSetGlobalLogLevel_ext(HIPDNN_SEV_INFO) != HIPDNN_STATUS_SUCCESS)
        return 10;
    int failures = 0;
    for (int i = 0; i < 3; ++i) {
        failures += run_case("busy", 1);
        failures += run_case("idle", 0);
    }
    printf("fork_log_async: %d failures\n", failures);
    return failures != 0;
}
