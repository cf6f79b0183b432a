/* cpu_budget.h — runs a check in a child process under a CPU-time limit, so
 * that a test of "this is linear" fails (SIGXCPU) instead of hanging the
 * suite when the code goes quadratic again. Linked into every unit test. */
#ifndef SVCENV_TEST_CPU_BUDGET_H
#define SVCENV_TEST_CPU_BUDGET_H

/* Forks; the child sets RLIMIT_CPU to `seconds` (not under VALGRIND=1, which
 * is many times slower) and exits with check()'s result. The parent fails the
 * current cmocka test if the child was killed or check() returned non-zero
 * (its value names the step that failed). Call from a cmocka test only. */
void t_run_with_cpu_budget(int (*check)(void), unsigned seconds);

#endif
