"""A whole tree in --fs filesystems, run by `memcg run` with a RAM disk
at argv[1] and a host directory at argv[2]: mmap (shared and private)
coherent with read/write, a program run from the filesystem, a file
removed while open, and a tree written to the host directory. Prints one
line per check; the test compares them."""
import mmap
import os
import shutil
import subprocess
import sys

ram, host = sys.argv[1], sys.argv[2]
os.chdir(ram)

# MAP_SHARED: a store through the mapping is what read() sees, and a
# write() is what the mapping sees after it is mapped again.
fd = os.open("shared", os.O_RDWR | os.O_CREAT, 0o644)
os.write(fd, b"\0" * 8192)
m = mmap.mmap(fd, 8192, mmap.MAP_SHARED)
m[100:105] = b"hello"
m.flush()
print("shared store read back:", open("shared", "rb").read()[100:105].decode())
m.close()
os.pwrite(fd, b"world", 200)
m = mmap.mmap(fd, 8192, mmap.MAP_SHARED)
print("write seen mapped:", m[200:205].decode())
m.close()
# MAP_PRIVATE: stores stay private.
p = mmap.mmap(fd, 8192, mmap.MAP_PRIVATE)
p[0:3] = b"xyz"
print("private store private:", open("shared", "rb").read()[0:3] == b"\0\0\0")
p.close()
os.close(fd)

# A program run from the filesystem (exec maps it).
shutil.copy("/bin/echo", "echo")
print("exec:", subprocess.run(["./echo", "ran"], capture_output=True, text=True).stdout.strip())

# Removed while open: still read and written through the descriptor.
with open("doomed", "w") as f:
    f.write("still here")
fd = os.open("doomed", os.O_RDWR)
os.unlink("doomed")
os.pwrite(fd, b"!", 10)
print("unlinked open:", os.pread(fd, 64, 0).decode(), os.path.exists("doomed"))
os.close(fd)

# A tree on the host directory: nested, renamed, linked.
os.makedirs(f"{host}/a/b")
with open(f"{host}/a/b/f.tmp", "w") as f:
    f.write("x" * 10000)
os.rename(f"{host}/a/b/f.tmp", f"{host}/a/f")
os.link(f"{host}/a/f", f"{host}/a/hard")
os.symlink("a/f", f"{host}/soft")
os.chmod(f"{host}/a/f", 0o600)
print("tree:", sorted(os.listdir(host)), sorted(os.listdir(f"{host}/a")), os.stat(f"{host}/a/hard").st_nlink)
