/* /healthz, /livez, /readyz and /metrics (see httpd_probes.h). */
#include <stdlib.h>
#include <string.h>

#include <svcenv/httpd_probes.h>

#define TEXT_TYPE "text/plain; charset=utf-8"

static void reply(struct se_httpd_response *resp, int status, const char *type,
                  struct se_strbuf *sb)
{
        resp->status = status;
        resp->content_type = type;
        resp->nosniff = true;
        if (se_strbuf_failed(sb)) {
                se_strbuf_release(sb);
                resp->status = 500;
                resp->body = NULL;
                resp->len = 0;
                return;
        }
        resp->body = se_strbuf_detach(sb, &resp->len);
}

/* `verbose` among the query's keys (with or without a value) */
static bool verbose(const char *query)
{
        for (const char *p = query; p && *p;) {
                size_t n = strcspn(p, "&;");
                size_t key = strcspn(p, "=&;");
                if (key > n)
                        key = n;
                if (key == 7 && strncmp(p, "verbose", 7) == 0)
                        return true;
                p += n;
                if (*p)
                        p++;
        }
        return false;
}

static void health(const struct se_httpd_probes *p, const char *name, bool live_only,
                   const struct se_httpd_request *req, struct se_httpd_response *resp)
{
        struct se_strbuf sb;
        se_strbuf_init(&sb, 64 * 1024);
        bool failed = false;
        se_strbuf_puts(&sb, "[+]ping ok\n");
        for (size_t i = 0; i < p->n_checks; i++) {
                const struct se_httpd_check *c = &p->checks[i];
                if (live_only && c->ready_only)
                        continue;
                if (!c->ok || c->ok(c->data)) {
                        se_strbuf_printf(&sb, "[+]%s ok\n", c->name);
                } else {
                        se_strbuf_printf(&sb, "[-]%s failed: reason withheld\n", c->name);
                        failed = true;
                }
        }
        if (failed) {
                se_strbuf_printf(&sb, "%s check failed\n", name);
                return reply(resp, 500, TEXT_TYPE, &sb);
        }
        if (verbose(req->query)) {
                se_strbuf_printf(&sb, "%s check passed\n", name);
        } else {
                se_strbuf_reset(&sb);
                se_strbuf_puts(&sb, "ok");
        }
        reply(resp, 200, TEXT_TYPE, &sb);
}

bool se_httpd_probes_serve(const struct se_httpd_probes *p, const struct se_httpd_request *req,
                           struct se_httpd_response *resp)
{
        const char *path = req->path;
        if (strcmp(path, "/livez") == 0) {
                health(p, "livez", true, req, resp);
        } else if (strcmp(path, "/readyz") == 0) {
                health(p, "readyz", false, req, resp);
        } else if (strcmp(path, "/healthz") == 0) {
                health(p, "healthz", false, req, resp);
        } else if (strcmp(path, "/metrics") == 0 && p->metrics) {
                struct se_strbuf sb;
                se_strbuf_init(&sb, 16 << 20);
                p->metrics(p->metrics_data, &sb);
                reply(resp, 200, SE_HTTPD_METRICS_TYPE, &sb);
                resp->nosniff = false;
        } else {
                return false;
        }
        return true;
}

void se_httpd_not_found(struct se_httpd_response *resp)
{
        struct se_strbuf sb;
        se_strbuf_init(&sb, 64);
        se_strbuf_puts(&sb, "404 page not found\n");
        reply(resp, 404, TEXT_TYPE, &sb);
}
