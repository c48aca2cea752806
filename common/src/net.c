#include "cmn/net.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cmn_addr_parse(const char *s, struct sockaddr_storage *out, cmn_errbuf_t *eb)
{
    char host[256];
    const char *colon, *port_s;
    size_t hlen;
    char *end;
    long port;
    struct addrinfo hints, *res = NULL;
    int rc;

    if (!s || !*s)
        return cmn_errf(eb, CMN_ECONFIG, "empty address (expected HOST:PORT)");
    if (s[0] == '[') {
        const char *close = strchr(s, ']');
        if (!close || close[1] != ':')
            return cmn_errf(eb, CMN_ECONFIG, "address '%s': expected [IPV6]:PORT", s);
        hlen = (size_t)(close - s - 1);
        if (hlen >= sizeof(host))
            return cmn_errf(eb, CMN_ECONFIG, "address '%s': host too long", s);
        memcpy(host, s + 1, hlen);
        host[hlen] = '\0';
        port_s = close + 2;
    } else {
        colon = strrchr(s, ':');
        if (!colon)
            return cmn_errf(eb, CMN_ECONFIG, "address '%s' has no port (expected HOST:PORT)", s);
        if (strchr(s, ':') != colon)
            return cmn_errf(eb, CMN_ECONFIG, "address '%s': write IPv6 addresses as [ADDR]:PORT",
                            s);
        hlen = (size_t)(colon - s);
        if (hlen >= sizeof(host))
            return cmn_errf(eb, CMN_ECONFIG, "address '%s': host too long", s);
        memcpy(host, s, hlen);
        host[hlen] = '\0';
        port_s = colon + 1;
    }
    port = strtol(port_s, &end, 10);
    if (!*port_s || *end || port < 0 || port > 65535)
        return cmn_errf(eb, CMN_ECONFIG, "address '%s': port '%s' is not a number in 0..65535", s,
                        port_s);
    if (hlen == 0 || strcmp(host, "*") == 0)
        strcpy(host, "0.0.0.0");

    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    rc = getaddrinfo(host, NULL, &hints, &res);
    if (rc != 0 || !res)
        return cmn_errf(eb, CMN_ECONFIG, "address '%s': cannot resolve '%s': %s", s, host,
                        gai_strerror(rc));
    memset(out, 0, sizeof(*out));
    memcpy(out, res->ai_addr, res->ai_addrlen);
    freeaddrinfo(res);
    if (out->ss_family == AF_INET)
        ((struct sockaddr_in *)out)->sin_port = htons((uint16_t)port);
    else if (out->ss_family == AF_INET6)
        ((struct sockaddr_in6 *)out)->sin6_port = htons((uint16_t)port);
    else
        return cmn_errf(eb, CMN_ECONFIG, "address '%s': not an IP address", s);
    return 0;
}

char *cmn_addr_format(const struct sockaddr *sa, char *buf, size_t len)
{
    char ip[INET6_ADDRSTRLEN];

    /* Copies, not casts: a struct sockaddr pointer need not be aligned for the wider types. */
    if (sa->sa_family == AF_INET) {
        struct sockaddr_in in;
        memcpy(&in, sa, sizeof(in));
        inet_ntop(AF_INET, &in.sin_addr, ip, sizeof(ip));
        snprintf(buf, len, "%s:%u", ip, (unsigned)ntohs(in.sin_port));
    } else if (sa->sa_family == AF_INET6) {
        struct sockaddr_in6 in6;
        memcpy(&in6, sa, sizeof(in6));
        inet_ntop(AF_INET6, &in6.sin6_addr, ip, sizeof(ip));
        snprintf(buf, len, "[%s]:%u", ip, (unsigned)ntohs(in6.sin6_port));
    } else {
        snprintf(buf, len, "(family %d)", sa->sa_family);
    }
    return buf;
}

int cmn_addr_port(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET) {
        struct sockaddr_in in;
        memcpy(&in, sa, sizeof(in));
        return ntohs(in.sin_port);
    }
    if (sa->sa_family == AF_INET6) {
        struct sockaddr_in6 in6;
        memcpy(&in6, sa, sizeof(in6));
        return ntohs(in6.sin6_port);
    }
    return -1;
}

int cmn_endpoint_parse(const char *s, cmn_transport_t *t, struct sockaddr_storage *out,
                       cmn_errbuf_t *eb)
{
    const char *sep = s ? strstr(s, "://") : NULL;

    *t = CMN_TRANSPORT_TCP;
    if (!sep)
        return cmn_addr_parse(s, out, eb);
    if (sep - s == 3 && strncmp(s, "tcp", 3) == 0)
        *t = CMN_TRANSPORT_TCP;
    else if (sep - s == 3 && strncmp(s, "ucx", 3) == 0)
        *t = CMN_TRANSPORT_UCX;
    else
        return cmn_errf(eb, CMN_ECONFIG,
                        "address '%s': unknown transport '%.*s' (expected tcp:// or ucx://)", s,
                        (int)(sep - s), s);
    return cmn_addr_parse(sep + 3, out, eb);
}

const char *cmn_transport_name(cmn_transport_t t)
{
    return t == CMN_TRANSPORT_UCX ? "ucx" : "tcp";
}
