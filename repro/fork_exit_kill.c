/* As the selftests' cg_run then cg_destroy: a forked child (no exec) joins
 * cgroup t, touches 4M of malloc'd memory and exits; the parent reaps it
 * (waitpid), then at once tries rmdir t and, on EBUSY, writes 1 to
 * t/cgroup.kill (cg_killall) and retries. On a kernel t is empty once the
 * child is reaped: the rmdir succeeds, and a cgroup.kill of t could never
 * reach the parent, which is not in t. Prints each step; "parent
 * survived" last. Usage: fork_exit_kill CGROUP_DIR */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int put(const char *dir, const char *file, const char *value)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	int fd = open(path, O_WRONLY);
	if (fd < 0)
		return -errno;
	int r = write(fd, value, strlen(value));
	int e = errno;
	close(fd);
	return r < 0 ? -e : 0;
}

int main(int argc, char **argv)
{
	const char *cg = argv[1];
	setvbuf(stdout, NULL, _IONBF, 0);
	pid_t pid = fork();
	if (pid == 0) {
		char buf[32];
		snprintf(buf, sizeof(buf), "%d", getpid());
		if (put(cg, "cgroup.procs", buf))
			exit(2);
		char *mem = malloc(4 << 20);
		memset(mem, 1, 4 << 20);
		exit(0);
	}
	int status;
	waitpid(pid, &status, 0);
	printf("child %d reaped, status %d\n", pid, status);
	for (int tries = 0; tries < 100; tries++) {
		if (rmdir(cg) == 0) {
			printf("rmdir ok after %d tries\n", tries);
			break;
		}
		printf("rmdir: %s; cgroup.kill: %s\n", strerror(errno),
		       strerror(-put(cg, "cgroup.kill", "1")));
		usleep(100);
	}
	printf("parent survived\n");
	return 0;
}
