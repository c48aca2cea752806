/* Stopping a helper thread: the "lock, raise the stop flag, wake the thread, unlock, join" run
 * the modules' destroy functions each wrote out.
 *
 * Three shapes, one per way the thread sleeps: on a pthread condition variable, on a libuv one,
 * or in a libuv loop woken by a cmn_wake_t whose callback reads the flag under the mutex. Each
 * wakes exactly one thread (signal, not broadcast); a pool of threads on one condition variable,
 * or a flag some other thread also waits for, stops its own way. The caller still owns (and
 * destroys afterwards) the mutex, the condition variable and the handle.
 *
 * Header only; the loop's shape calls cmn_wake_send, in cmn_base. */
#ifndef CMN_THREAD_STOP_H
#define CMN_THREAD_STOP_H

#include "cmn/wake.h"

#include <pthread.h>
#include <uv.h>

/* Sets *STOP under MU, signals CV (the thread waits on it for *STOP) and joins THREAD. */
static inline void cmn_thread_stop(pthread_mutex_t *mu, pthread_cond_t *cv, int *stop,
                                   pthread_t thread)
{
    pthread_mutex_lock(mu);
    *stop = 1;
    pthread_cond_signal(cv);
    pthread_mutex_unlock(mu);
    pthread_join(thread, NULL);
}

/* The same with libuv's mutex, condition variable and thread. */
static inline void cmn_uv_thread_stop(uv_mutex_t *mu, uv_cond_t *cv, int *stop, uv_thread_t *thread)
{
    uv_mutex_lock(mu);
    *stop = 1;
    uv_cond_signal(cv);
    uv_mutex_unlock(mu);
    uv_thread_join(thread);
}

/* For a thread running a libuv loop: sets *STOP under MU, wakes the loop through WAKE (its
 * callback reads *STOP under MU and closes the loop's handles) and joins THREAD. */
static inline void cmn_uv_loop_stop(uv_mutex_t *mu, int *stop, cmn_wake_t *wake,
                                    uv_thread_t *thread)
{
    uv_mutex_lock(mu);
    *stop = 1;
    uv_mutex_unlock(mu);
    cmn_wake_send(wake);
    uv_thread_join(thread);
}

#endif
