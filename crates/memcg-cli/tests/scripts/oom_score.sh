# /proc/PID/oom_score (fs/proc/base.c proc_oom_score): oom_badness (rss +
# swap entries + page tables + oom_score_adj * totalpages / 1000) against
# the machine's pages plus its swap, scaled to 0..2000; 0 for a task with
# oom_score_adj -1000. The file has no write method (EINVAL).
echo +memory > /sys/fs/cgroup/cgroup.subtree_control
mkdir /a
alloc /a x 8M
cat /proc/100/oom_score
echo 500 > /proc/100/oom_score_adj
cat /proc/100/oom_score
echo -1000 > /proc/100/oom_score_adj
cat /proc/100/oom_score
echo 1 > /proc/100/oom_score
cat /proc/999/oom_score
free x
