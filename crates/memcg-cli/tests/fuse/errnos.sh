# What bash and coreutils print when the kernel refuses, errno by errno,
# as on a real machine run as root (bash's "FILE: line N: " prefix is not
# compared): a read-only interface file opens for writing and the write
# fails (EINVAL), a /proc file without a write method gives EIO, 4 is a
# valid drop_caches value (it only quiets the kernel log), cgroup2 refuses
# renames, pids are read in any base the kernel reads.
echo +memory > /sys/fs/cgroup/cgroup.subtree_control
mkdir /sys/fs/cgroup/a
echo bogus > /sys/fs/cgroup/a/memory.max
echo +memory > /sys/fs/cgroup/a/cgroup.subtree_control
mkdir /sys/fs/cgroup/a/b
echo $$ > /sys/fs/cgroup/a/cgroup.procs
rmdir /sys/fs/cgroup/a
mkdir /sys/fs/cgroup/a
echo 1 > /sys/fs/cgroup/a/memory.current
touch /sys/fs/cgroup/a/newfile
rm /sys/fs/cgroup/a/memory.max
echo 99999999 > /sys/fs/cgroup/a/b/cgroup.procs
cat /sys/fs/cgroup/a/nope
cat /proc/sys/vm/drop_caches
echo 5 > /proc/sys/vm/drop_caches
echo 4 > /proc/sys/vm/drop_caches
echo x > /proc/meminfo
echo x > /sys/fs/cgroup/cgroup.controllers
mv /sys/fs/cgroup/a/b /sys/fs/cgroup/a/c
echo 0x7fffffff > /sys/fs/cgroup/a/b/cgroup.procs
echo -1 > /sys/fs/cgroup/a/b/cgroup.procs
echo 201 > /proc/sys/vm/swappiness
echo lz5 > /sys/module/zswap/parameters/compressor
echo 2 > /sys/fs/cgroup/a/b/cgroup.kill
echo 100M > /sys/fs/cgroup/a/b/memory.max
cat /sys/fs/cgroup/a/b/memory.max
# A write longer than a page is E2BIG (kernfs's atomic_write_len); a
# thread id written to cgroup.procs moves its whole process.
python3 - /sys/fs/cgroup/a/b <<'PY'
import os, sys, threading
cg = sys.argv[1]
try:
    with open(cg + "/memory.max", "w") as f:
        f.write("1" * 5000)
except OSError as e:
    print("5000-byte write:", e.strerror)
def move():
    with open(cg + "/cgroup.procs", "w") as f:
        f.write(str(threading.get_native_id()))
t = threading.Thread(target=move)
t.start()
t.join()
print("the process moved:", open(cg + "/cgroup.procs").read().split() == [str(os.getpid())])
with open("/sys/fs/cgroup/cgroup.procs", "w") as f:
    f.write(str(os.getpid()))
PY
rmdir /sys/fs/cgroup/a/b /sys/fs/cgroup/a
ls /sys/fs/cgroup/a
