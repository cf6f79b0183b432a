/* diag.h — one diagnostic for input that could not be used.
 *
 * Parsers of outside input take an optional `struct se_diag *` and fill it on
 * error with where (file, line, column; 0 when unknown) and what (one line).
 * se_diag_format() renders `file:line: message` for the user. */
#ifndef SVCENV_DIAG_H
#define SVCENV_DIAG_H

#include <stddef.h>

#include <svcenv/macro.h>

struct se_diag {
        char file[256];
        unsigned line;
        unsigned column;
        char text[512];
};

/* Fills diag (NULL-safe); file may be NULL. Returns nothing: callers return
 * their own errno value next to it. */
void se_diag_set(struct se_diag *diag, const char *file, unsigned line, unsigned column,
                 const char *fmt, ...) SE_PRINTF(5, 6);
/* Writes `file:line: text` (parts that are unknown are left out) into buf. */
void se_diag_format(const struct se_diag *diag, char *buf, size_t size);

#endif
