#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cpu_budget.h"

void t_run_with_cpu_budget(int (*check)(void), unsigned seconds)
{
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                const char *vg = getenv("VALGRIND");
                struct rlimit cpu = { seconds, seconds };
                if (!vg || strcmp(vg, "1") != 0)
                        setrlimit(RLIMIT_CPU, &cpu);
                _exit(check());
        }
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        if (WIFSIGNALED(status))
                fail_msg("killed by signal %d (SIGXCPU: over the %u s budget)", WTERMSIG(status),
                         seconds);
        if (WEXITSTATUS(status))
                fail_msg("check %d failed in the child", WEXITSTATUS(status));
}
