#include "cmn/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <uv.h>

struct err_entry {
    int code;
    const char *name;
    const char *text;
};

static const struct err_entry project_errors[] = {
    {CMN_EMAGIC, "CMN_EMAGIC", "bad frame magic"},
    {CMN_EVERSION, "CMN_EVERSION", "unsupported protocol version"},
    {CMN_ETYPE, "CMN_ETYPE", "unknown message type"},
    {CMN_EFLAGS, "CMN_EFLAGS", "reserved frame flags set"},
    {CMN_ETOOBIG, "CMN_ETOOBIG", "length over limit"},
    {CMN_EBADMSG, "CMN_EBADMSG", "metadata does not unpack"},
    {CMN_EFIELD, "CMN_EFIELD", "message field out of range or inconsistent"},
    {CMN_EPAYLOAD, "CMN_EPAYLOAD", "payload on a message that carries none"},
    {CMN_ECODEC, "CMN_ECODEC", "codec unknown or not negotiated"},
    {CMN_EDECOMPRESS, "CMN_EDECOMPRESS", "compressed data corrupt or of the wrong size"},
    {CMN_EPOLICY, "CMN_EPOLICY", "forbidden by the MLPerf rules"},
    {CMN_ECONFIG, "CMN_ECONFIG", "bad configuration"},
    {CMN_ESTATE, "CMN_ESTATE", "message not allowed in this state"},
    {CMN_ETIMEOUT, "CMN_ETIMEOUT", "deadline passed"},
    {CMN_EPEER, "CMN_EPEER", "peer reported an error"},
    {CMN_ECLOSED, "CMN_ECLOSED", "connection closed"},
    {CMN_EDUPNAME, "CMN_EDUPNAME", "duplicate node name"},
    {CMN_ENONODE, "CMN_ENONODE", "no node available"},
    {CMN_EBACKEND, "CMN_EBACKEND", "inference backend failed"},
    {CMN_ETLS, "CMN_ETLS", "TLS failure"},
    {CMN_EAUTH, "CMN_EAUTH", "authentication failed"},
    {CMN_EOVERLOAD, "CMN_EOVERLOAD", "capacity limit reached"},
    {CMN_EUNKNOWNID, "CMN_EUNKNOWNID", "id not outstanding"},
    {CMN_EFORMAT, "CMN_EFORMAT", "file not in the expected format"},
    {CMN_ENOTREADY, "CMN_ENOTREADY", "node not ready"},
};

static const struct err_entry *project_lookup(int err)
{
    if (err <= CMN_E__BASE && err > CMN_E__LAST) {
        size_t i = (size_t)(CMN_E__BASE - err) - 1;
        if (i < sizeof(project_errors) / sizeof(project_errors[0]) && project_errors[i].code == err)
            return &project_errors[i];
    }
    return NULL;
}

const char *cmn_strerror(int err)
{
    const struct err_entry *e;

    if (err == 0)
        return "success";
    e = project_lookup(err);
    if (e)
        return e->text;
    /* Negated errno values and libuv's own codes (UV_EOF and friends). */
    return uv_strerror(err);
}

const char *cmn_err_name(int err)
{
    const struct err_entry *e;

    if (err == 0)
        return "OK";
    e = project_lookup(err);
    if (e)
        return e->name;
    return uv_err_name(err);
}

int cmn_errf(cmn_errbuf_t *eb, int err, const char *fmt, ...)
{
    va_list ap;

    if (eb) {
        va_start(ap, fmt);
        vsnprintf(eb->msg, sizeof(eb->msg), fmt, ap);
        va_end(ap);
    }
    return err;
}
