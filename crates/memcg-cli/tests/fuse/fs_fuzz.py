"""Random filesystem operations applied to two directories at once: a
`--fs` filesystem of `memcg run` (the one under test) and a host tmpfs
directory (the reference). Every result is compared (the errno, the bytes,
the listing, the stat fields both keep alike), and at the end the two trees.

    python3 fs_fuzz.py TEST_DIR REF_DIR [--seed N] [--ops N]
    python3 fs_fuzz.py --compare-trees DIR_A DIR_B

The first form exits 1 at the first difference, printing the seed, the
operation number and the last operations (replay with the same seed and
`--ops`); the second compares two trees only (a host directory behind
`--fs DIR=HOSTDIR` after the run, with its reference).
"""

import ctypes
import errno
import os
import random
import stat
import sys

LIBC = ctypes.CDLL(None, use_errno=True)
LIBC.renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
LIBC.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
AT_FDCWD = -100
RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2
FALLOC_MODES = [0, 1, 3]  # 0, KEEP_SIZE, PUNCH_HOLE | KEEP_SIZE

NAMES = ["a", "b", "c", "d", "e"]
MAX_DEPTH = 3
MAX_FDS = 8
MAX_FILE = 1 << 20


class Mismatch(Exception):
    pass


def call(f, *args):
    """('ok', value) or ('err', errno name)."""
    try:
        return ("ok", f(*args))
    except OSError as e:
        return ("err", errno.errorcode.get(e.errno, e.errno))


def renameat2(old, new, flags):
    if LIBC.renameat2(AT_FDCWD, old.encode(), AT_FDCWD, new.encode(), flags) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def fallocate(fd, mode, off, length):
    if LIBC.fallocate(fd, mode, off, length) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def stat_fields(st, dir_sizes=True):
    """What both keep alike: kind, mode, nlink, size (a directory's size
    too: the simulator counts it as tmpfs does, unless asked not to)."""
    size = st.st_size if (dir_sizes or not stat.S_ISDIR(st.st_mode)) else None
    return (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), st.st_nlink, size)


def tree(root, dir_sizes=True):
    """Every node under `root`: path -> (stat fields, contents or target),
    and the hard-link groups (paths sharing an inode, of regular files)."""
    nodes = {}
    by_ino = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            st = os.lstat(path)
            body = None
            if stat.S_ISREG(st.st_mode):
                with open(path, "rb") as f:
                    body = f.read()
                by_ino.setdefault(st.st_ino, []).append(rel)
            elif stat.S_ISLNK(st.st_mode):
                body = os.readlink(path)
            nodes[rel] = (stat_fields(st, dir_sizes), body)
    groups = sorted(sorted(g) for g in by_ino.values() if len(g) > 1)
    return nodes, groups


def compare_trees(a, b, dir_sizes=True):
    ta, ga = tree(a, dir_sizes)
    tb, gb = tree(b, dir_sizes)
    for path in sorted(set(ta) | set(tb)):
        if ta.get(path) != tb.get(path):
            short = lambda n: None if n is None else (n[0], n[1] if n[1] is None or len(n[1]) < 64 else "%d bytes, sha %x" % (len(n[1]), hash(n[1])))
            raise Mismatch("tree differs at %s: %r vs %r" % (path, short(ta.get(path)), short(tb.get(path))))
    if ga != gb:
        raise Mismatch("hard-link groups differ: %r vs %r" % (ga, gb))
    return len(ta)


