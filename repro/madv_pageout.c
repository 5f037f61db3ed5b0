/* As test_zswap's test_zswap_incompressible (7.3): in cgroup CG (memory.max
 * 32M), a process fills 4M of private anonymous memory and calls
 * madvise(MADV_PAGEOUT) on it. On a kernel the pages are reclaimed at once:
 * memory.stat's zswpout (zswap on) or pswpout rises by about 1024, and
 * memory.current falls. Prints both counters before and after.
 * Usage: madv_pageout CG */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static void show(const char *cg, const char *when)
{
	char path[512], stat[16384];
	snprintf(path, sizeof(path), "%s/memory.stat", cg);
	int fd = open(path, O_RDONLY);
	ssize_t n = read(fd, stat, sizeof(stat) - 1);
	close(fd);
	stat[n > 0 ? n : 0] = 0;
	printf("%s:", when);
	for (char *line = strtok(stat, "\n"); line; line = strtok(NULL, "\n"))
		if (!strncmp(line, "anon ", 5) || !strncmp(line, "zswpout ", 8) ||
		    !strncmp(line, "pswpout ", 8))
			printf(" %s;", line);
	printf("\n");
}

int main(int argc, char **argv)
{
	char path[512], pid[32];
	size_t size = 4 << 20;
	snprintf(path, sizeof(path), "%s/cgroup.procs", argv[1]);
	int fd = open(path, O_WRONLY);
	snprintf(pid, sizeof(pid), "%d", getpid());
	if (fd < 0 || write(fd, pid, strlen(pid)) < 0)
		return 2;
	close(fd);
	char *mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	for (size_t i = 0; i < size; i++)
		mem[i] = (char)random();
	show(argv[1], "filled 4M");
	int r = madvise(mem, size, MADV_PAGEOUT);
	printf("madvise(MADV_PAGEOUT) = %d\n", r);
	show(argv[1], "after MADV_PAGEOUT");
	return 0;
}
