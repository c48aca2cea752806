/* A hash map from 64-bit ids to non-NULL pointers (open addressing, linear probing, backward-shift
 * deletion, so no tombstones accumulate under constant insert/remove churn). Used for in-flight
 * sample ids. Not thread-safe. */
#ifndef CMN_IDMAP_H
#define CMN_IDMAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint64_t key;
    void *val; /* NULL: empty slot */
} cmn_idmap_entry_t;

typedef struct {
    cmn_idmap_entry_t *slots;
    size_t cap; /* power of two, or 0 */
    size_t count;
} cmn_idmap_t;

void cmn_idmap_init(cmn_idmap_t *m);
void cmn_idmap_free(cmn_idmap_t *m);

/* Inserts key -> val (val != NULL). Returns 0, UV_EEXIST when the key is present (the map is
 * unchanged), or -ENOMEM. */
int cmn_idmap_put(cmn_idmap_t *m, uint64_t key, void *val);

void *cmn_idmap_get(const cmn_idmap_t *m, uint64_t key);

/* Removes key and returns its value, or NULL when absent. */
void *cmn_idmap_del(cmn_idmap_t *m, uint64_t key);

/* Calls fn for every entry (the map must not change during the walk). */
void cmn_idmap_each(const cmn_idmap_t *m, void (*fn)(void *arg, uint64_t key, void *val),
                    void *arg);

#endif
