/* --issue-cpu: the issue thread alone on one CPU while a series issues its queries.
 *
 * On a host with few cores the issue thread shares them with the SUT's threads (the QDL loop, the
 * completion path, and where the node runs on the same host, the node). Whichever of them wakes on
 * the issue thread's CPU preempts it, and the query it was about to issue goes out late by that
 * thread's whole turn: the lateness the summary's harness block reports. With a CPU named,
 * lg__cpu_claim() moves every other thread of this process off that CPU and the calling (issue)
 * thread onto it alone; threads created meanwhile inherit the reduced set from their creators.
 * lg__cpu_release() gives every thread the caller's set from before. Other processes (a sut-node on
 * the same host) are not touched: the user pins them (taskset) where it matters. */
#include "run.h"

#include "cmn/log.h"

#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int lg_issue_cpu_check(int cpu, cmn_errbuf_t *eb)
{
    cpu_set_t set;

    if (sched_getaffinity(0, sizeof(set), &set) != 0)
        return cmn_errf(eb, -errno, "--issue-cpu %d: cannot read this process's CPUs: %s", cpu,
                        strerror(errno));
    if (cpu < 0 || cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &set))
        return cmn_errf(eb, CMN_ECONFIG,
                        "--issue-cpu %d: not one of the %d CPUs this process may run on", cpu,
                        CPU_COUNT(&set));
    if (CPU_COUNT(&set) < 2)
        return cmn_errf(eb, CMN_ECONFIG,
                        "--issue-cpu %d: it is the only CPU this process may run on; the "
                        "other threads would have none left",
                        cpu);
    return 0;
}

/* Gives every thread of the process but the caller the set |set|. Two passes: a thread that an
 * unmoved thread created during the first one is found by the second. Threads that ended meanwhile
 * (ESRCH) are skipped. */
static int set_others(const cpu_set_t *set)
{
    pid_t self = gettid();
    int pass, rc = 0;

    for (pass = 0; pass < 2; pass++) {
        DIR *d = opendir("/proc/self/task");
        struct dirent *e;

        if (!d)
            return -errno;
        while ((e = readdir(d)) != NULL) {
            char *end;
            long tid = strtol(e->d_name, &end, 10);

            if (*end != '\0' || tid <= 0 || tid == self)
                continue;
            if (sched_setaffinity((pid_t)tid, sizeof(*set), set) != 0 && errno != ESRCH && rc == 0)
                rc = -errno;
        }
        closedir(d);
    }
    return rc;
}

int lg__cpu_claim(lg__cpu_t *c, int cpu)
{
    cpu_set_t others, mine;
    int rc;

    memset(c, 0, sizeof(*c));
    c->cpu = cpu;
    if (sched_getaffinity(0, sizeof(c->saved), &c->saved) != 0)
        return -errno;
    others = c->saved;
    CPU_CLR(cpu, &others);
    if (!CPU_ISSET(cpu, &c->saved) || CPU_COUNT(&others) == 0)
        return CMN_ECONFIG;
    CPU_ZERO(&mine);
    CPU_SET(cpu, &mine);
    c->on = 1;
    rc = set_others(&others);
    if (rc == 0 && sched_setaffinity(0, sizeof(mine), &mine) != 0)
        rc = -errno;
    if (rc < 0)
        lg__cpu_release(c);
    else
        c->pinned = 1;
    return rc;
}

void lg__cpu_release(lg__cpu_t *c)
{
    int rc = 0;

    if (!c->on)
        return;
    c->on = 0;
    if (sched_setaffinity(0, sizeof(c->saved), &c->saved) != 0)
        rc = -errno;
    if (rc == 0)
        rc = set_others(&c->saved);
    if (rc < 0)
        cmn_log_warn("--issue-cpu %d: cannot give the threads back their CPUs: %s", c->cpu,
                     strerror(-rc));
}
