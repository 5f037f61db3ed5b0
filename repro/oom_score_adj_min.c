/* As test_memcontrol's set_oom_adj_score: root writes -1000
 * (OOM_SCORE_ADJ_MIN) to a child's /proc/PID/oom_score_adj, opened
 * O_WRONLY | O_APPEND. On a kernel, root (CAP_SYS_RESOURCE) may; prints
 * open's and write's results and what the file then reads. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(void)
{
	char path[64], buf[32] = "";
	pid_t pid = fork();
	if (pid == 0) {
		pause();
		return 0;
	}
	snprintf(path, sizeof(path), "/proc/%d/oom_score_adj", pid);
	for (int score = -1000; score <= 1000; score += 1000) {
		int fd = open(path, O_WRONLY | O_APPEND);
		int open_errno = errno;
		int len = fd < 0 ? -1 : dprintf(fd, "%d", score);
		printf("%s %d: open %s, write %s\n", path, score,
		       fd < 0 ? strerror(open_errno) : "ok",
		       len < 0 ? strerror(errno) : "ok");
		if (fd >= 0)
			close(fd);
	}
	int fd = open(path, O_RDONLY);
	buf[read(fd, buf, sizeof(buf) - 1) > 0 ? 31 : 0] = 0;
	printf("reads %s", buf);
	kill(pid, SIGKILL);
	return 0;
}
