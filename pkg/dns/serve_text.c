/* A DNS message as dig prints it, and a query made from a name and a type:
 * what `svcenv dns` needs around se_dns_answer. The decoder is separate from
 * pkg/dns's own on purpose: it reads any message (upstream answers too),
 * bounded, and prints what it cannot read instead of failing. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <svcenv/dns.h>
#include <svcenv/dns_serve.h>

#include "dns_internal.h"

static const struct {
        uint16_t code;
        const char *name;
} types[] = {
        { 1, "A" },       { 2, "NS" },     { 5, "CNAME" }, { 6, "SOA" },    { 12, "PTR" },
        { 13, "HINFO" },  { 15, "MX" },    { 16, "TXT" },  { 28, "AAAA" },  { 33, "SRV" },
        { 35, "NAPTR" },  { 41, "OPT" },   { 43, "DS" },   { 46, "RRSIG" }, { 47, "NSEC" },
        { 48, "DNSKEY" }, { 50, "NSEC3" }, { 64, "SVCB" }, { 65, "HTTPS" }, { 99, "SPF" },
        { 251, "IXFR" },  { 252, "AXFR" }, { 255, "ANY" }, { 257, "CAA" },
};

const char *se_dns_type_name(uint16_t type)
{
        for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
                if (types[i].code == type)
                        return types[i].name;
        return NULL;
}

int se_dns_type_code(const char *s)
{
        for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
                if (strcasecmp(types[i].name, s) == 0)
                        return types[i].code;
        if (strncasecmp(s, "TYPE", 4) == 0 && isdigit((unsigned char)s[4])) {
                unsigned long v = 0;
                for (const char *p = s + 4; *p; p++) {
                        if (!isdigit((unsigned char)*p) ||
                            (v = v * 10 + (unsigned)(*p - '0')) > 65535)
                                return -EINVAL;
                }
                return (int)v;
        }
        return -EINVAL;
}

static const char *class_name(uint16_t c, char *buf, size_t n)
{
        switch (c) {
        case 1:
                return "IN";
        case 3:
                return "CH";
        case 4:
                return "HS";
        case 255:
                return "ANY";
        default:
                snprintf(buf, n, "CLASS%u", c);
                return buf;
        }
}

static const char *rcode_name(unsigned r)
{
        static const char *const names[] = { "NOERROR", "FORMERR", "SERVFAIL", "NXDOMAIN",
                                             "NOTIMP",  "REFUSED", "YXDOMAIN", "YXRRSET",
                                             "NXRRSET", "NOTAUTH", "NOTZONE" };
        return r < sizeof(names) / sizeof(names[0]) ? names[r] : "RESERVED";
}

static const char *opcode_name(unsigned o)
{
        static const char *const names[] = { "QUERY",     "IQUERY", "STATUS",
                                             "RESERVED3", "NOTIFY", "UPDATE" };
        return o < sizeof(names) / sizeof(names[0]) ? names[o] : "RESERVED";
}

static uint16_t get16(const uint8_t *p)
{
        return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t get32(const uint8_t *p)
{
        return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Appends the name at *off in presentation form with the final dot and
 * moves *off past it. -EBADMSG when it is malformed. */
static int put_name(const uint8_t *msg, size_t len, size_t *off, struct se_strbuf *sb)
{
        struct dns_label_walk w;
        const uint8_t *label;
        int l;
        bool any = false;
        dns_label_walk_init(&w, msg, len, *off);
        while ((l = dns_label_walk_next(&w, &label)) > 0) {
                for (int i = 0; i < l; i++) {
                        unsigned char ch = label[i];
                        if (ch == '.' || ch == '\\' || ch == '"' || ch == ';' || ch == '(' ||
                            ch == ')' || ch == '@' || ch == '$')
                                se_strbuf_printf(sb, "\\%c", ch);
                        else if (ch <= ' ' || ch >= 0x7f)
                                se_strbuf_printf(sb, "\\%03u", ch);
                        else
                                se_strbuf_putc(sb, (char)ch);
                }
                se_strbuf_putc(sb, '.');
                any = true;
        }
        if (l < 0)
                return l;
        if (!any)
                se_strbuf_putc(sb, '.');
        *off = w.end;
        return 0;
}

static void put_txt(const uint8_t *p, size_t n, struct se_strbuf *sb)
{
        for (size_t i = 0; i < n;) {
                size_t l = p[i++];
                if (l > n - i)
                        l = n - i;
                se_strbuf_puts(sb, i > 1 ? " \"" : "\"");
                for (size_t k = 0; k < l; k++) {
                        unsigned char ch = p[i + k];
                        if (ch == '"' || ch == '\\')
                                se_strbuf_printf(sb, "\\%c", ch);
                        else if (ch < ' ' || ch >= 0x7f)
                                se_strbuf_printf(sb, "\\%03u", ch);
                        else
                                se_strbuf_putc(sb, (char)ch);
                }
                se_strbuf_putc(sb, '"');
                i += l;
        }
}

