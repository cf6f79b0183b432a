/* Round robin (ip_vs_rr.c) and interleaved weighted round robin
 * (ip_vs_wrr.c): a cursor over the destination list. */
#include <string.h>

#include "lb_internal.h"

static bool eligible(const struct se_lb_dest *d)
{
        return !d->overloaded && d->weight > 0;
}

static bool same(const struct lb_ident *a, const struct se_lb_dest *d)
{
        return a->addr_len == d->addr_len && a->port == d->port &&
               memcmp(a->addr, d->addr, d->addr_len) == 0;
}

static long find(const struct lb_ident *id, const struct se_lb_dest *d, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (same(id, &d[i]))
                        return (long)i;
        return -1;
}

/* The kernel keeps the cursor on a list entry; when that entry is deleted
 * it steps back to the previous one, so the walk resumes where it was. With
 * a whole new list, the nearest earlier entry that survived plays that part;
 * none left means the list head. */
void lb_rr_update(struct se_lb *lb, const struct se_lb_dest *d, size_t n)
{
        long at = -1;
        for (long i = lb->cursor; i >= 0 && (size_t)i < lb->n; i--) {
                at = find(&lb->idents[i], d, n);
                if (at >= 0)
                        break;
        }
        lb->cursor = at;
}

/* Entries after the cursor, then from the head up to and including it. */
int lb_rr_pick(struct se_lb *lb, const struct se_lb_dest *d, size_t n)
{
        if (n == 0)
                return -1;
        size_t start = lb->cursor < 0 ? 0 : (size_t)lb->cursor + 1;
        for (size_t k = 0; k < n; k++) {
                size_t i = (start + k) % n;
                if (eligible(&d[i])) {
                        lb->cursor = (long)i;
                        return (int)i;
                }
        }
        return -1;
}

static int gcd(int a, int b)
{
        while (b) {
                int t = a % b;
                a = b;
                b = t;
        }
        return a;
}

/* di = gcd of the positive weights (1 if none), mw = max weight - (di - 1),
 * so that the last pass asks for weight >= 1; a current weight that no
 * longer fits restarts, else it is aligned down to the new step, as
 * ip_vs_wrr_dest_changed does. The cursor goes back to the head. */
void lb_wrr_update(struct se_lb *lb, const struct se_lb_dest *d, size_t n)
{
        int g = 0, max = 0;
        for (size_t i = 0; i < n; i++) {
                if (d[i].weight > 0)
                        g = g > 0 ? gcd(d[i].weight, g) : d[i].weight;
                if (d[i].weight > max)
                        max = d[i].weight;
        }
        lb->wrr_di = g ? g : 1;
        lb->wrr_mw = max - (lb->wrr_di - 1);
        lb->cursor = -1;
        if (lb->wrr_cw > lb->wrr_mw || lb->wrr_cw == 0)
                lb->wrr_cw = lb->wrr_mw;
        else if (lb->wrr_di > 1)
                lb->wrr_cw = (lb->wrr_cw / lb->wrr_di) * lb->wrr_di + 1;
}

/* Passes with a falling required weight cw: pick the next entry after the
 * cursor whose weight reaches cw; at the end of the list lower cw by di, and
 * back at mw after the last pass. It gives up once every entry was checked
 * for weight >= 1 (ip_vs_wrr_schedule's last_pass/stop logic). */
int lb_wrr_pick(struct se_lb *lb, const struct se_lb_dest *d, size_t n)
{
        long dest = lb->cursor;
        if (lb->wrr_mw <= 0 || n == 0)
                return -1;
        long last = dest, stop = -2;
        bool last_pass = false, restarted = false;
        for (;;) {
                for (long i = dest + 1; i < (long)n; i++) {
                        if (!d[i].overloaded && d[i].weight >= lb->wrr_cw) {
                                lb->cursor = i;
                                return (int)i;
                        }
                        if (i == stop) {
                                lb->cursor = i;
                                return -1;
                        }
                }
                dest = -1;
                lb->wrr_cw -= lb->wrr_di;
                if (lb->wrr_cw <= 0) {
                        lb->wrr_cw = lb->wrr_mw;
                        if (last_pass || last == -1) {
                                lb->cursor = -1;
                                return -1;
                        }
                        restarted = true;
                }
                last_pass = lb->wrr_cw <= lb->wrr_di;
                if (last_pass && restarted && last != -1)
                        stop = last;
        }
}
