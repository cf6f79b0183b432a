/* Private pieces of pkg/httpd. */
#ifndef SVCENV_HTTPD_INTERNAL_H
#define SVCENV_HTTPD_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include <openssl/ssl.h>

#include <svcenv/httpd.h>

struct certs {
        pthread_mutex_t lock;
        const char *cert_file;
        const char *key_file;
        X509 *cert;
        STACK_OF(X509) * chain;
        EVP_PKEY *key;
        struct stat cert_st, key_st; /* of the pair loaded */
        int64_t checked_ms; /* monotonic time of the last look */
        _Atomic uint64_t reloads, errors;
};

/* Loads the pair (errors in diag). */
int httpd_certs_init(struct certs *c, const char *cert_file, const char *key_file,
                     struct se_diag *diag);
void httpd_certs_release(struct certs *c);
/* Looks at the files (at most once a second unless force). */
int httpd_certs_check(struct certs *c, bool force, struct se_diag *diag);
/* TLS 1.2 suites: forward-secret key exchange and AEAD only (no CBC, no
 * SHA-1 MAC), the ECDHE+AEAD part of Go's defaults that an API server's
 * client offers first. TLS 1.3's suites are all AEAD already. */
#define HTTPD_TLS12_CIPHERS                                   \
 "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:" \
 "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:" \
 "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305"

/* TLS >= 1.2, the suites above and the per-handshake certificate callback
 * on ctx. */
int httpd_certs_setup_ctx(struct certs *c, SSL_CTX *ctx);

#endif
