/* Exponential back-off with jitter (see backoff.h). */
#include <svcenv/backoff.h>
#include <svcenv/timeutil.h>

void se_backoff_init(struct se_backoff *b, uint64_t initial_ns, uint64_t max_ns, double factor,
                     double jitter)
{
        b->initial_ns = initial_ns;
        b->max_ns = max_ns;
        b->factor = factor;
        b->jitter = jitter;
        b->current_ns = initial_ns;
        b->seed = se_now_mono_ns() | 1;
}

/* xorshift64*: jitter needs no cryptographic quality */
static double next_unit(struct se_backoff *b)
{
        b->seed ^= b->seed >> 12;
        b->seed ^= b->seed << 25;
        b->seed ^= b->seed >> 27;
        return (double)((b->seed * 2685821657736338717ull) >> 11) / (double)(1ull << 53);
}

uint64_t se_backoff_next(struct se_backoff *b)
{
        uint64_t base = b->current_ns;
        double grown = (double)b->current_ns * b->factor;
        b->current_ns = grown > (double)b->max_ns ? b->max_ns : (uint64_t)grown;
        double d = (double)base * (1.0 + b->jitter * next_unit(b));
        return d > (double)b->max_ns ? b->max_ns : (uint64_t)d;
}

void se_backoff_reset(struct se_backoff *b)
{
        b->current_ns = b->initial_ns;
}
