/* Aggregate throughput of T C threads over one fixed time window (bench/api_bench.c and the
 * thread loops of bench/execute_bench.py).
 *
 * Each thread is pinned to a CPU of its own while T <= the CPUs this process may use (the t-th
 * allowed CPU; with more threads than CPUs none is pinned), waits at a barrier with the main
 * thread, then runs its work in chunks of `chunk` iterations until the main thread raises the
 * stop flag `window` seconds after the barrier.  The result is all the threads' iterations over
 * the window's wall time (the first thread's start to the last thread's stop): the work done per
 * second while all T run at once.  A fixed count per thread would instead time the slowest
 * thread and charge every other thread's idle tail to the total, so the figure would follow the
 * machine's stragglers (a descheduled vCPU), not the code.
 *
 * Use: a thread body calls bt_begin(&c) once and then `do { <chunk iterations> } while
 * (bt_more(&c));`; the main thread fills one bt_clock per thread (bt_clock_init) and calls
 * bt_window(T, threads, body, args, arg_size, clock_offset, window). */
#ifndef HIPDNN_CABI_BENCH_THREADS_H
#define HIPDNN_CABI_BENCH_THREADS_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <time.h>

static volatile int bt_stop_flag;

typedef struct {
    long chunk, done;
    double t0, t1;
    int cpu; /* -1: not pinned */
    pthread_barrier_t* bar;
} bt_clock;

static double bt_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

/* the t-th CPU of this process's affinity set, or -1 when T threads do not fit one per CPU */
static int bt_cpu_for(int t, int T)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0 || T > CPU_COUNT(&set))
        return -1;
    for (int c = 0, k = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &set) && k++ == t)
            return c;
    return -1;
}

static void bt_begin(bt_clock* c)
{
    if (c->cpu >= 0) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(c->cpu, &one);
        pthread_setaffinity_np(pthread_self(), sizeof one, &one);
    }
    c->done = 0;
    pthread_barrier_wait(c->bar);
    c->t0 = bt_now();
}

/* after one chunk: count it; 0 once the window has closed */
static int bt_more(bt_clock* c)
{
    c->done += c->chunk;
    if (!__atomic_load_n(&bt_stop_flag, __ATOMIC_RELAXED))
        return 1;
    c->t1 = bt_now();
    return 0;
}

/* runs `body` on T threads; args: T blocks of arg_size bytes, each holding a bt_clock at
 * clock_offset (its chunk set by the caller); returns the threads' iterations per second */
static double bt_window(int T, void* (*body)(void*), void* args, size_t arg_size, size_t clock_offset,
                        double window)
{
    pthread_t th[64];
    pthread_barrier_t bar;
    if (T < 1 || T > 64)
        return 0;
    pthread_barrier_init(&bar, NULL, (unsigned)T + 1);
    __atomic_store_n(&bt_stop_flag, 0, __ATOMIC_RELAXED);
    for (int t = 0; t < T; ++t) {
        bt_clock* c = (bt_clock*)((char*)args + (size_t)t * arg_size + clock_offset);
        c->cpu = bt_cpu_for(t, T);
        c->bar = &bar;
        pthread_create(&th[t], NULL, body, (char*)args + (size_t)t * arg_size);
    }
    pthread_barrier_wait(&bar);
    struct timespec w = {(time_t)window, (long)((window - (double)(time_t)window) * 1e9)};
    nanosleep(&w, NULL);
    __atomic_store_n(&bt_stop_flag, 1, __ATOMIC_RELAXED);
    double done = 0, t0 = 1e300, t1 = 0;
    for (int t = 0; t < T; ++t) {
        pthread_join(th[t], NULL);
        bt_clock* c = (bt_clock*)((char*)args + (size_t)t * arg_size + clock_offset);
        done += (double)c->done;
        if (c->t0 < t0) t0 = c->t0;
        if (c->t1 > t1) t1 = c->t1;
    }
    pthread_barrier_destroy(&bar);
    return t1 > t0 ? done / (t1 - t0) : 0;
}

#endif
