/* As test_zswap's test_no_invasive_cgroup_shrink (6.12): the process moves
 * itself into cgroup CG (memory.max 1M, swap and zswap available), then
 * mallocs 10M and touches a byte every 4095 (a 1M cgroup must reclaim its
 * anonymous pages to (z)swap as it goes), then (with "fork") forks a child
 * that exits at once, as cg_run does. On a kernel both steps finish: fork
 * copies swap entries (the parent's pages stay on swap, nothing is charged)
 * and memory.events shows no oom_kill. Usage: touch_past_1m CG [fork] */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	char path[512], pid[32], stat[8192];
	setvbuf(stdout, NULL, _IONBF, 0);
	snprintf(path, sizeof(path), "%s/cgroup.procs", argv[1]);
	int fd = open(path, O_WRONLY);
	snprintf(pid, sizeof(pid), "%d", getpid());
	if (fd < 0 || write(fd, pid, strlen(pid)) < 0) {
		perror(path);
		return 2;
	}
	close(fd);
	printf("in %s\n", argv[1]);
	size_t size = 10 << 20;
	char *mem = malloc(size);
	for (size_t i = 0; i < size; i += 4095)
		mem[i] = 'a';
	snprintf(path, sizeof(path), "%s/memory.stat", argv[1]);
	fd = open(path, O_RDONLY);
	ssize_t n = read(fd, stat, sizeof(stat) - 1);
	stat[n > 0 ? n : 0] = 0;
	char *z = strstr(stat, "zswapped ");
	printf("touched 10M; %.*s\n", z ? (int)strcspn(z, "\n") : 0, z ? z : "");
	if (argc > 2) {
		pid_t child = fork();
		if (child == 0)
			_exit(0);
		int status;
		waitpid(child, &status, 0);
		printf("forked and reaped a child (status %d)\n", status);
	}
	return 0;
}
