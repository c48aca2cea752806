/* cmn/sbuf.h: appends, printf across the buffer's growth, and the sticky out-of-memory flag. */
#include "cmn/sbuf.h"
#include "test_common.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

START_TEST(sbuf)
{
    cmn_sbuf_t b = {0};
    char big[1000];
    size_t i;

    /* Empty until the first append; then always NUL-terminated. */
    ck_assert_ptr_null(b.p);
    cmn_sbuf_add(&b, "ab", 2);
    cmn_sbuf_puts(&b, "cd");
    cmn_sbuf_printf(&b, "%s=%d", "x", 42);
    ck_assert_str_eq(b.p, "abcdx=42");
    ck_assert_uint_eq(b.len, 8);
    /* A printf longer than the room left: the buffer grows and the text is whole. */
    memset(big, 'z', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    cmn_sbuf_printf(&b, "[%s]", big);
    ck_assert_uint_eq(b.len, 8 + 2 + sizeof(big) - 1);
    ck_assert_uint_ge(b.cap, b.len + 1);
    ck_assert_int_eq(b.p[8], '[');
    ck_assert_int_eq(b.p[b.len - 1], ']');
    ck_assert_int_eq(b.p[b.len], '\0');
    for (i = 9; i < b.len - 1; i++)
        ck_assert_int_eq(b.p[i], 'z');
    ck_assert_int_eq(cmn_sbuf_reserve(&b, 5000), 0);
    ck_assert_uint_ge(b.cap, b.len + 5001);
    ck_assert(!b.oom);
    /* A size no allocation can hold: oom, and every later append does nothing. */
    ck_assert_int_eq(cmn_sbuf_reserve(&b, SIZE_MAX - 4), -1);
    ck_assert(b.oom);
    i = b.len;
    cmn_sbuf_puts(&b, "more");
    cmn_sbuf_printf(&b, "%d", 7);
    ck_assert_uint_eq(b.len, i);
    ck_assert_int_eq(cmn_sbuf_reserve(&b, 1), -1);
    free(b.p);
}
END_TEST

TCase *tcase_sbuf(void)
{
    TCase *tc = tcase_create("sbuf");

    tcase_add_test(tc, sbuf);
    return tc;
}
