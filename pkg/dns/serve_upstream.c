/* Upstream resolver addresses: --upstream values and resolv.conf. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <netinet/in.h>

#include <svcenv/dns_serve.h>
#include <svcenv/parse.h>

static int fill(struct se_dns_upstream *u, const char *ip, int port)
{
        memset(u, 0, sizeof(*u));
        struct sockaddr_in *s4 = (struct sockaddr_in *)&u->addr;
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&u->addr;
        if (inet_pton(AF_INET, ip, &s4->sin_addr) == 1) {
                s4->sin_family = AF_INET;
                s4->sin_port = htons((uint16_t)port);
                u->len = sizeof(*s4);
                snprintf(u->text, sizeof(u->text), "%s:%d", ip, port);
                return 0;
        }
        if (inet_pton(AF_INET6, ip, &s6->sin6_addr) == 1) {
                s6->sin6_family = AF_INET6;
                s6->sin6_port = htons((uint16_t)port);
                u->len = sizeof(*s6);
                char canon[INET6_ADDRSTRLEN];
                inet_ntop(AF_INET6, &s6->sin6_addr, canon, sizeof(canon));
                snprintf(u->text, sizeof(u->text), "[%s]:%d", canon, port);
                return 0;
        }
        return -EINVAL;
}

int se_dns_upstream_parse(const char *s, struct se_dns_upstream *ret, struct se_diag *diag)
{
        char host[INET6_ADDRSTRLEN + 1];
        const char *in = s;
        int port = 53;
        if (strncmp(s, "dns://", 6) == 0)
                s += 6;
        const char *port_text = NULL;
        size_t hlen;
        if (*s == '[') {
                const char *close = strchr(s, ']');
                if (!close)
                        goto bad;
                hlen = (size_t)(close - s - 1);
                s++;
                if (close[1] == ':')
                        port_text = close + 2;
                else if (close[1])
                        goto bad;
        } else {
                const char *colon = strchr(s, ':');
                /* one colon: IPv4:PORT; several: a bare IPv6 address */
                if (colon && !strchr(colon + 1, ':'))
                        port_text = colon + 1;
                hlen = port_text ? (size_t)(colon - s) : strlen(s);
        }
        if (hlen == 0 || hlen >= sizeof(host))
                goto bad;
        memcpy(host, s, hlen);
        host[hlen] = '\0';
        if (port_text && se_parse_int(port_text, 1, 65535, &port) < 0)
                goto bad;
        if (fill(ret, host, port) == 0)
                return 0;
bad:
        se_diag_set(diag, NULL, 0, 0, "upstream \"%.100s\": want IP, IP:PORT or [IPv6]:PORT", in);
        return -EINVAL;
}

int se_dns_resolv_conf_parse(const char *file, const char *text, size_t len,
                             struct se_dns_upstream *out, size_t cap, struct se_diag *diag)
{
        if (len > SE_DNS_MAX_RESOLV_CONF) {
                se_diag_set(diag, file, 0, 0, "larger than %zu bytes", SE_DNS_MAX_RESOLV_CONF);
                return -E2BIG;
        }
        size_t n = 0;
        unsigned line = 0;
        for (size_t pos = 0; pos < len;) {
                const char *p = text + pos;
                const char *nl = memchr(p, '\n', len - pos);
                size_t l = nl ? (size_t)(nl - p) : len - pos;
                pos += l + 1;
                line++;
                char buf[256];
                if (l >= sizeof(buf))
                        continue; /* no nameserver line is this long */
                memcpy(buf, p, l);
                buf[l] = '\0';
                buf[strcspn(buf, "#;")] = '\0';
                char *save = NULL;
                char *key = strtok_r(buf, " \t\r\f\v", &save);
                if (!key || strcmp(key, "nameserver") != 0)
                        continue;
                char *addr = strtok_r(NULL, " \t\r\f\v", &save);
                if (!addr) {
                        se_diag_set(diag, file, line, 0, "nameserver without an address");
                        return -EINVAL;
                }
                if (n >= cap)
                        continue;
                /* glibc takes a bare address, the port is always 53 */
                if (strchr(addr, '%'))
                        *strchr(addr, '%') = '\0'; /* a link-local zone: not kept */
                if (fill(&out[n], addr, 53) < 0) {
                        se_diag_set(diag, file, line, 0,
                                    "nameserver \"%.60s\" is not an IP address", addr);
                        return -EINVAL;
                }
                n++;
        }
        return (int)n;
}
