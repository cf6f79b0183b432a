/* The service variables of a namespace, rendered once for the patch: each
 * variable's JSON, and that JSON in base64 at each of the three alignments
 * a base64 stream can be at when it reaches the variable, so that writing a
 * patch is mostly memcpy (see cache.c for why and when). Also the base64
 * stream the patch is written through. The same rendering serves the
 * uncached path (no base64 forms), so both give the same bytes. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <svcenv/alloc.h>
#include <svcenv/hash.h>
#include <svcenv/hashmap.h>

#include "admission_internal.h"

/* Appends {"name":...,"value":...}. */
static void put_var(struct se_strbuf *sb, const char *name, const char *value)
{
        se_strbuf_puts(sb, "{\"name\":");
        se_json_put_string(sb, name);
        se_strbuf_puts(sb, ",\"value\":");
        se_json_put_string(sb, value);
        se_strbuf_putc(sb, '}');
}

static size_t exec_size(const char *name, const char *value)
{
        return strlen(name) + 1 + (value ? strlen(value) : 0) + 1 + sizeof(char *);
}

static size_t b64_len(size_t n)
{
        return (n + 2) / 3 * 4;
}

struct nsvars *admission_nsvars_unref(struct nsvars *nv)
{
        if (!nv || atomic_fetch_sub(&nv->refs, 1) != 1)
                return NULL;
        se_env_list_release(&nv->list);
        se_hashmap_release(&nv->index);
        free(nv->run_blob[0]);
        free(nv->run_blob[1]);
        free(nv->v);
        free(nv->blob);
        free(nv->key);
        free(nv);
        return NULL;
}

/* nv->run[mode]: its JSON, then its base64 at the three alignments. */
static int make_run(struct nsvars *nv, int mode)
{
        struct se_strbuf sb;
        se_strbuf_init(&sb, 0);
        admission_render_run(&sb, nv, "containers", 0, mode == RUN_WHOLE);
        size_t json_len = sb.len, off[3];
        se_strbuf_putc(&sb, '\0');
        for (unsigned h = 0; h < 3; h++) {
                size_t whole = (json_len - h) / 3 * 3; /* json_len > 2 */
                off[h] = sb.len;
                nv->run[mode].b64_len[h] = b64_len(whole);
                if (se_strbuf_grow(&sb, b64_len(whole) + 1) < 0)
                        break;
                se_base64_encode(sb.buf + h, whole, sb.buf + sb.len);
                sb.len += b64_len(whole) + 1;
        }
        if (se_strbuf_failed(&sb)) {
                int r = se_strbuf_failed(&sb);
                se_strbuf_release(&sb);
                return r;
        }
        sb.buf[sb.len] = '\0';
        size_t len = 0;
        char *blob = se_strbuf_detach(&sb, &len);
        if (!blob)
                return -ENOMEM;
        nv->run_blob[mode] = blob;
        nv->run[mode].json = blob;
        nv->run[mode].json_len = json_len;
        for (unsigned h = 0; h < 3; h++)
                nv->run[mode].b64[h] = blob + off[h];
        nv->bytes += len;
        return 0;
}

