/* httpd.h — a small HTTPS (or plain HTTP) server on libwebsockets.
 *
 * Serves one handler function for every request. The body of a request is
 * collected up to max_body bytes (more: 413 without calling the handler,
 * and the connection closed). HTTP/1.1 with keep-alive only (ALPN offers
 * http/1.1), TLS 1.2 (ECDHE with AEAD suites only) or newer; upgrades
 * (WebSocket, h2c) are refused by hanging up. A chunked request body is
 * answered 411 (a length is required) and a POST with no Content-Length
 * has an empty body.
 *
 * Deadlines: a new connection has timeout_s seconds to send its first
 * request's headers; each request, from its headers to the end of the
 * answer, has timeout_s in total however slowly its bytes arrive (408 and
 * hang up while reading it, hang up while answering); a kept-alive
 * connection has 60 s after an answer to complete the next request's
 * headers; and lws closes any single read stalled longer than timeout_s.
 *
 * Certificates: cert_file and key_file are read at start (failure is an
 * error) and looked at again, at most once a second, when a new TLS
 * connection arrives: when either file changed (cert-manager rotates the
 * Secret volume by swapping a symlink) and the new pair loads and matches,
 * new connections get it; a pair that does not load keeps the old one (and
 * counts a reload error). se_httpd_reload_certs() forces a look (SIGHUP).
 *
 * Threads: `threads` event loops, each in its own thread. One loop: lws
 * listens. Several: Debian's libwebsockets 4.1 has one service thread per
 * context and sets no SO_REUSEPORT, so the server listens itself (address:
 * an IP, or NULL for all interfaces, dual-stack), an acceptor thread
 * accepts and deals the connections in turn to one lws context per loop
 * (handed over through lws_cancel_service, adopted on the loop's thread).
 * A connection stays on its loop. The handler runs on a loop thread, so
 * with several loops it runs concurrently with itself: it must be
 * thread-safe, and should be quick (it blocks its loop while it runs).
 *
 * Responses: the headers and the body leave in one TLS write (records
 * coalesced with TCP_CORK), at once when the socket takes them.
 *
 * Ownership: the request and everything in it are borrowed for the call;
 * the handler gives the response body as malloc'ed memory that the server
 * frees. Errors: se_httpd_start() returns 0 or a negative errno with a
 * message in diag. */
#ifndef SVCENV_HTTPD_H
#define SVCENV_HTTPD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <svcenv/diag.h>

#define SE_HTTPD_MAX_THREADS 16

struct se_httpd_request {
        const char *method; /* "GET", "POST", ... */
        const char *path; /* without the query string */
        const char *query; /* after '?', "" when none */
        const char *content_type; /* "" when absent */
        const char *body;
        size_t len;
};

struct se_httpd_response {
        int status; /* default 200 */
        const char *content_type; /* static string; default text/plain */
        char *body; /* malloc'ed, taken over by the server; NULL: empty */
        size_t len;
        bool nosniff; /* send X-Content-Type-Options: nosniff */
};

typedef void (*se_httpd_handler)(void *data, const struct se_httpd_request *req,
                                 struct se_httpd_response *resp);

struct se_httpd_config {
        const char *address; /* NULL: all interfaces */
        int port; /* 0: any free port (see se_httpd_port) */
        const char *cert_file; /* NULL (both): plain HTTP */
        const char *key_file;
        size_t max_body; /* 0: 4 MiB */
        unsigned timeout_s; /* per request (see Deadlines); 0: 10 s */
        unsigned threads; /* event loops, 0 or 1: one; at most SE_HTTPD_MAX_THREADS */
        se_httpd_handler handler;
        void *data;
};

struct se_httpd_stats {
        uint64_t cert_reloads; /* successful reloads after the start */
        uint64_t cert_reload_errors;
};

struct se_httpd;

/* Binds and starts serving in background threads. */
int se_httpd_start(const struct se_httpd_config *cfg, struct se_httpd **ret, struct se_diag *diag);
/* The port actually bound (useful with port 0). */
int se_httpd_port(const struct se_httpd *h);
/* Looks at the certificate files now; 0, or negative errno when the new pair
 * does not load (the old one stays). */
int se_httpd_reload_certs(struct se_httpd *h, struct se_diag *diag);
void se_httpd_stats(const struct se_httpd *h, struct se_httpd_stats *ret);
/* Stops the loops (open connections are closed) and frees everything.
 * NULL-safe; returns NULL. */
struct se_httpd *se_httpd_stop(struct se_httpd *h);

#endif
