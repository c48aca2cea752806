/* Name(): the replies gathered into one answer, duplicates named, nodes that are down listed. */
#include "test_qdl_unit.h"

#include <stdio.h>
#include <string.h>

static void reply(qdl_node_t *nd, const char *name)
{
    snprintf(nd->name_reply, sizeof(nd->name_reply), "%s", name);
}

/* Finishes a Name() over |q|'s current replies; returns its code, the answer in buf. */
static int finish(qdl_t *q, char *buf, size_t len, cmn_errbuf_t *eb)
{
    qdl_req_t r;
    int rc;

    memset(&r, 0, sizeof(r));
    r.kind = RQ_NAME;
    r.buf = buf;
    r.len = len;
    r.eb = eb;
    ck_assert_int_eq(uv_sem_init(&r.done, 0), 0);
    q->name_req = &r;
    qdl__name_finish(q, 0, NULL);
    uv_sem_wait(&r.done);
    uv_sem_destroy(&r.done);
    rc = r.rc;
    ck_assert_ptr_null(q->name_req);
    return rc;
}

START_TEST(names_are_gathered_in_node_order)
{
    qdl_t *q = fx_new(3, 1, 1);
    cmn_errbuf_t eb;
    char buf[256];

    reply(&q->nodes[0], "a");
    reply(&q->nodes[1], "b");
    reply(&q->nodes[2], "c");
    ck_assert_int_eq(finish(q, buf, sizeof(buf), &eb), 0);
    ck_assert_str_eq(buf, "Network SUT (3 nodes: a, b, c)");
    q->nodes[1].name_reply[0] = '\0';
    ck_assert_int_eq(finish(q, buf, sizeof(buf), &eb), 0);
    ck_assert_str_eq(buf, "Network SUT (2 nodes: a, c; down: 10.0.0.2:7000)");
    fx_free(q);
}
END_TEST

START_TEST(duplicate_names_and_silence_are_errors)
{
    qdl_t *q = fx_new(3, 1, 1);
    cmn_errbuf_t eb;
    char buf[256];

    reply(&q->nodes[0], "a");
    reply(&q->nodes[2], "a");
    ck_assert_int_eq(finish(q, buf, sizeof(buf), &eb), CMN_EDUPNAME);
    ck_assert_ptr_nonnull(strstr(eb.msg, "10.0.0.1:7000 and 10.0.0.3:7000"));
    q->nodes[0].name_reply[0] = q->nodes[2].name_reply[0] = '\0';
    ck_assert_int_eq(finish(q, buf, sizeof(buf), &eb), CMN_ENONODE);
    ck_assert_ptr_nonnull(strstr(eb.msg, "no node answered"));
    fx_free(q);
}
END_TEST

START_TEST(replies_to_another_request_are_ignored)
{
    qdl_t *q = fx_new(1, 1, 1);
    Nsut__NameReply nr = NSUT__NAME_REPLY__INIT;
    qdl_req_t r;

    memset(&r, 0, sizeof(r));
    r.request_id = 7;
    q->name_req = &r;
    q->nodes[0].name_pending = 1;
    nr.request_id = 6;
    nr.node_name = (char *)"old";
    qdl__name_reply(q, &q->nodes[0], &nr);
    ck_assert_int_eq(q->nodes[0].name_pending, 1);
    ck_assert_str_eq(q->nodes[0].name_reply, "");
    q->name_req = NULL;
    fx_free(q);
}
END_TEST

TCase *tcase_names(void)
{
    TCase *c = tcase_create("unit_name");
    tcase_add_test(c, names_are_gathered_in_node_order);
    tcase_add_test(c, duplicate_names_and_silence_are_errors);
    tcase_add_test(c, replies_to_another_request_are_ignored);
    return c;
}
