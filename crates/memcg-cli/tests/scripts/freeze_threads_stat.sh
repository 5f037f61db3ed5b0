# The cgroup core files: cgroup.freeze (and frozen in cgroup.events),
# cgroup.threads, cgroup.stat's nr_subsys_*/nr_dying_subsys_*, and the
# integer parsing they share with cgroup.kill (kstrtoint: ERANGE on
# overflow).
echo +memory > /sys/fs/cgroup/cgroup.subtree_control
mkdir /sys/fs/cgroup/a /sys/fs/cgroup/a/b /sys/fs/cgroup/c
alloc /a/b one 1M
cat /a/b/cgroup.threads
cat /a/cgroup.freeze
cat /cgroup.freeze
echo 1 > /a/cgroup.freeze
cat /a/cgroup.freeze /a/b/cgroup.freeze
cat /a/cgroup.events /a/b/cgroup.events
# A frozen task cannot run: here it would wait forever, so the verb fails.
touch one
echo $?
alloc /a/b two 1M
free one
# Moved out, the task thaws; moved back in, it freezes again.
echo 100 > /c/cgroup.procs
touch one
cat /a/cgroup.events
echo 100 > /a/b/cgroup.procs
cat /a/b/cgroup.events
echo 2 > /a/cgroup.freeze
echo x > /a/cgroup.freeze
echo 0 > /a/cgroup.freeze
cat /a/b/cgroup.events
touch one
# cgroup.kill of a frozen cgroup still kills.
echo 1 > /a/cgroup.freeze
echo 1 > /a/cgroup.kill
pidof one
cat /a/cgroup.events /a/memory.current
echo 0 > /a/cgroup.freeze
# A thread moves only within its domain: every cgroup here is one.
alloc /c three 1M
echo 102 > /c/cgroup.threads
echo 102 > /a/b/cgroup.threads
cat /c/cgroup.type
# cgroup.stat: live and dying memory cgroups here and below (nr_subsys_
# counts the cgroup's own; /a/b has no memory controller, the root does).
cat /cgroup.stat /a/b/cgroup.stat
rmdir /a/b
cat /a/cgroup.stat
charge /c 64K
echo +memory > /a/cgroup.subtree_control
mkdir /a/d
charge /a/d 4K
rmdir /a/d
cat /cgroup.stat /a/cgroup.stat
uncharge /a/d 4K
cat /a/cgroup.stat
uncharge /c 64K
# kstrtoint: overflow is ERANGE for cgroup.kill as for cgroup.freeze.
echo 99999999999999999999999 > /c/cgroup.kill
echo 18446744073709551615 > /c/cgroup.kill
pidof three
free three
