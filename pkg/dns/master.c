/* master.c — the zone as an RFC 1035 master file (`svcenv dns --zone`). */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <svcenv/alloc.h>
#include <svcenv/strbuf.h>

#include "dns_internal.h"

static const char *type_name(uint16_t t)
{
        switch (t) {
        case DNS_T_A:
                return "A";
        case DNS_T_AAAA:
                return "AAAA";
        case DNS_T_CNAME:
                return "CNAME";
        case DNS_T_PTR:
                return "PTR";
        case DNS_T_SRV:
                return "SRV";
        case DNS_T_TXT:
                return "TXT";
        case DNS_T_SOA:
                return "SOA";
        default:
                return "TYPE0";
        }
}

static void put_target(struct se_strbuf *sb, const uint8_t *name)
{
        char text[1024];
        if (dns_name_text(name, dns_wire_len(name), text, sizeof(text)) >= 0) {
                se_strbuf_puts(sb, text);
                se_strbuf_putc(sb, '.');
        }
}

static void put_rr(struct se_strbuf *sb, const char *owner, const struct dns_rr *rr, bool why)
{
        char addr[INET6_ADDRSTRLEN];
        se_strbuf_printf(sb, "%s.\t%u\tIN\t%s\t", owner, rr->ttl, type_name(rr->type));
        switch (rr->type) {
        case DNS_T_A:
        case DNS_T_AAAA:
                inet_ntop(rr->type == DNS_T_A ? AF_INET : AF_INET6, rr->fixed, addr, sizeof(addr));
                se_strbuf_puts(sb, addr);
                break;
        case DNS_T_TXT:
                se_strbuf_printf(sb, "\"%.*s\"", rr->fixed[0], (const char *)rr->fixed + 1);
                break;
        case DNS_T_SRV:
                se_strbuf_printf(sb, "%u %u %u ", dns_get16(rr->fixed), dns_get16(rr->fixed + 2),
                                 dns_get16(rr->fixed + 4));
                put_target(sb, rr->name);
                break;
        default:
                put_target(sb, rr->name);
                break;
        }
        if (why && rr->why)
                se_strbuf_printf(sb, "\t; %s", rr->why);
        se_strbuf_putc(sb, '\n');
}

static int cmp_node(const void *a, const void *b)
{
        const struct dns_node *x = *(const struct dns_node *const *)a;
        const struct dns_node *y = *(const struct dns_node *const *)b;
        return strcmp(x->key, y->key);
}

static const uint16_t type_order[] = { DNS_T_SOA, DNS_T_A,   DNS_T_AAAA, DNS_T_CNAME,
                                       DNS_T_PTR, DNS_T_SRV, DNS_T_TXT };

static void put_soa(struct se_strbuf *sb, const char *apex, const struct se_dns_zone *z)
{
        se_strbuf_printf(sb, "%s.\t%u\tIN\tSOA\tns.dns.%s. hostmaster.%s. %u 7200 1800 86400 %u\n",
                         apex, z->ttl < 300 ? z->ttl : 300, apex, apex, z->serial, z->ttl);
}

static int master(const struct se_dns_zone *z, bool why, char **ret)
{
        struct se_strbuf sb;
        se_strbuf_init(&sb, 0);
        const struct dns_node **v = se_calloc(z->n_nodes ? z->n_nodes : 1, sizeof(*v));
        if (!v)
                return -ENOMEM;
        memcpy(v, z->nodes, z->n_nodes * sizeof(*v));
        qsort(v, z->n_nodes, sizeof(*v), cmp_node);
        put_soa(&sb, z->zone, z);
        for (size_t i = 0; i < z->n_nodes; i++)
                for (size_t t = 0; t < SE_ARRAY_SIZE(type_order); t++)
                        for (uint32_t k = 0; k < v[i]->rrs.n; k++)
                                if (v[i]->rrs.v[k].type == type_order[t])
                                        put_rr(&sb, v[i]->key, &v[i]->rrs.v[k], why);
        if (!z->reverse_fallthrough) {
                put_soa(&sb, "in-addr.arpa", z);
                put_soa(&sb, "ip6.arpa", z);
        }
        free(v);
        if (se_strbuf_failed(&sb)) {
                se_strbuf_release(&sb);
                return -ENOMEM;
        }
        *ret = se_strbuf_detach(&sb, NULL);
        return *ret ? 0 : -ENOMEM;
}

int se_dns_zone_master(const struct se_dns_zone *z, char **ret)
{
        return master(z, false, ret);
}

int se_dns_zone_explain(const struct se_dns_zone *z, char **ret)
{
        return master(z, true, ret);
}
