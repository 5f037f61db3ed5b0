"""Memory pressure over FUSE, as systemd-oomd and oomd use it: run by
tests/fuse.rs under `memcg run --mem 512M --charge-stock off
--fs /tmp/memcg-psi-fs=ram:256M`.

A shell in /w (memory.max 4M) writes and reads page cache: its requests
run as its task, so the reclaim they cause stalls it in /w and in the
root (qa M2: `total=0` before). A trigger on /w/memory.pressure ("some
1000 1000000": 1 ms of stall within a second) wakes a poller with POLLPRI
once the writer's stalls pass it; a second trigger on the same descriptor
is EBUSY; an opener without CAP_SYS_RESOURCE may only use windows of a
multiple of 2 s (here on /proc/pressure/memory, which anyone may write).
"""
import errno
import os
import select
import subprocess

CG = "/sys/fs/cgroup/w"
FS = "/tmp/memcg-psi-fs"

with open("/sys/fs/cgroup/cgroup.subtree_control", "w") as f:
    f.write("+memory")
os.mkdir(CG)
with open(f"{CG}/memory.max", "w") as f:
    f.write("4M")


def total(path):
    with open(path) as f:
        return int(f.readline().split("total=")[1])


def attempt(fd, text):
    try:
        os.write(fd, text)
        return "ok"
    except OSError as e:
        return errno.errorcode[e.errno]


fd = os.open(f"{CG}/memory.pressure", os.O_RDWR)
print("trigger:", attempt(fd, b"some 1000 1000000"))
print("second trigger:", attempt(fd, b"some 1000 1000000"))
poller = select.poll()
poller.register(fd, select.POLLPRI)
print("quiet poll:", poller.poll(300))
writer = subprocess.Popen(
    [
        "bash",
        "-c",
        f"echo $$ > {CG}/cgroup.procs; "
        f"for i in 1 2 3; do head -c 32M /dev/zero > {FS}/z$i; done; "
        f"cat {FS}/z1 {FS}/z2 {FS}/z3 > /dev/null",
    ]
)
woken = poller.poll(30000)
print("woken:", bool(woken) and bool(woken[0][1] & select.POLLPRI))
writer.wait()
print("stalled:", total(f"{CG}/memory.pressure") > 0, total("/proc/pressure/memory") > 0)
os.close(fd)

child = os.fork()
if child == 0:
    os.setresgid(65534, 65534, 65534)
    os.setresuid(65534, 65534, 65534)
    results = []
    for text in (b"some 150000 1000000\n", b"some 150000 2000000\n"):
        proc = os.open("/proc/pressure/memory", os.O_WRONLY)
        results.append(attempt(proc, text))
        os.close(proc)
    print("unprivileged:", *results, flush=True)
    os._exit(0)
os.waitpid(child, 0)
