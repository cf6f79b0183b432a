/* backoff.h — exponential back-off with jitter (client-go's shape). */
#ifndef SVCENV_BACKOFF_H
#define SVCENV_BACKOFF_H

#include <stdint.h>

struct se_backoff {
        uint64_t initial_ns;
        uint64_t max_ns;
        double factor; /* growth per step, e.g. 2.0 */
        double jitter; /* 0..1: each delay is scaled by 1 + jitter*rand */
        uint64_t current_ns;
        uint64_t seed;
};

void se_backoff_init(struct se_backoff *b, uint64_t initial_ns, uint64_t max_ns, double factor,
                     double jitter);
/* The next delay; grows the base delay for the call after it. */
uint64_t se_backoff_next(struct se_backoff *b);
/* Back to the initial delay (after a success). */
void se_backoff_reset(struct se_backoff *b);

#endif