static void put_unknown(const uint8_t *p, size_t n, struct se_strbuf *sb)
{
        se_strbuf_printf(sb, "\\# %zu", n);
        if (n)
                se_strbuf_putc(sb, ' ');
        for (size_t i = 0; i < n; i++)
                se_strbuf_printf(sb, "%02X", p[i]);
}

/* rdata of one record at msg[off, off+rdlen). */
static int put_rdata(const uint8_t *msg, size_t len, uint16_t type, size_t off, size_t rdlen,
                     struct se_strbuf *sb)
{
        /* names in rdata may point back into the message, never past the record */
        (void)len;
        const uint8_t *p = msg + off;
        size_t end = off + rdlen, o = off;
        char ip[INET6_ADDRSTRLEN];
        int r;
        switch (type) {
        case 1:
        case 28:
                if (rdlen != (type == 1 ? 4u : 16u))
                        break;
                inet_ntop(type == 1 ? AF_INET : AF_INET6, p, ip, sizeof(ip));
                se_strbuf_puts(sb, ip);
                return 0;
        case 2:
        case 5:
        case 12:
                if ((r = put_name(msg, end, &o, sb)) < 0 || o != end)
                        return -EBADMSG;
                return 0;
        case 15:
                if (rdlen < 3)
                        break;
                se_strbuf_printf(sb, "%u ", get16(p));
                o += 2;
                if (put_name(msg, end, &o, sb) < 0 || o != end)
                        return -EBADMSG;
                return 0;
        case 33:
                if (rdlen < 7)
                        break;
                se_strbuf_printf(sb, "%u %u %u ", get16(p), get16(p + 2), get16(p + 4));
                o += 6;
                if (put_name(msg, end, &o, sb) < 0 || o != end)
                        return -EBADMSG;
                return 0;
        case 6:
                if (put_name(msg, end, &o, sb) < 0)
                        return -EBADMSG;
                se_strbuf_putc(sb, ' ');
                if (put_name(msg, end, &o, sb) < 0 || end - o != 20)
                        return -EBADMSG;
                se_strbuf_printf(sb, " %u %u %u %u %u", get32(msg + o), get32(msg + o + 4),
                                 get32(msg + o + 8), get32(msg + o + 12), get32(msg + o + 16));
                return 0;
        case 16:
                put_txt(p, rdlen, sb);
                return 0;
        default:
                break;
        }
        put_unknown(p, rdlen, sb);
        return 0;
}

static void put_type(uint16_t type, struct se_strbuf *sb)
{
        const char *t = se_dns_type_name(type);
        if (t)
                se_strbuf_puts(sb, t);
        else
                se_strbuf_printf(sb, "TYPE%u", type);
}

static int put_record(const uint8_t *msg, size_t len, size_t *off, struct se_strbuf *sb,
                      bool *was_opt)
{
        size_t start = sb->len;
        if (put_name(msg, len, off, sb) < 0 || len - *off < 10)
                return -EBADMSG;
        const uint8_t *h = msg + *off;
        uint16_t type = get16(h), klass = get16(h + 2), rdlen = get16(h + 8);
        uint32_t ttl = get32(h + 4);
        *off += 10;
        if (rdlen > len - *off)
                return -EBADMSG;
        *was_opt = type == 41;
        if (*was_opt) {
                se_strbuf_truncate(sb, start);
                se_strbuf_printf(sb, "; EDNS: version: %u, flags:%s; udp: %u\n", (ttl >> 16) & 0xff,
                                 ttl & 0x8000 ? " do" : "", klass);
                *off += rdlen;
                return 0;
        }
        char cbuf[16];
        se_strbuf_printf(sb, "\t%u\t%s\t", ttl, class_name(klass, cbuf, sizeof(cbuf)));
        put_type(type, sb);
        se_strbuf_putc(sb, '\t');
        int r = put_rdata(msg, len, type, *off, rdlen, sb);
        se_strbuf_putc(sb, '\n');
        *off += rdlen;
        return r;
}

