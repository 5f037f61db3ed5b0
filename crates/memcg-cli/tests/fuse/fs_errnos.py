"""The refusals a filesystem gives, one line per call: `WHAT: ERRNO` (or
`WHAT: ok`). Run on a `--fs` directory inside `memcg run` and on a host
tmpfs directory; the lines must be the same.

    python3 fs_errnos.py DIR            the kernel's errnos for names and kinds
    python3 fs_errnos.py --exdev A B    renames and links from A to B
    python3 fs_errnos.py --enospc DIR   fills DIR, then reads every byte back
"""

import ctypes
import errno
import os
import sys

LIBC = ctypes.CDLL(None, use_errno=True)
LIBC.renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]


def renameat2(old, new, flags):
    if LIBC.renameat2(-100, old.encode(), -100, new.encode(), flags) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def show(what, f, *args):
    try:
        f(*args)
        print("%s: ok" % what)
    except OSError as e:
        print("%s: %s" % (what, errno.errorcode[e.errno]))


def names_and_kinds(d):
    os.chdir(d)
    os.mkdir("dir")
    open("dir/file", "w").close()
    os.mkdir("empty")
    os.symlink("loop2", "loop1")
    os.symlink("loop1", "loop2")
    os.symlink("dir/file", "link")
    show("create 255-byte name", lambda: os.close(os.open("n" * 255, os.O_CREAT | os.O_WRONLY)))
    show("create 256-byte name", os.open, "n" * 256, os.O_CREAT | os.O_WRONLY)
    show("mkdir 256-byte name", os.mkdir, "m" * 256)
    show("stat 256-byte name", os.stat, "s" * 256)
    show("symlink 256-byte name", os.symlink, "x", "l" * 256)
    show("rename to 256-byte name", os.rename, "empty", "r" * 256)
    show("open symlink loop", os.open, "loop1", os.O_RDONLY)
    show("stat symlink loop", os.stat, "loop1/x")
    show("open O_NOFOLLOW symlink", os.open, "link", os.O_RDONLY | os.O_NOFOLLOW)
    show("open O_NOFOLLOW|O_PATH symlink", lambda: os.close(os.open("link", os.O_PATH | os.O_NOFOLLOW)))
    show("rmdir non-empty", os.rmdir, "dir")
    show("rename dir over non-empty", os.rename, "empty", "dir")
    show("rename dir into itself", os.rename, "dir", "dir/sub")
    show("unlink dir", os.unlink, "dir")
    show("open dir for writing", os.open, "dir", os.O_WRONLY)
    show("rename file over dir", os.rename, "dir/file", "empty")
    show("rename dir over file", os.rename, "empty", "dir/file")
    show("rmdir file", os.rmdir, "dir/file")
    show("mkdir under file", os.mkdir, "dir/file/x")
    show("open O_DIRECTORY file", os.open, "dir/file", os.O_RDONLY | os.O_DIRECTORY)
    show("mkdir existing", os.mkdir, "dir")
    show("create O_EXCL existing", os.open, "dir/file", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    show("symlink over existing", os.symlink, "x", "dir/file")
    show("link over existing", os.link, "dir/file", "link")
    show("link dir", os.link, "dir", "dirlink")
    show("rename NOREPLACE existing", renameat2, "link", "dir/file", 1)
    show("rename EXCHANGE missing", renameat2, "link", "missing", 2)
    show("readlink file", os.readlink, "dir/file")
    show("rmdir .", os.rmdir, "dir/.")
    show("unlink missing", os.unlink, "missing")
    show("getxattr", os.getxattr, "dir/file", "user.x")
    show("setxattr", os.setxattr, "dir/file", "user.x", b"1")


def exdev(a, b):
    open(os.path.join(a, "f"), "w").close()
    os.mkdir(os.path.join(a, "d"))
    show("rename file across mounts", os.rename, os.path.join(a, "f"), os.path.join(b, "f"))
    show("rename dir across mounts", os.rename, os.path.join(a, "d"), os.path.join(b, "d"))
    show("link across mounts", os.link, os.path.join(a, "f"), os.path.join(b, "f"))
    show("rename EXCHANGE across mounts", renameat2, os.path.join(a, "f"), os.path.join(b, "memory.max"), 2)


def enospc(d):
    """Writes 1 MiB chunks until the disk is full, then a page at a time,
    then reads every file back: all that was written is there."""
    os.chdir(d)
    written = {}
    chunk = 0
    full = None
    for size in [1 << 20, 4096]:
        while True:
            name = "f%d" % chunk
            data = bytes([chunk % 251 + 1]) * size
            fd = os.open(name, os.O_CREAT | os.O_WRONLY)
            try:
                n = os.write(fd, data)
                written[name] = data[:n]
            except OSError as e:
                full = errno.errorcode[e.errno]
                written[name] = b""
                break
            finally:
                os.close(fd)
            chunk += 1
    print("full: %s" % full)
    appended = b"x" * 8192
    fd = os.open("f0", os.O_WRONLY | os.O_APPEND)
    show("append to a full disk", os.write, fd, appended)
    os.close(fd)
    lost = [n for n, data in written.items() if open(n, "rb").read() != data]
    print("files: %d, bytes: %d, lost: %r" % (len(written), sum(map(len, written.values())), lost))
    os.unlink("f1")
    fd = os.open("f0", os.O_WRONLY | os.O_APPEND)
    show("append after freeing", os.write, fd, appended)
    os.close(fd)
    print("f0 grew: %s" % (os.stat("f0").st_size == (1 << 20) + 8192))


if __name__ == "__main__":
    if sys.argv[1] == "--exdev":
        exdev(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "--enospc":
        enospc(sys.argv[2])
    else:
        names_and_kinds(sys.argv[1])
