/* LD_PRELOAD shim: pins both sides of fork() to explicit CPUs.
 * perf bench sched pipe has no pinning option and taskset's mask is
 * inherited by both tasks, so for cross-cpu runs this wraps perf's fork():
 * the parent goes to $PIN_PARENT_CPU, the child to $PIN_CHILD_CPU, before
 * either enters its loop. Build: cc -O2 -shared -fPIC -o pin_fork.so pin_fork.c -ldl */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

static void pin(const char *var)
{
	const char *v = getenv(var);
	cpu_set_t set;

	if (!v || !*v)
		return;
	CPU_ZERO(&set);
	CPU_SET(atoi(v), &set);
	sched_setaffinity(0, sizeof(set), &set);
}

pid_t fork(void)
{
	static pid_t (*real_fork)(void);
	pid_t pid;

	if (!real_fork)
		real_fork = (pid_t(*)(void))dlsym(RTLD_NEXT, "fork");
	pid = real_fork();
	if (pid == 0)
		pin("PIN_CHILD_CPU");
	else if (pid > 0)
		pin("PIN_PARENT_CPU");
	return pid;
}
