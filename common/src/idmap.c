#include "cmn/idmap.h"

#include <errno.h>
#include <stdlib.h>
#include <uv.h>

static size_t slot_of(uint64_t key, size_t cap)
{
    /* Fibonacci hashing spreads sequential ids over the table. */
    return (size_t)((key * 0x9E3779B97F4A7C15ull) >> 32) & (cap - 1);
}

void cmn_idmap_init(cmn_idmap_t *m)
{
    m->slots = NULL;
    m->cap = 0;
    m->count = 0;
}

void cmn_idmap_free(cmn_idmap_t *m)
{
    free(m->slots);
    cmn_idmap_init(m);
}

static int grow(cmn_idmap_t *m)
{
    size_t ncap = m->cap ? m->cap * 2 : 64, i;
    cmn_idmap_entry_t *ns = calloc(ncap, sizeof(*ns)), *old = m->slots;

    if (!ns)
        return -ENOMEM;
    for (i = 0; i < m->cap; i++) {
        if (old[i].val) {
            size_t j = slot_of(old[i].key, ncap);
            while (ns[j].val)
                j = (j + 1) & (ncap - 1);
            ns[j] = old[i];
        }
    }
    free(old);
    m->slots = ns;
    m->cap = ncap;
    return 0;
}

int cmn_idmap_put(cmn_idmap_t *m, uint64_t key, void *val)
{
    size_t i;
    int rc;

    /* Load factor at most 1/2 keeps probe sequences short. */
    if ((m->count + 1) * 2 > m->cap && (rc = grow(m)) < 0)
        return rc;
    i = slot_of(key, m->cap);
    while (m->slots[i].val) {
        if (m->slots[i].key == key)
            return UV_EEXIST;
        i = (i + 1) & (m->cap - 1);
    }
    m->slots[i].key = key;
    m->slots[i].val = val;
    m->count++;
    return 0;
}

void *cmn_idmap_get(const cmn_idmap_t *m, uint64_t key)
{
    size_t i;

    if (!m->cap)
        return NULL;
    i = slot_of(key, m->cap);
    while (m->slots[i].val) {
        if (m->slots[i].key == key)
            return m->slots[i].val;
        i = (i + 1) & (m->cap - 1);
    }
    return NULL;
}

void *cmn_idmap_del(cmn_idmap_t *m, uint64_t key)
{
    size_t i, j, mask = m->cap - 1;
    void *val;

    if (!m->cap)
        return NULL;
    i = slot_of(key, m->cap);
    while (m->slots[i].val && m->slots[i].key != key)
        i = (i + 1) & mask;
    if (!m->slots[i].val)
        return NULL;
    val = m->slots[i].val;
    /* Backward-shift: move later entries of the cluster into the hole when their home slot
     * allows it, so lookups never need tombstones. */
    j = i;
    for (;;) {
        size_t home;
        j = (j + 1) & mask;
        if (!m->slots[j].val)
            break;
        home = slot_of(m->slots[j].key, m->cap);
        if (((j - home) & mask) >= ((j - i) & mask)) {
            m->slots[i] = m->slots[j];
            i = j;
        }
    }
    m->slots[i].val = NULL;
    m->count--;
    return val;
}

void cmn_idmap_each(const cmn_idmap_t *m, void (*fn)(void *arg, uint64_t key, void *val), void *arg)
{
    size_t i;
    for (i = 0; i < m->cap; i++) {
        if (m->slots[i].val)
            fn(arg, m->slots[i].key, m->slots[i].val);
    }
}
