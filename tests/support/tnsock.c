#include "tnsock.h"

#include <check.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

int tn_listen_any(int *port)
{
    struct sockaddr_in a = {0};
    socklen_t al = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    ck_assert_int_ge(fd, 0);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    ck_assert_int_eq(listen(fd, 64), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &al), 0);
    *port = ntohs(a.sin_port);
    return fd;
}
