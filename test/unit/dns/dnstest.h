/* dnstest.h — what the DNS unit tests share: a cluster from YAML, queries
 * built by hand, and a decoder of responses (independent of pkg/dns) that
 * renders them as text in the style of dig, one record per line:
 *
 *   NOERROR qr aa rd
 *   AN kubernetes.default.svc.cluster.local. 5 A 10.96.0.1
 *   NS cluster.local. 5 SOA ns.dns.cluster.local. hostmaster.cluster.local. ...
 *   AR . OPT 1232 do
 *
 * Static functions only: each test binary includes it once. */
#ifndef SVCENV_TEST_DNSTEST_H
#define SVCENV_TEST_DNSTEST_H

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <svcenv/dns.h>
#include <svcenv/manifest.h>

#include "store_yaml.h"

#define T_SERIAL 1700000000u

static SE_UNUSED struct se_dns_zone *t_zone(const char *yaml, const struct se_dns_options *o)
{
        struct se_store *s = t_load(yaml);
        struct se_dns_options def = { .ttl = 5 };
        if (!o)
                o = &def;
        struct se_dns_options with_serial = *o;
        with_serial.serial = T_SERIAL;
        struct se_dns_zone *z = NULL;
        struct se_diag d = { 0 };
        int r = se_dns_zone_build(s, &with_serial, &z, &d);
        if (r < 0)
                fail_msg("zone: %d: %s", r, d.text);
        se_store_free(s);
        return z;
}

/* A query for name (dotted, case kept) and type; edns < 0: no OPT. */
static SE_UNUSED size_t t_query(uint8_t *buf, const char *name, uint16_t type, int edns,
                                bool do_bit)
{
        size_t o = 12;
        memset(buf, 0, 12);
        buf[0] = 0x12;
        buf[1] = 0x34;
        buf[2] = 0x01; /* RD */
        buf[5] = 1;
        const char *p = name;
        while (*p) {
                const char *dot = strchr(p, '.');
                size_t n = dot ? (size_t)(dot - p) : strlen(p);
                if (n == 0)
                        break;
                buf[o++] = (uint8_t)n;
                memcpy(buf + o, p, n);
                o += n;
                p += n + (dot ? 1 : 0);
        }
        buf[o++] = 0;
        buf[o++] = (uint8_t)(type >> 8);
        buf[o++] = (uint8_t)type;
        buf[o++] = 0;
        buf[o++] = 1;
        if (edns >= 0) {
                buf[11] = 1;
                uint8_t opt[11] = {
                        0, 0, 41, (uint8_t)(edns >> 8), (uint8_t)edns, 0, 0, do_bit ? 0x80 : 0,
                        0, 0, 0
                };
                memcpy(buf + o, opt, 11);
                o += 11;
        }
        return o;
}

/* ---- the decoder ---- */

struct t_rd {
        const uint8_t *m;
        size_t len, off;
        bool bad;
};

static SE_UNUSED void t_name(struct t_rd *r, size_t *off, char *out, size_t cap)
{
        size_t o = 0, pos = *off, end = 0;
        int hops = 0;
        out[0] = '\0';
        for (;;) {
                if (pos >= r->len || hops > 100) {
                        r->bad = true;
                        return;
                }
                uint8_t c = r->m[pos];
                if ((c & 0xc0) == 0xc0) {
                        if (pos + 1 >= r->len) {
                                r->bad = true;
                                return;
                        }
                        if (!end)
                                end = pos + 2;
                        size_t to = (size_t)(c & 0x3f) << 8 | r->m[pos + 1];
                        if (to >= pos) {
                                r->bad = true;
                                return;
                        }
                        pos = to;
                        hops++;
                        continue;
                }
                if (c == 0) {
                        pos++;
                        break;
                }
                if (pos + 1 + c > r->len || o + c + 2 >= cap) {
                        r->bad = true;
                        return;
                }
                memcpy(out + o, r->m + pos + 1, c);
                o += c;
                out[o++] = '.';
                pos += 1 + (size_t)c;
        }
        if (o == 0)
                out[o++] = '.';
        out[o] = '\0';
        *off = end ? end : pos;
}

static SE_UNUSED unsigned t_u16(const uint8_t *p)
{
        return (unsigned)(p[0] << 8 | p[1]);
}
static SE_UNUSED unsigned long t_u32(const uint8_t *p)
{
        return (unsigned long)p[0] << 24 | (unsigned long)p[1] << 16 | (unsigned long)p[2] << 8 |
               p[3];
}

static SE_UNUSED const char *t_type(unsigned t)
{
        static char buf[16];
        switch (t) {
        case 1:
                return "A";
        case 2:
                return "NS";
        case 5:
                return "CNAME";
        case 6:
                return "SOA";
        case 12:
                return "PTR";
        case 16:
                return "TXT";
        case 28:
                return "AAAA";
        case 33:
                return "SRV";
        case 41:
                return "OPT";
        default:
                snprintf(buf, sizeof(buf), "TYPE%u", t);
                return buf;
        }
}

static SE_UNUSED const char *t_rcode(unsigned rc)
{
        static const char *const names[] = { "NOERROR",  "FORMERR", "SERVFAIL",
                                             "NXDOMAIN", "NOTIMP",  "REFUSED" };
        return rc < 6 ? names[rc] : "RCODE?";
}

/* The response as text (new string); fails the test when it does not
 * decode or has bytes left over. */