class Fuzz:
    def __init__(self, test, ref, seed, dir_sizes):
        self.roots = (test, ref)
        self.rng = random.Random(seed)
        self.fds = []  # [(fd_test, fd_ref, rel path when opened)]
        self.log = []
        self.paths = []
        self.dir_sizes = dir_sizes
        self.dir_fds = False

    # -- choosing names --------------------------------------------------

    def refresh(self):
        ref = self.roots[1]
        self.paths = []
        for dirpath, dirnames, filenames in os.walk(ref):
            for name in dirnames + filenames:
                self.paths.append(os.path.relpath(os.path.join(dirpath, name), ref))
        self.paths.sort()

    def any_path(self):
        r = self.rng
        if self.paths and r.random() < 0.7:
            base = r.choice(self.paths)
            if r.random() < 0.3 and base.count("/") < MAX_DEPTH - 1:
                return base + "/" + r.choice(NAMES)
            return base
        depth = r.randint(1, MAX_DEPTH)
        return "/".join(r.choice(NAMES) for _ in range(depth))

    def both(self, rel):
        return [os.path.join(root, rel) for root in self.roots]

    # -- one operation on both sides --------------------------------------

    def same(self, what, f, *per_side):
        """Runs f on each side's arguments; they must agree. Returns the
        results (test, ref)."""
        self.log.append(what)
        results = [call(f, *args) for args in per_side]
        if results[0] != results[1]:
            raise Mismatch("%s: %r (memcg) vs %r (tmpfs)" % (what, results[0], results[1]))
        return results

    def paired(self, what, f, rel_args, extra=()):
        per_side = [[os.path.join(root, rel) for rel in rel_args] + list(extra) for root in self.roots]
        return self.same(what, f, *per_side)

    def op_mkdir(self):
        p = self.any_path()
        mode = self.rng.choice([0o755, 0o700, 0o777])
        self.paired("mkdir %s" % p, lambda path: os.mkdir(path, mode), [p])

    def op_rmdir(self):
        p = self.any_path()
        self.paired("rmdir %s" % p, os.rmdir, [p])

    def op_unlink(self):
        p = self.any_path()
        self.paired("unlink %s" % p, os.unlink, [p])

    def op_open(self):
        r = self.rng
        p = self.any_path()
        flags = r.choice([os.O_RDONLY, os.O_WRONLY, os.O_RDWR, os.O_RDWR])
        extras = [(os.O_CREAT, 0.6), (os.O_EXCL, 0.2), (os.O_TRUNC, 0.2),
                  (os.O_APPEND, 0.1), (os.O_NOFOLLOW, 0.1), (os.O_DIRECTORY, 0.05)]
        if r.random() < 0.05:
            # An unnamed file in a directory (O_TMPFILE: it goes with its
            # last close).
            flags = os.O_TMPFILE | r.choice([os.O_WRONLY, os.O_RDWR])
            extras = []
        for extra, chance in extras:
            if r.random() < chance:
                flags |= extra
        what = "open %s flags %#o" % (p, flags)
        self.log.append(what)
        results = [call(os.open, path, flags, 0o644) for path in self.both(p)]
        fds = [v for ok, v in results if ok == "ok"]
        if [ok for ok, _ in results] != ["ok", "ok"]:
            for fd in fds:
                os.close(fd)
            if results[0] != results[1]:
                raise Mismatch("%s: %r (memcg) vs %r (tmpfs)" % (what, results[0], results[1]))
        elif len(self.fds) >= MAX_FDS or (stat.S_ISDIR(os.fstat(fds[1]).st_mode) and not self.dir_fds):
            # An open directory removed reads as ENOENT on a --fs (fstat,
            # getdents), where tmpfs keeps it (nlink 0, empty): kept open
            # only with --keep-dir-fds until that is fixed.
            for fd in fds:
                os.close(fd)
        else:
            self.fds.append((fds[0], fds[1], p, flags))

    def op_close(self):
        if self.fds:
            fa, fb, p, _ = self.fds.pop(self.rng.randrange(len(self.fds)))
            self.same("close %s" % p, os.close, [fa], [fb])

    def pick_fd(self):
        if not self.fds:
            self.op_open()
        return self.rng.choice(self.fds) if self.fds else None

    def size_off(self):
        r = self.rng
        off = r.choice([0, r.randrange(8192), r.randrange(MAX_FILE), r.randrange(4) * 4096])
        size = r.choice([1, r.randrange(1, 100), r.randrange(1, 9000), r.randrange(1, 200000), 4096])
        return off, min(size, MAX_FILE - off) or 1

    def data(self, size):
        return self.rng.randbytes(size) if self.rng.random() < 0.5 else bytes([self.rng.randrange(256)]) * size

    def op_pwrite(self):
        f = self.pick_fd()
        if f:
            off, size = self.size_off()
            data = self.data(size)
            self.same("pwrite %s %d@%d" % (f[2], size, off), os.pwrite, [f[0], data, off], [f[1], data, off])

    def op_write(self):
        f = self.pick_fd()
        if f:
            size = self.size_off()[1]
            data = self.data(size)
            self.same("write %s %d" % (f[2], size), os.write, [f[0], data], [f[1], data])

    def op_pread(self):
        f = self.pick_fd()
        if f:
            off, size = self.size_off()
            self.same("pread %s %d@%d" % (f[2], size, off), os.pread, [f[0], size, off], [f[1], size, off])

    def op_read(self):
        f = self.pick_fd()
        if f:
            size = self.size_off()[1]
            self.same("read %s %d" % (f[2], size), os.read, [f[0], size], [f[1], size])

    def op_lseek(self):
        f = self.pick_fd()
        # A directory's offsets are the filesystem's own: FUSE's
        # generic_file_llseek and tmpfs's dcache_dir_lseek differ (SEEK_END
        # is EINVAL on tmpfs only), whatever the server does.
        if f and not stat.S_ISDIR(os.fstat(f[1]).st_mode):
            off = self.size_off()[0]
            how = self.rng.choice([os.SEEK_SET, os.SEEK_END, os.SEEK_CUR])
            self.same("lseek %s %d %d" % (f[2], off, how), os.lseek, [f[0], off, how], [f[1], off, how])

    def op_ftruncate(self):
        f = self.pick_fd()
        if f:
            size = self.size_off()[0]
            self.same("ftruncate %s %d" % (f[2], size), os.ftruncate, [f[0], size], [f[1], size])

    def op_truncate(self):
        p = self.any_path()
        size = self.size_off()[0]
        self.paired("truncate %s %d" % (p, size), os.truncate, [p], [size])

    def op_fallocate(self):
        f = self.pick_fd()
        if f:
            off, size = self.size_off()
            mode = self.rng.choice(FALLOC_MODES)
            what = "fallocate %s mode %d %d@%d" % (f[2], mode, size, off)
            self.same(what, fallocate, [f[0], mode, off, size], [f[1], mode, off, size])

    def op_fstat(self):
        f = self.pick_fd()
        if f:
            st = lambda fd: stat_fields(os.fstat(fd), self.dir_sizes)
            self.same("fstat %s" % f[2], st, [f[0]], [f[1]])

    def op_fsync(self):
        f = self.pick_fd()
        if f:
            sync = self.rng.choice([os.fsync, os.fdatasync])
            self.same("%s %s" % (sync.__name__, f[2]), sync, [f[0]], [f[1]])

    def op_stat(self):
        p = self.any_path()
        follow = self.rng.random() < 0.5
        st = lambda path: stat_fields(os.stat(path) if follow else os.lstat(path), self.dir_sizes)
        self.paired("%s %s" % ("stat" if follow else "lstat", p), st, [p])

    def op_listdir(self):
        p = self.rng.choice(["."] + [self.any_path() for _ in range(3)])
        self.paired("listdir %s" % p, lambda path: sorted(os.listdir(path)), [p])

    def op_rename(self):
        r = self.rng
        a, b = self.any_path(), self.any_path()
        if r.random() < 0.1 and "/" not in a:
            b = a + "/" + r.choice(NAMES)  # a directory into itself
        flags = r.choice([0, 0, RENAME_NOREPLACE, RENAME_EXCHANGE])
        self.paired("rename %s %s flags %d" % (a, b, flags), renameat2, [a, b], [flags])

    def op_link(self):
        a, b = self.any_path(), self.any_path()
        self.paired("link %s %s" % (a, b), os.link, [a, b])

    def op_symlink(self):
        target = self.rng.choice([self.any_path(), "../" + self.any_path(), "nowhere", "a/b/../c"])
        p = self.any_path()
        self.paired("symlink %s -> %s" % (p, target), lambda path: os.symlink(target, path), [p])

    def op_readlink(self):
        p = self.any_path()
        self.paired("readlink %s" % p, os.readlink, [p])

    def op_chmod(self):
        p = self.any_path()
        mode = self.rng.choice([0o644, 0o600, 0o755, 0o4755, 0o1777, 0o000])
        self.paired("chmod %s %o" % (p, mode), lambda path: os.chmod(path, mode), [p])

    def op_utime(self):
        p = self.any_path()
        ns = (self.rng.randrange(1 << 40) * 1000 + 123, self.rng.randrange(1 << 40) * 1000 + 456)

        def utime(path):
            os.utime(path, ns=ns, follow_symlinks=False)
            # Not atime: following a symbolic link touches its atime on
            # tmpfs (relatime), not over FUSE.
            return os.lstat(path).st_mtime_ns

        self.paired("utime %s" % p, utime, [p])

    def op_read_file(self):
        p = self.any_path()

        def whole(path):
            with open(path, "rb") as f:
                return f.read()

        self.paired("read_file %s" % p, whole, [p])

    OPS = [
        ("mkdir", 6), ("rmdir", 3), ("unlink", 4), ("open", 10), ("close", 5),
        ("pwrite", 10), ("write", 5), ("pread", 6), ("read", 4), ("lseek", 2),
        ("ftruncate", 3), ("truncate", 3), ("fallocate", 3), ("fstat", 3), ("fsync", 1),
        ("stat", 6), ("listdir", 4), ("rename", 8), ("link", 4), ("symlink", 3),
        ("readlink", 2), ("chmod", 2), ("utime", 2), ("read_file", 3),
    ]

    def run(self, nr_ops):
        names = [n for n, _ in self.OPS]
        weights = [w for _, w in self.OPS]
        for i in range(nr_ops):
            if i % 8 == 0:
                self.refresh()
            name = self.rng.choices(names, weights)[0]
            try:
                getattr(self, "op_" + name)()
            except Mismatch as e:
                raise Mismatch("op %d: %s" % (i, e)) from None
            if i % 500 == 499:
                self.check_trees(i)
        for fa, fb, _, _ in self.fds:
            os.close(fa)
            os.close(fb)
        self.fds = []
        return self.check_trees(nr_ops)

    def check_trees(self, i):
        try:
            return compare_trees(*self.roots, dir_sizes=self.dir_sizes)
        except Mismatch as e:
            raise Mismatch("after op %d: %s" % (i, e)) from None


