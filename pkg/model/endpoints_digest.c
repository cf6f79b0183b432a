/* The digest of an Endpoints' subsets (model.h): a canonical serialisation
 * that is equal exactly when the Endpoints controller's equality says the
 * subsets are equal, hashed. The controller caches only the digest of what
 * it reads and compares it with the digest of what it would write. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <svcenv/alloc.h>
#include <svcenv/hash.h>
#include <svcenv/model.h>
#include <svcenv/strbuf.h>

/* Bump when the serialisation changes (digests are never persisted, but a
 * version keeps this from colliding with another use of the same bytes). */
static const char digest_tag[] = "svcenv.endpoints.subsets.v1";

static void put_u64(struct se_strbuf *b, uint64_t v)
{
        uint8_t x[8];
        for (int i = 0; i < 8; i++)
                x[i] = (uint8_t)(v >> (56 - 8 * i));
        se_strbuf_append(b, x, sizeof(x));
}

/* A string where absent and "" are the same (hostname, nodeName, the
 * targetRef fields, port names). Length-prefixed, so the whole is
 * self-delimiting and concatenation stays unambiguous. */
static void put_estr(struct se_strbuf *b, const char *s)
{
        size_t n = s ? strlen(s) : 0;
        put_u64(b, n);
        se_strbuf_append(b, s ? s : "", n);
}

/* A string where absent is not "" (ip, appProtocol). */
static void put_nstr(struct se_strbuf *b, const char *s)
{
        se_strbuf_putc(b, s ? 1 : 0);
        if (s)
                put_estr(b, s);
}

static int cmp_nstr(const char *a, const char *b)
{
        if (!a || !b)
                return (a != NULL) - (b != NULL);
        return strcmp(a, b);
}

int se_endpoint_port_cmp(const struct se_endpoint_port *a, const struct se_endpoint_port *b)
{
        int c = strcmp(a->name ? a->name : "", b->name ? b->name : "");
        if (c)
                return c;
        if (a->port != b->port)
                return a->port < b->port ? -1 : 1;
        if (a->protocol != b->protocol)
                return a->protocol < b->protocol ? -1 : 1;
        return cmp_nstr(a->app_protocol, b->app_protocol);
}

static int cmp_port_ptr(const void *a, const void *b)
{
        return se_endpoint_port_cmp(*(const struct se_endpoint_port *const *)a,
                                    *(const struct se_endpoint_port *const *)b);
}

static void put_addresses(struct se_strbuf *b, const struct se_endpoint_address *a, uint32_t n)
{
        put_u64(b, n);
        for (uint32_t i = 0; i < n; i++) {
                const struct se_object_ref *r = a[i].target_ref;
                put_nstr(b, a[i].ip);
                put_estr(b, a[i].hostname);
                put_estr(b, a[i].node_name);
                se_strbuf_putc(b, r ? 1 : 0);
                if (!r)
                        continue;
                /* resourceVersion left out: the controller ignores it */
                put_estr(b, r->kind);
                put_estr(b, r->namespace);
                put_estr(b, r->name);
                put_estr(b, r->uid);
        }
}

struct entry {
        const struct se_endpoint_port *first; /* smallest port; NULL: none */
        size_t off, len;
        const char *base;
};

static int cmp_entry(const void *pa, const void *pb)
{
        const struct entry *a = pa, *b = pb;
        if (!a->first || !b->first)
                return (a->first != NULL) - (b->first != NULL);
        int c = se_endpoint_port_cmp(a->first, b->first);
        if (c)
                return c;
        /* a tie on the first port (only with duplicate service port names):
         * by content, so the digest does not depend on the input order */
        size_t n = a->len < b->len ? a->len : b->len;
        c = memcmp(a->base + a->off, b->base + b->off, n);
        if (c)
                return c;
        return (a->len > b->len) - (a->len < b->len);
}

int se_endpoints_digest(const struct se_endpoints *ep, uint8_t out[SE_ENDPOINTS_DIGEST_LEN])
{
        if (ep->slim) {
                memcpy(out, ep->digest, SE_ENDPOINTS_DIGEST_LEN);
                return 0;
        }
        uint32_t n = ep->n_subsets, max_ports = 0;
        for (uint32_t i = 0; i < n; i++)
                if (ep->subsets[i].n_ports > max_ports)
                        max_ports = ep->subsets[i].n_ports;
        _cleanup_strbuf_ struct se_strbuf b;
        se_strbuf_init(&b, 0);
        _cleanup_free_ struct entry *e = se_calloc(n ? n : 1, sizeof(*e));
        _cleanup_free_ const struct se_endpoint_port **pp =
                se_calloc(max_ports ? max_ports : 1, sizeof(*pp));
        _cleanup_free_ struct se_sha256_part *parts = se_calloc((size_t)n + 2, sizeof(*parts));
        if (!e || !pp || !parts)
                return -ENOMEM;
        for (uint32_t i = 0; i < n; i++) {
                const struct se_endpoint_subset *s = &ep->subsets[i];
                for (uint32_t k = 0; k < s->n_ports; k++)
                        pp[k] = &s->ports[k];
                qsort(pp, s->n_ports, sizeof(*pp), cmp_port_ptr);
                e[i].first = s->n_ports ? pp[0] : NULL;
                e[i].off = b.len;
                put_u64(&b, s->n_ports);
                for (uint32_t k = 0; k < s->n_ports; k++) {
                        put_estr(&b, pp[k]->name);
                        put_u64(&b, (uint32_t)pp[k]->port);
                        put_u64(&b, (uint64_t)pp[k]->protocol);
                        put_nstr(&b, pp[k]->app_protocol);
                }
                put_addresses(&b, s->addresses, s->n_addresses);
                put_addresses(&b, s->not_ready, s->n_not_ready);
                e[i].len = b.len - e[i].off;
        }
        uint8_t count[8];
        for (int i = 0; i < 8; i++)
                count[i] = (uint8_t)((uint64_t)n >> (56 - 8 * i));
        if (se_strbuf_failed(&b))
                return se_strbuf_failed(&b) == -E2BIG ? -ENOMEM : se_strbuf_failed(&b);
        for (uint32_t i = 0; i < n; i++)
                e[i].base = b.buf;
        qsort(e, n, sizeof(*e), cmp_entry);
        parts[0] = (struct se_sha256_part){ digest_tag, sizeof(digest_tag) };
        parts[1] = (struct se_sha256_part){ count, sizeof(count) };
        for (uint32_t i = 0; i < n; i++)
                parts[i + 2] = (struct se_sha256_part){ b.buf + e[i].off, e[i].len };
        uint8_t sum[SE_SHA256_LEN];
        int r = se_sha256_parts(parts, (size_t)n + 2, sum);
        if (r < 0)
                return r;
        memcpy(out, sum, SE_ENDPOINTS_DIGEST_LEN);
        return 0;
}

size_t se_endpoints_n_addresses(const struct se_endpoints *ep)
{
        if (ep->slim)
                return ep->n_addresses;
        size_t n = 0;
        for (uint32_t i = 0; i < ep->n_subsets; i++)
                n += (size_t)ep->subsets[i].n_addresses + ep->subsets[i].n_not_ready;
        return n;
}
