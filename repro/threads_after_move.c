/* As test_core's test_cgcore_proc_migration: the process enters cgroup
 * SRC, starts 13 threads that sleep, then moves itself (cgroup.procs) to
 * DST and prints DST's cgroup.threads. On a kernel it lists 14 threads
 * (the 13 and the main thread). Usage: threads_after_move SRC DST */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void *sleeper(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

static void enter(const char *cg)
{
	char path[512], pid[32];
	snprintf(path, sizeof(path), "%s/cgroup.procs", cg);
	snprintf(pid, sizeof(pid), "%d", getpid());
	int fd = open(path, O_WRONLY);
	if (fd < 0 || write(fd, pid, strlen(pid)) < 0)
		perror(path);
	close(fd);
}

int main(int argc, char **argv)
{
	pthread_t threads[13];
	char path[512], buf[4096];
	enter(argv[1]);
	for (int i = 0; i < 13; i++)
		pthread_create(&threads[i], NULL, sleeper, NULL);
	enter(argv[2]);
	snprintf(path, sizeof(path), "%s/cgroup.threads", argv[2]);
	int fd = open(path, O_RDONLY);
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	buf[n > 0 ? n : 0] = 0;
	int lines = 0;
	for (char *p = buf; *p; p++)
		lines += *p == '\n';
	printf("%s: %d threads (a kernel: 14):\n%s", path, lines, buf);
	snprintf(path, sizeof(path), "%s/cgroup.threads", argv[1]);
	fd = open(path, O_RDONLY);
	n = read(fd, buf, sizeof(buf) - 1);
	buf[n > 0 ? n : 0] = 0;
	printf("%s (a kernel: none):\n%s", path, buf);
	return 0;
}
