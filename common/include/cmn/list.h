/* Intrusive list idioms shared by every module: a NULL-terminated doubly-linked list reached
 * from a head pointer, and a singly-linked FIFO queue with a head and a tail pointer.
 *
 * The lists of the modules link different structs through differently named fields (`prev`/
 * `next`, `rprev`/`rnext`, `pprev`/`pnext`) and are walked directly by their owners, so these
 * are type-generic macros over the caller's own fields rather than a node type to embed: HEAD and
 * TAIL are the owner's pointer lvalues (e.g. `ss->head`), NODE the element, PREV and NEXT the
 * names of its link fields. Arguments may be evaluated more than once: pass plain expressions
 * without side effects. No locking: the caller holds whatever lock guards the list.
 *
 * Header only (no library to link): anything that sees common's include directory may use it. */
#ifndef CMN_LIST_H
#define CMN_LIST_H

/* Puts NODE first on the doubly-linked list whose first element is HEAD (NULL when empty). */
#define CMN_DLIST_PUSH(head, node, prev, next) \
    do {                                       \
        (node)->prev = NULL;                   \
        (node)->next = (head);                 \
        if (head)                              \
            (head)->prev = (node);             \
        (head) = (node);                       \
    } while (0)

/* Takes NODE off the doubly-linked list whose first element is HEAD. NODE's own link fields are
 * left as they were (clear them if the node may be unlinked twice). */
#define CMN_DLIST_UNLINK(head, node, prev, next) \
    do {                                         \
        if ((node)->prev)                        \
            (node)->prev->next = (node)->next;   \
        else                                     \
            (head) = (node)->next;               \
        if ((node)->next)                        \
            (node)->next->prev = (node)->prev;   \
    } while (0)

/* Appends the chain FIRST..LAST (LAST's NEXT already NULL) to the queue HEAD..TAIL (both NULL
 * when empty). */
#define CMN_QUEUE_APPEND_CHAIN(head, tail, first, last, next) \
    do {                                                      \
        if (tail)                                             \
            (tail)->next = (first);                           \
        else                                                  \
            (head) = (first);                                 \
        (tail) = (last);                                      \
    } while (0)

/* Appends NODE (its NEXT already NULL) to the queue HEAD..TAIL. */
#define CMN_QUEUE_APPEND(head, tail, node, next) \
    CMN_QUEUE_APPEND_CHAIN(head, tail, node, node, next)

#endif
