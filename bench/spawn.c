/* Reference process-creation loop: fork, child _exit(0), parent waitpid,
 * timed with CLOCK_MONOTONIC around the whole loop, like schedlab spawn.
 * Usage: spawn COUNT   Prints processes per second. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	long count = argc > 1 ? atol(argv[1]) : 10000, i;
	struct timespec a, b;
	int status;

	if (count < 1)
		return 1;
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (i = 0; i < count; i++) {
		pid_t pid = fork();

		if (pid == 0)
			_exit(0);
		if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
			return 2;
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	printf("%.3f\n", count / ((b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) * 1e-9));
	return 0;
}
