/* A forked child (no exec) of a shimmed process joins cgroup t, touches
 * 4M of malloc'd memory and exits; the parent reaps it with waitpid and at
 * once writes "+memory" to t's cgroup.subtree_control. On a kernel the
 * write succeeds (t has no task left). Prints the write's result at once
 * and after a 1 s sleep. Usage: fork_exit_busy CGROUP_DIR [touch: 0|1] */
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
	int touch = argc > 2 ? atoi(argv[2]) : 1;
	pid_t pid = fork();
	if (pid == 0) {
		char buf[32];
		snprintf(buf, sizeof(buf), "%d", getpid());
		if (put(cg, "cgroup.procs", buf))
			exit(2);
		if (touch) {
			char *mem = malloc(4 << 20);
			memset(mem, 1, 4 << 20);
		}
		exit(0);
	}
	int status;
	waitpid(pid, &status, 0);
	printf("child status %d\n", status);
	printf("+memory at once: %s\n", strerror(-put(cg, "cgroup.subtree_control", "+memory")));
	put(cg, "cgroup.subtree_control", "-memory");
	sleep(1);
	printf("+memory after 1 s: %s\n", strerror(-put(cg, "cgroup.subtree_control", "+memory")));
	return 0;
}