int admission_nsvars_build(const struct se_envvars_input *in, const char *ns, bool links,
                           bool with_b64, struct nsvars **ret)
{
        *ret = NULL;
        struct nsvars *nv = se_calloc(1, sizeof(*nv));
        if (!nv)
                return -ENOMEM;
        atomic_init(&nv->refs, 1);
        se_env_list_init(&nv->list);
        nv->index = (struct se_hashmap)SE_HASHMAP_INIT;
        int r = se_envvars_services(in, ns, links, &nv->list);
        if (r < 0) {
                free(nv);
                return r;
        }
        nv->n = nv->list.n;
        size_t *off = nv->n ? se_calloc(nv->n * 4, sizeof(*off)) : NULL;
        nv->v = nv->n ? se_calloc(nv->n, sizeof(*nv->v)) : NULL;
        struct se_strbuf sb;
        se_strbuf_init(&sb, 0);
        if (nv->n && (!off || !nv->v)) {
                free(off);
                admission_nsvars_unref(nv);
                return -ENOMEM;
        }
        int index_err = 0;
        /* offsets first: the buffer moves while it grows */
        for (size_t i = 0; i < nv->n; i++) {
                const struct se_env_entry *e = &nv->list.items[i];
                struct rvar *v = &nv->v[i];
                v->name = e->name;
                v->value = e->value;
                v->exec_size = exec_size(e->name, e->value);
                nv->exec_total += v->exec_size;
                /* the index pays off only when reused (cached entries) */
                if (with_b64 &&
                    se_hashmap_put(&nv->index, e->name, (void *)(uintptr_t)(i + 1), NULL) < 0)
                        index_err = -ENOMEM;
                off[i * 4] = sb.len;
                put_var(&sb, e->name, e->value);
                v->json_len = sb.len - off[i * 4];
                se_strbuf_putc(&sb, '\0');
        }
        for (unsigned h = 0; with_b64 && h < 3; h++) {
                for (size_t i = 0; i < nv->n; i++) {
                        struct rvar *v = &nv->v[i];
                        size_t whole = v->json_len < h ? 0 : (v->json_len - h) / 3 * 3;
                        off[i * 4 + 1 + h] = sb.len;
                        v->b64_len[h] = b64_len(whole);
                        if (se_strbuf_grow(&sb, v->b64_len[h] + 1) < 0)
                                break;
                        /* the JSON is in sb too: encode from its offset */
                        se_base64_encode(sb.buf + off[i * 4] + h, whole, sb.buf + sb.len);
                        sb.len += v->b64_len[h] + 1;
                }
        }
        r = index_err ? index_err : se_strbuf_failed(&sb);
        if (r < 0) {
                se_strbuf_release(&sb);
                free(off);
                admission_nsvars_unref(nv);
                return r;
        }
        sb.buf[sb.len] = '\0';
        nv->blob = se_strbuf_detach(&sb, &nv->bytes);
        if (!nv->blob) {
                free(off);
                admission_nsvars_unref(nv);
                return -ENOMEM;
        }
        for (size_t i = 0; i < nv->n; i++) {
                nv->v[i].json = nv->blob + off[i * 4];
                for (unsigned h = 0; with_b64 && h < 3; h++)
                        nv->v[i].b64[h] = nv->blob + off[i * 4 + 1 + h];
        }
        free(off);
        nv->indexed = with_b64;
        nv->bytes += sizeof(*nv) + nv->n * sizeof(*nv->v) + nv->list.arena.total +
                     nv->list.alloc * sizeof(*nv->list.items) +
                     nv->n * 2 * sizeof(struct se_hashmap_slot);
        for (int m = 0; with_b64 && nv->n && m < 2; m++) {
                r = make_run(nv, m);
                if (r < 0) {
                        admission_nsvars_unref(nv);
                        return r;
                }
        }
        *ret = nv;
        return 0;
}

/* --- base64 output stream --- */

void admission_b64w_add(struct b64w *w, const void *data, size_t n)
{
        const unsigned char *p = data;
        w->raw += n;
        while (w->npend && n) {
                w->pend[w->npend++] = *p++;
                n--;
                if (w->npend == 3) {
                        if (se_strbuf_grow(w->out, 5) == 0) {
                                se_base64_encode(w->pend, 3, w->out->buf + w->out->len);
                                w->out->len += 4;
                        }
                        w->npend = 0;
                }
        }
        size_t whole = n / 3 * 3;
        if (whole && se_strbuf_grow(w->out, b64_len(whole) + 1) == 0) {
                se_base64_encode(p, whole, w->out->buf + w->out->len);
                w->out->len += b64_len(whole);
        }
        for (size_t i = whole; i < n; i++)
                w->pend[w->npend++] = p[i];
}

void admission_b64w_add_var(struct b64w *w, const struct rvar *v)
{
        unsigned h = (3 - w->npend) % 3; /* bytes that complete the pending group */
        if (!v->b64[h] || v->json_len < h) {
                admission_b64w_add(w, v->json, v->json_len);
                return;
        }
        admission_b64w_add(w, v->json, h);
        size_t whole = (v->json_len - h) / 3 * 3;
        se_strbuf_add(w->out, v->b64[h], v->b64_len[h]);
        w->raw += whole;
        admission_b64w_add(w, v->json + h + whole, v->json_len - h - whole);
}

void admission_b64w_finish(struct b64w *w)
{
        if (w->npend && se_strbuf_grow(w->out, 5) == 0) {
                se_base64_encode(w->pend, w->npend, w->out->buf + w->out->len);
                w->out->len += 4;
        }
        w->npend = 0;
}
