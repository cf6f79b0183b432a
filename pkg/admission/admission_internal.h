/* Private pieces of pkg/admission shared by its files. */
#ifndef SVCENV_ADMISSION_INTERNAL_H
#define SVCENV_ADMISSION_INTERNAL_H

#include <jansson.h>

#include <svcenv/admission.h>
#include <svcenv/strbuf.h>

struct warnings {
        char *v[SE_ADMISSION_MAX_WARNINGS];
        size_t n;
        size_t dropped;
};

void warnings_add(struct warnings *w, const char *fmt, ...) SE_PRINTF(2, 3);
void warnings_release(struct warnings *w);

/* Appends s as a JSON string (quotes included, control characters escaped,
 * bytes that are not valid UTF-8 replaced by U+FFFD as Go's encoder does). */
void json_put_string(struct se_strbuf *sb, const char *s);

/* What the patch builder reports back. */
struct patch_stats {
        size_t n_vars;
        bool guarded;
};

/* Builds the JSON patch operations for the pod (containers and init
 * containers), appended to patch without the enclosing brackets; `first`
 * tracks whether a comma is needed. 0, -ENOMEM or the decode failure
 * (-EINVAL with msg filled). */
int build_patch(const struct se_envvars_input *in, const struct se_admission_options *opt,
                const json_t *object, const char *ns, struct se_strbuf *patch, struct warnings *w,
                struct patch_stats *st, char *msg, size_t msg_size);

#endif