static SE_UNUSED char *t_render(const uint8_t *m, size_t len)
{
        struct t_rd r = { .m = m, .len = len, .off = 12 };
        char *out = NULL;
        size_t outlen = 0;
        FILE *f = open_memstream(&out, &outlen);
        assert_true(len >= 12);
        fprintf(f, "%s%s%s%s%s%s%s", t_rcode(m[3] & 0xf), m[2] & 0x80 ? " qr" : "",
                m[2] & 0x04 ? " aa" : "", m[2] & 0x02 ? " tc" : "", m[2] & 0x01 ? " rd" : "",
                m[3] & 0x80 ? " ra" : "", m[3] & 0x10 ? " cd" : "");
        fputc('\n', f);
        char name[1100], t1[1100], t2[1100];
        for (unsigned i = 0; i < t_u16(m + 4); i++) {
                t_name(&r, &r.off, name, sizeof(name));
                assert_false(r.bad);
                assert_true(r.off + 4 <= len);
                r.off += 4;
        }
        static const char *const sec[] = { "AN", "NS", "AR" };
        for (int s = 0; s < 3; s++) {
                for (unsigned i = 0; i < t_u16(m + 6 + 2 * s); i++) {
                        t_name(&r, &r.off, name, sizeof(name));
                        assert_false(r.bad);
                        assert_true(r.off + 10 <= len);
                        unsigned type = t_u16(m + r.off), klass = t_u16(m + r.off + 2);
                        unsigned long ttl = t_u32(m + r.off + 4);
                        size_t rdlen = t_u16(m + r.off + 8), rd = r.off + 10;
                        assert_true(rd + rdlen <= len);
                        r.off = rd + rdlen;
                        if (type == 41) {
                                fprintf(f, "%s %s OPT %u%s%s rcode-hi=%lu\n", sec[s], name, klass,
                                        ttl & 0x8000 ? " do" : "", rdlen ? " opts" : "", ttl >> 24);
                                continue;
                        }
                        fprintf(f, "%s %s %lu %s ", sec[s], name, ttl, t_type(type));
                        char a[64];
                        size_t p = rd;
                        switch (type) {
                        case 1:
                                assert_int_equal(rdlen, 4);
                                fputs(inet_ntop(AF_INET, m + rd, a, sizeof(a)), f);
                                break;
                        case 28:
                                assert_int_equal(rdlen, 16);
                                fputs(inet_ntop(AF_INET6, m + rd, a, sizeof(a)), f);
                                break;
                        case 5:
                        case 12:
                        case 2:
                                t_name(&r, &p, t1, sizeof(t1));
                                assert_int_equal(p, rd + rdlen);
                                fputs(t1, f);
                                break;
                        case 33:
                                assert_true(rdlen > 6);
                                p += 6;
                                t_name(&r, &p, t1, sizeof(t1));
                                assert_int_equal(p, rd + rdlen);
                                fprintf(f, "%u %u %u %s", t_u16(m + rd), t_u16(m + rd + 2),
                                        t_u16(m + rd + 4), t1);
                                break;
                        case 6:
                                t_name(&r, &p, t1, sizeof(t1));
                                t_name(&r, &p, t2, sizeof(t2));
                                assert_int_equal(p + 20, rd + rdlen);
                                fprintf(f, "%s %s %lu %lu %lu %lu %lu", t1, t2, t_u32(m + p),
                                        t_u32(m + p + 4), t_u32(m + p + 8), t_u32(m + p + 12),
                                        t_u32(m + p + 16));
                                break;
                        case 16:
                                fprintf(f, "\"%.*s\"", m[rd], (const char *)m + rd + 1);
                                break;
                        default:
                                fprintf(f, "(%zu bytes)", rdlen);
                        }
                        assert_false(r.bad);
                        fputc('\n', f);
                }
        }
        assert_int_equal(r.off, len);
        fclose(f);
        return out;
}

/* The raw response to a query; its length (0 when not a reply). */
static SE_UNUSED size_t t_raw(const struct se_dns_zone *z, const char *name, uint16_t type,
                              int edns, enum se_dns_transport tr, uint8_t *out, size_t cap)
{
        uint8_t q[600];
        size_t qlen = t_query(q, name, type, edns, false), outlen = 0;
        struct se_dns_client c = { .transport = tr };
        if (se_dns_answer(z, &c, q, qlen, out, cap, &outlen) != SE_DNS_REPLY)
                return 0;
        return outlen;
}

/* Asks z over UDP (EDNS size edns, < 0: none) and renders the answer;
 * "FORWARD" or "DROP" for those verdicts. */
static SE_UNUSED char *t_ask_ex(const struct se_dns_zone *z, const char *name, uint16_t type,
                                int edns, enum se_dns_transport tr)
{
        uint8_t q[600], out[65535];
        size_t qlen = t_query(q, name, type, edns, false), outlen = 99;
        struct se_dns_client c = { .transport = tr };
        enum se_dns_verdict v = se_dns_answer(z, &c, q, qlen, out, sizeof(out), &outlen);
        if (v == SE_DNS_FORWARD) {
                assert_int_equal(outlen, 0);
                return strdup("FORWARD");
        }
        if (v == SE_DNS_DROP)
                return strdup("DROP");
        assert_int_equal(out[0], 0x12);
        assert_int_equal(out[1], 0x34);
        return t_render(out, outlen);
}

static SE_UNUSED char *t_ask(const struct se_dns_zone *z, const char *name, uint16_t type)
{
        return t_ask_ex(z, name, type, -1, SE_DNS_UDP);
}

#define assert_answer(z, name, type, want)                                    \
 do {                                                                         \
  char *got_ = t_ask((z), (name), (type));                                    \
  if (strcmp(got_, (want)) != 0)                                              \
   fail_msg("%s %u:\n--- want\n%s--- got\n%s", (name), (type), (want), got_); \
  free(got_);                                                                 \
 } while (0)

#endif
