/* Private helpers shared by the envvars sources. */
#ifndef SVCENV_ENVVARS_INTERNAL_H
#define SVCENV_ENVVARS_INTERNAL_H

#include <svcenv/envvars.h>
#include <svcenv/hashmap.h>

/* New zeroed entry at the end (port = -1); NULL on -ENOMEM. */
struct se_env_entry *envvars_list_push(struct se_env_list *l);
/* Copy of s in the list's arena; NULL when s is NULL or on -ENOMEM. */
const char *envvars_list_strdup(struct se_env_list *l, const char *s);
/* Records loser (copied) in winner->lost. 0 or -ENOMEM. */
int envvars_list_add_loser(struct se_env_list *l, struct se_env_entry *winner,
                           const struct se_env_entry *loser);

/* se_envvars_services() (the public one wraps it). */
int envvars_services(const struct se_envvars_input *in, const char *ns, bool links,
                     struct se_env_list *out);

/* Value of a resourceFieldRef (limits.cpu, requests.memory, ...) of
 * container c with the divisor (NULL: 1) into buf. 0, -EINVAL or -ENODATA
 * (limit not set) with diag filled. */
int envvars_resource_value(const struct se_pod *pod, const struct se_container *c,
                           const char *resource, const char *container_name, const char *divisor,
                           char *buf, size_t size, struct se_diag *diag);

#endif