int se_dns_msg_text(const uint8_t *msg, size_t len, bool with_id, struct se_strbuf *sb)
{
        if (len > SE_DNS_MAX_MSG)
                len = SE_DNS_MAX_MSG;
        if (len < 12) {
                se_strbuf_puts(sb, ";; message shorter than a header\n");
                return se_strbuf_failed(sb) ? -ENOMEM : -EBADMSG;
        }
        uint8_t f1 = msg[2], f2 = msg[3];
        uint16_t counts[4] = { get16(msg + 4), get16(msg + 6), get16(msg + 8), get16(msg + 10) };
        /* the OPT record's extended rcode bits: read below, printed here */
        se_strbuf_printf(sb, ";; ->>HEADER<<- opcode: %s, status: %s", opcode_name((f1 >> 3) & 0xf),
                         rcode_name(f2 & 0xf));
        if (with_id)
                se_strbuf_printf(sb, ", id: %u", get16(msg));
        se_strbuf_puts(sb, "\n;; flags:");
        static const struct {
                int byte;
                uint8_t bit;
                const char *name;
        } flags[] = { { 2, 0x80, "qr" }, { 2, 0x04, "aa" }, { 2, 0x02, "tc" }, { 2, 0x01, "rd" },
                      { 3, 0x80, "ra" }, { 3, 0x20, "ad" }, { 3, 0x10, "cd" } };
        for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++)
                if ((flags[i].byte == 2 ? f1 : f2) & flags[i].bit)
                        se_strbuf_printf(sb, " %s", flags[i].name);
        se_strbuf_printf(sb, "; QUERY: %u, ANSWER: %u, AUTHORITY: %u, ADDITIONAL: %u\n", counts[0],
                         counts[1], counts[2], counts[3]);

        static const char *const sections[] = { "QUESTION", "ANSWER", "AUTHORITY", "ADDITIONAL" };
        struct se_strbuf body, opt;
        se_strbuf_init(&body, 0);
        se_strbuf_init(&opt, 0);
        size_t off = 12;
        int rc = 0;
        for (int s = 0; s < 4 && rc == 0; s++) {
                if (!counts[s])
                        continue;
                struct se_strbuf rr;
                se_strbuf_init(&rr, 0);
                for (unsigned i = 0; i < counts[s] && rc == 0; i++) {
                        if (s == 0) {
                                se_strbuf_putc(&rr, ';');
                                if (put_name(msg, len, &off, &rr) < 0 || len - off < 4) {
                                        rc = -EBADMSG;
                                        break;
                                }
                                char cbuf[16];
                                se_strbuf_printf(
                                        &rr, "\t\t%s\t",
                                        class_name(get16(msg + off + 2), cbuf, sizeof(cbuf)));
                                put_type(get16(msg + off), &rr);
                                se_strbuf_putc(&rr, '\n');
                                off += 4;
                                continue;
                        }
                        bool is_opt = false;
                        struct se_strbuf one;
                        se_strbuf_init(&one, 0);
                        rc = put_record(msg, len, &off, &one, &is_opt);
                        /* dig shows the OPT record apart, before the question */
                        if (is_opt)
                                se_strbuf_printf(&opt, "\n;; OPT PSEUDOSECTION:\n%.*s",
                                                 (int)one.len, one.buf ? one.buf : "");
                        else
                                se_strbuf_add(&rr, one.buf, one.len);
                        se_strbuf_release(&one);
                }
                /* a section of only an OPT record prints no heading */
                if (rr.len)
                        se_strbuf_printf(&body, "\n;; %s SECTION:\n%.*s", sections[s], (int)rr.len,
                                         rr.buf);
                se_strbuf_release(&rr);
        }
        se_strbuf_add(sb, opt.buf, opt.len);
        se_strbuf_add(sb, body.buf, body.len);
        se_strbuf_release(&opt);
        se_strbuf_release(&body);
        if (rc < 0)
                se_strbuf_puts(sb, ";; malformed message: the rest is not shown\n");
        return se_strbuf_failed(sb) ? -ENOMEM : rc;
}

int se_dns_query_make(const char *name, const char *type, uint16_t id, uint16_t edns, uint8_t *out,
                      size_t cap, struct se_diag *diag)
{
        int t = se_dns_type_code(type);
        if (t < 0) {
                se_diag_set(diag, NULL, 0, 0, "unknown record type \"%.40s\"", type);
                return -EINVAL;
        }
        if (cap < 12 + SE_DNS_MAX_NAME + 4 + 11)
                return -ENOSPC;
        memset(out, 0, 12);
        out[0] = (uint8_t)(id >> 8);
        out[1] = (uint8_t)id;
        out[2] = 0x01; /* RD, as dig sends */
        out[5] = 1;
        size_t o = 12, total = 1;
        const char *p = name;
        if (strcmp(name, ".") != 0) {
                while (*p) {
                        const char *dot = strchr(p, '.');
                        size_t l = dot ? (size_t)(dot - p) : strlen(p);
                        if (l == 0 || l > 63 || (total += 1 + l) > SE_DNS_MAX_NAME) {
                                se_diag_set(
                                        diag, NULL, 0, 0,
                                        "\"%.80s\" is not a domain name (empty label or too long)",
                                        name);
                                return -EINVAL;
                        }
                        out[o++] = (uint8_t)l;
                        memcpy(out + o, p, l);
                        o += l;
                        p += l;
                        if (*p == '.')
                                p++;
                }
        }
        out[o++] = 0;
        out[o++] = (uint8_t)(t >> 8);
        out[o++] = (uint8_t)t;
        out[o++] = 0;
        out[o++] = 1; /* IN */
        if (edns) {
                out[11] = 1;
                const uint8_t opt[11] = { 0, 0, 41, (uint8_t)(edns >> 8), (uint8_t)edns, 0, 0, 0,
                                          0, 0, 0 };
                memcpy(out + o, opt, sizeof(opt));
                o += sizeof(opt);
        }
        return (int)o;
}
