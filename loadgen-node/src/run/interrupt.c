/* The request to end a run early (Ctrl-C): a process-wide flag that a signal handler may set. The
 * issue loops and the waits poll it; a run that sees it stops issuing, waits a bounded time for
 * the samples in flight, and writes its logs marked interrupted. */
#include "run.h"

static atomic_int interrupt_signal;

void lg_interrupt(int signo)
{
    /* A lock-free atomic store: async-signal-safe. */
    atomic_store(&interrupt_signal, signo > 0 ? signo : 1);
}

void lg_interrupt_clear(void)
{
    atomic_store(&interrupt_signal, 0);
}

int lg__interrupted(void)
{
    return atomic_load_explicit(&interrupt_signal, memory_order_relaxed);
}
