/* svcenv trace on the node: which endpoint the kernel's ClientIP affinity
 * state already holds a client for (I/O: /proc and the nft tool). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <svcenv/proxy.h>
#include <svcenv/proxy_trace.h>
#include <svcenv/strbuf.h>

/* Caps what is read of one list or set (a client is one short line). */
#define MAX_STATE_BYTES (64u << 20)

/* Whether text holds word as a whole token (separated by space, tab,
 * newline, ',', '{', '}'). */
static bool has_token(const char *text, size_t len, const char *word)
{
        size_t wl = strlen(word);
        const char *end = text + len;
        for (const char *p = text; p + wl <= end; p++) {
                p = memmem(p, (size_t)(end - p), word, wl);
                if (!p)
                        return false;
                bool before = p == text || strchr(" \t\n,{=", p[-1]);
                bool after = p + wl == end || strchr(" \t\n,}", p[wl]);
                if (before && after)
                        return true;
        }
        return false;
}

/* iptables: xt_recent's list of the chain ("src=IP ttl: …" per client) */
static int xt_recent(const char *chain, const char *from, bool *held)
{
        char path[128];
        snprintf(path, sizeof(path), "/proc/net/xt_recent/%s", chain);
        FILE *f = fopen(path, "re");
        if (!f)
                return -errno;
        char line[256], want[80];
        snprintf(want, sizeof(want), "src=%s ", from);
        size_t read = 0;
        *held = false;
        while (!*held && fgets(line, sizeof(line), f) && (read += strlen(line)) < MAX_STATE_BYTES)
                *held = strncmp(line, want, strlen(want)) == 0;
        fclose(f);
        return 0;
}

/* nftables: the endpoint's affinity set in table svcenv */
static int nft_set(const char *family, const char *chain, const char *from, bool *held)
{
        static const char prefix[] = "endpoint-";
        char set[400];
        if (strncmp(chain, prefix, sizeof(prefix) - 1) != 0)
                return -EINVAL;
        snprintf(set, sizeof(set), "affinity-%s", chain + sizeof(prefix) - 1);
        const char *argv[] = { "nft", "list", "set", family, "svcenv", set, NULL };
        struct se_strbuf out;
        se_strbuf_init(&out, MAX_STATE_BYTES);
        char err[256] = "";
        int r = se_proxy_run(argv, &out, err, sizeof(err));
        /* the tool says "No such file or directory" for a missing set */
        if (r == -EPROTO && strstr(err, "No such file"))
                r = -ENOENT;
        *held = r == 0 && has_token(out.buf ? out.buf : "", out.len, from);
        se_strbuf_release(&out);
        return r;
}

int se_proxy_trace_read_affinity(struct se_proxy_trace *tr, const struct se_proxy_trace_query *q)
{
        if (!tr->affinity || tr->verdict != SE_PROXY_TRACE_DNAT)
                return 0;
        char from[64];
        se_ip_format(&q->from, from, sizeof(from));
        const char *family = q->from.family == SE_IPV6 ? "ip6" : "ip";
        for (uint32_t i = 0; i < tr->n_endpoints; i++) {
                struct se_proxy_trace_endpoint *e = &tr->endpoints[i];
                if (!e->chain)
                        continue;
                int r = tr->backend == SE_PROXY_TRACE_NFTABLES ?
                                nft_set(family, e->chain, from, &e->pinned) :
                                xt_recent(e->chain, from, &e->pinned);
                if (r < 0)
                        return r;
        }
        tr->affinity_read = true;
        return 0;
}