def main(argv):
    if argv[1] == "--compare-trees":
        n = compare_trees(argv[2], argv[3], dir_sizes=False)
        print("trees equal: %d nodes" % n)
        return 0
    test, ref = argv[1], argv[2]
    seed, ops, dir_sizes, keep_dir_fds = 1, 2000, True, False
    rest = argv[3:]
    while rest:
        flag = rest.pop(0)
        if flag == "--seed":
            seed = int(rest.pop(0))
        elif flag == "--ops":
            ops = int(rest.pop(0))
        elif flag == "--no-dir-sizes":
            dir_sizes = False
        elif flag == "--keep-dir-fds":
            keep_dir_fds = True
    # The trees are one level down, so that a symbolic link climbing out
    # of one (`../x` at the top) lands in a directory holding only `r` on
    # both sides, not in two different host directories.
    test, ref = os.path.join(test, "r"), os.path.join(ref, "r")
    os.mkdir(test)
    os.mkdir(ref)
    fuzz = Fuzz(test, ref, seed, dir_sizes)
    fuzz.dir_fds = keep_dir_fds
    try:
        n = fuzz.run(ops)
    except Mismatch as e:
        print("fs_fuzz: seed %d: %s" % (seed, e), file=sys.stderr)
        print("fs_fuzz: last ops: %s" % "\n  ".join([""] + fuzz.log[-30:]), file=sys.stderr)
        print("fs_fuzz: replay: MEMCG_FUZZ_SEED=%d MEMCG_FUZZ_OPS=%d" % (seed, ops), file=sys.stderr)
        return 1
    print("fs_fuzz: seed %d: %d ops, trees equal (%d nodes)" % (seed, ops, n))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
