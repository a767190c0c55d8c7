/* Reference pipe ping-pong with explicit pinning: the same loop as
 * perf bench sched pipe (fork, 4-byte token over two pipes), timed with
 * CLOCK_MONOTONIC around the loop only, like schedlab.
 * Usage: pipe LOOPS CPU_PARENT CPU_CHILD   (-1 = leave unpinned)
 * Prints round trips per second. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void pin(int cpu)
{
	cpu_set_t set;

	if (cpu < 0)
		return;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set)) {
		perror("sched_setaffinity");
		exit(1);
	}
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	long loops = argc > 1 ? atol(argv[1]) : 1000000, i;
	int cpu_a = argc > 2 ? atoi(argv[2]) : -1, cpu_b = argc > 3 ? atoi(argv[3]) : -1;
	int ab[2], ba[2], tok = 0;
	double t0, t1;
	pid_t pid;

	if (loops < 1 || pipe(ab) || pipe(ba))
		return 1;
	pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0) {
		pin(cpu_b);
		for (i = 0; i < loops; i++) {
			if (read(ab[0], &tok, sizeof(tok)) != sizeof(tok) || write(ba[1], &tok, sizeof(tok)) != sizeof(tok))
				_exit(2);
		}
		_exit(0);
	}
	pin(cpu_a);
	t0 = now();
	for (i = 0; i < loops; i++) {
		if (write(ab[1], &tok, sizeof(tok)) != sizeof(tok) || read(ba[0], &tok, sizeof(tok)) != sizeof(tok))
			return 2;
	}
	t1 = now();
	waitpid(pid, NULL, 0);
	printf("%.3f\n", loops / (t1 - t0));
	return 0;
}
