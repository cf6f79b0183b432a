/* Test image server: answers HTTP on TCP and echoes UDP datagrams, on one
 * port (default 8080, or argv[1]). The HTTP body names the pod (hostname)
 * and the request line, so a client can tell which backend answered.
 * Single-threaded and small on purpose: it only has to be predictable. */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

enum { MAX_REQUEST = 4096 };

static int listen_on(int type, int port)
{
        int fd = socket(AF_INET6, type, 0);
        int off = 0, on = 1;
        if (fd < 0)
                return -1;
        /* dual-stack: one socket serves IPv4 and IPv6 clients */
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
        struct sockaddr_in6 addr = { .sin6_family = AF_INET6,
                                     .sin6_port = htons((unsigned short)port) };
        if (bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 ||
            (type == SOCK_STREAM && listen(fd, 64) < 0)) {
                close(fd);
                return -1;
        }
        return fd;
}

/* Reads the request head (bounded, 2 s) and answers with who we are. */
static void serve_http(int fd, const char *host)
{
        char req[MAX_REQUEST + 1];
        size_t got = 0;
        struct timeval tv = { .tv_sec = 2 };
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        while (got < MAX_REQUEST) {
                ssize_t r = read(fd, req + got, MAX_REQUEST - got);
                if (r <= 0)
                        break;
                got += (size_t)r;
                req[got] = '\0';
                if (strstr(req, "\r\n\r\n") || strstr(req, "\n\n"))
                        break;
        }
        req[got] = '\0';
        req[strcspn(req, "\r\n")] = '\0';
        char body[MAX_REQUEST + 512];
        int blen = snprintf(body, sizeof(body), "hello from %s\nrequest: %s\n", host, req);
        char head[256];
        int hlen = snprintf(head, sizeof(head),
                            "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n"
                            "Content-Length: %d\r\nConnection: close\r\n\r\n",
                            blen);
        if (write(fd, head, (size_t)hlen) == hlen)
                (void)!write(fd, body, (size_t)blen);
}

int main(int argc, char **argv)
{
        int port = argc > 1 ? atoi(argv[1]) : 8080;
        char host[256] = "unknown";
        if (port <= 0 || port > 65535) {
                fprintf(stderr, "echo: bad port %s\n", argv[1]);
                return 2;
        }
        gethostname(host, sizeof(host) - 1);
        signal(SIGPIPE, SIG_IGN);
        int tcp = listen_on(SOCK_STREAM, port), udp = listen_on(SOCK_DGRAM, port);
        if (tcp < 0 || udp < 0) {
                fprintf(stderr, "echo: cannot listen on port %d: %s\n", port, strerror(errno));
                return 1;
        }
        printf("echo: serving HTTP/TCP and UDP echo on port %d as %s\n", port, host);
        fflush(stdout);
        struct pollfd fds[2] = { { .fd = tcp, .events = POLLIN }, { .fd = udp, .events = POLLIN } };
        for (;;) {
                if (poll(fds, 2, -1) < 0)
                        continue;
                if (fds[0].revents & POLLIN) {
                        int c = accept(tcp, NULL, NULL);
                        if (c >= 0) {
                                serve_http(c, host);
                                close(c);
                        }
                }
                if (fds[1].revents & POLLIN) {
                        char buf[65536];
                        struct sockaddr_storage from;
                        socklen_t flen = sizeof(from);
                        ssize_t r =
                                recvfrom(udp, buf, sizeof(buf), 0, (struct sockaddr *)&from, &flen);
                        if (r >= 0)
                                sendto(udp, buf, (size_t)r, 0, (struct sockaddr *)&from, flen);
                }
        }
}
