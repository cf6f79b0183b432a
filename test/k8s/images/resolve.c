/* Test image resolver client: looks a name up as a program in the pod
 * would, with libc's stub resolver and the pod's /etc/resolv.conf (search
 * path, ndots), and prints the answers, one a line. busybox's nslookup is
 * no stand-in: it walks the search path only for names without a dot.
 *
 *   resolve NAME            getaddrinfo, IPv4: one address a line
 *   resolve -t a|srv NAME   res_search: A addresses, or SRV records as
 *                           "PRIORITY WEIGHT PORT TARGET"
 *
 * Exit status: 0 answers, 2 the name does not exist (prints NXDOMAIN),
 * 1 any other failure (one line on stderr). */
#include <arpa/inet.h>
#include <arpa/nameser.h>
#include <netdb.h>
#include <netinet/in.h>
#include <resolv.h>
#include <stdio.h>
#include <string.h>

enum { MAX_ANSWER = 65535 };

static int by_getaddrinfo(const char *name)
{
        struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *res, *ai;
        int r = getaddrinfo(name, NULL, &hints, &res);
        if (r == EAI_NONAME) {
                printf("NXDOMAIN\n");
                return 2;
        }
        if (r) {
                fprintf(stderr, "resolve: %s: %s\n", name, gai_strerror(r));
                return 1;
        }
        for (ai = res; ai; ai = ai->ai_next) {
                char ip[INET_ADDRSTRLEN];
                const struct sockaddr_in *sin = (const struct sockaddr_in *)ai->ai_addr;
                if (inet_ntop(AF_INET, &sin->sin_addr, ip, sizeof(ip)))
                        printf("%s\n", ip);
        }
        freeaddrinfo(res);
        return 0;
}

static int by_res_search(const char *name, int type)
{
        static unsigned char answer[MAX_ANSWER];
        int len = res_search(name, ns_c_in, type, answer, sizeof(answer));
        if (len < 0) {
                if (h_errno == HOST_NOT_FOUND) {
                        printf("NXDOMAIN\n");
                        return 2;
                }
                fprintf(stderr, "resolve: %s: %s\n", name, hstrerror(h_errno));
                return 1;
        }
        ns_msg msg;
        if (ns_initparse(answer, len, &msg) < 0) {
                fprintf(stderr, "resolve: %s: unparsable answer\n", name);
                return 1;
        }
        for (int i = 0; i < ns_msg_count(msg, ns_s_an); i++) {
                ns_rr rr;
                if (ns_parserr(&msg, ns_s_an, i, &rr) < 0 || (int)ns_rr_type(rr) != type)
                        continue;
                const unsigned char *d = ns_rr_rdata(rr);
                if (type == ns_t_a && ns_rr_rdlen(rr) == 4) {
                        printf("%u.%u.%u.%u\n", d[0], d[1], d[2], d[3]);
                } else if (type == ns_t_srv && ns_rr_rdlen(rr) > 6) {
                        char target[NS_MAXDNAME];
                        if (dn_expand(ns_msg_base(msg), ns_msg_end(msg), d + 6, target,
                                      sizeof(target)) < 0)
                                continue;
                        printf("%u %u %u %s\n", ns_get16(d), ns_get16(d + 2), ns_get16(d + 4),
                               target);
                }
        }
        return 0;
}

int main(int argc, char **argv)
{
        if (argc == 2)
                return by_getaddrinfo(argv[1]);
        if (argc == 4 && strcmp(argv[1], "-t") == 0) {
                if (strcmp(argv[2], "a") == 0)
                        return by_res_search(argv[3], ns_t_a);
                if (strcmp(argv[2], "srv") == 0)
                        return by_res_search(argv[3], ns_t_srv);
        }
        fprintf(stderr, "usage: resolve NAME | resolve -t a|srv NAME\n");
        return 1;
}
