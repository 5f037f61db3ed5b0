"""poll(2) on memory.events, as an OOM daemon does: run by tests/fuse.rs
under `memcg run --fs /tmp/memcg-poll-fs=ram:64M`.

A poller on memory.events sleeps until an event comes (here: a writer in
the cgroup pushes its page cache past memory.high), is woken with POLLPRI,
sees the `high` count risen when it reads, and then sleeps again until the
next event.
"""
import os
import select
import subprocess

CG = "/sys/fs/cgroup/w"

with open("/sys/fs/cgroup/cgroup.subtree_control", "w") as f:
    f.write("+memory")
os.mkdir(CG)
with open(f"{CG}/memory.high", "w") as f:
    f.write("1M")

events = open(f"{CG}/memory.events")
before = events.read()
poller = select.poll()
poller.register(events, select.POLLPRI)
print("before:", [l for l in before.splitlines() if l.startswith("high ")][0])
print("quiet poll:", poller.poll(300))

writer = subprocess.Popen(
    ["bash", "-c", f"echo $$ > {CG}/cgroup.procs; head -c 8M /dev/zero > /tmp/memcg-poll-fs/x"]
)
woken = poller.poll(10000)
print("woken:", bool(woken) and bool(woken[0][1] & select.POLLPRI))
writer.wait()
# Not read yet: the event is still pending.
print("pending:", bool(poller.poll(0)))
events.seek(0)
after = events.read()
print("high risen:", int(after.split("high ")[1].split()[0]) > 0)
# Read: quiet again until the next event.
print("quiet after read:", poller.poll(300))
