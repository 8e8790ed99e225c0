#define _DEFAULT_SOURCE
/* fork() while another thread is inside the API; the child then uses the API. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
#include "hipdnn_backend.h"

static volatile int g_stop;

static void* busy(void* arg)
{
    (void)arg;
    while (!g_stop) {
        hipdnnBackendDescriptor_t d = NULL;
        if (hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_TENSOR_DESCRIPTOR, &d) == HIPDNN_STATUS_SUCCESS)
            hipdnnBackendDestroyDescriptor(d);
    }
    return NULL;
}

static int use_api(void)
{
    hipdnnHandle_t h = NULL;
    if (hipdnnCreate(&h) != HIPDNN_STATUS_SUCCESS)
        return 1;
    hipdnnBackendDescriptor_t d = NULL;
    if (hipdnnBackendCreateDescriptor(HIPDNN_BACKEND_TENSOR_DESCRIPTOR, &d) != HIPDNN_STATUS_SUCCESS)
        return 2;
    int64_t uid = 5;
    if (hipdnnBackendSetAttribute(d, HIPDNN_ATTR_TENSOR_UNIQUE_ID, HIPDNN_TYPE_INT64, 1, &uid) != 0)
        return 3;
    hipdnnBackendDestroyDescriptor(d);
    hipdnnDestroy(h);
    return 0;
}

int main(void)
{
    if (use_api() != 0) /* start Python in the parent first */
        return 10;
    pthread_t th;
    pthread_create(&th, NULL, busy, NULL);
    int failures = 0;
    for (int i = 0; i < 5; ++i) {
        usleep(2000);
        pid_t pid = fork();
        if (pid == 0) {
            alarm(60); /* a deadlocked child dies (SIGALRM) instead of hanging the test */
            _exit(use_api());
        }
        int status = 0;
        waitpid(pid, &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            if (WIFSIGNALED(status))
                printf("child %d killed by signal %d%s\n", i, WTERMSIG(status),
                       WTERMSIG(status) == SIGALRM ? " (deadlocked: no progress in 60 s)" : "");
            else
                printf("child %d exited with %d\n", i, WEXITSTATUS(status));
            ++failures;
        }
    }
    g_stop = 1;
    pthread_join(th, NULL);
    printf("fork: %d failures\n", failures);
    return failures != 0;
}
