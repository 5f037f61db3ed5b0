//! The process's anonymous memory under the simulator: every region the
//! heap (`heap`, through `anon`) or the program (`mmap` of private
//! anonymous memory) maps is registered with a `userfaultfd` whose other
//! end the `memcg run` server holds (sent at start over the socket named
//! by `MEMCG_ANON_SOCKET`). The server resolves each fault (charging the
//! page to the process's simulated memory cgroup, or swapping it back in)
//! and learns of unmaps and moves from the kernel's events, and of the
//! program's `MADV_DONTNEED`s from `madvise` here (before they happen);
//! the process keeps running its own code. The loader's first `malloc`s
//! come before the constructor: the regions they map are remembered,
//! registered by the constructor, and the pages touched there charged by
//! the server then (`A`).
//!
//! The agent: a thread of the shim's own, on a stack no region of which
//! is registered, that drops the pages the server reclaimed
//! (`MADV_DONTNEED` of a page the server wrote-protected and copied out:
//! a page no longer write-protected was written or replaced since, and is
//! left alone), and says so on the socket. When the server goes (its socket ends), the agent kills
//! the process: its swapped-out pages would otherwise read as zeros.
//!
//! fork: the child's regions lose their registration (no
//! `UFFD_FEATURE_EVENT_FORK`), so before the fork the server brings every
//! swapped-out page of the process back in and keeps reclaim away
//! (`pthread_atfork` prepare, over a connection of its own); the child
//! starts afresh (its own `userfaultfd`, socket and agent), registers the
//! same regions again and write-protects them, so its first write to an
//! inherited page charges it as the kernel's copy on write does. Programs
//! that fork without the C library (`syscall(SYS_clone)`, `_Fork`) skip
//! this: documented as a limit.
//!
//! Locking: `REGIONS` (the registered regions, for the child) is one spin
//! lock, also held across `fork` (prepare to parent/child).

use core::ffi::{c_int, c_long, c_void};
use core::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};

use crate::sys;

/// The socket's path comes from here.
const ENV: &[u8] = b"MEMCG_ANON_SOCKET\0";

#[cfg(target_arch = "x86_64")]
mod nr {
    use core::ffi::c_long;
    pub const USERFAULTFD: c_long = 323;
    pub const MMAP: c_long = 9;
    pub const MUNMAP: c_long = 11;
    pub const MREMAP: c_long = 25;
    pub const MADVISE: c_long = 28;
    pub const SOCKET: c_long = 41;
    pub const CONNECT: c_long = 42;
    pub const SENDMSG: c_long = 46;
    pub const IOCTL: c_long = 16;
    pub const PREAD64: c_long = 17;
    pub const KILL: c_long = 62;
    pub const PRCTL: c_long = 157;
    pub const FCNTL: c_long = 72;
    pub const RT_SIGPROCMASK: c_long = 14;
}
#[cfg(target_arch = "aarch64")]
mod nr {
    use core::ffi::c_long;
    pub const USERFAULTFD: c_long = 282;
    pub const MMAP: c_long = 222;
    pub const MUNMAP: c_long = 215;
    pub const MREMAP: c_long = 216;
    pub const MADVISE: c_long = 233;
    pub const SOCKET: c_long = 198;
    pub const CONNECT: c_long = 203;
    pub const SENDMSG: c_long = 211;
    pub const IOCTL: c_long = 29;
    pub const PREAD64: c_long = 67;
    pub const KILL: c_long = 129;
    pub const PRCTL: c_long = 167;
    pub const FCNTL: c_long = 25;
    pub const RT_SIGPROCMASK: c_long = 135;
}

const UFFD_API: u64 = 0xAA;
const UFFDIO_API: c_long = 0xc018_aa3f;
const UFFDIO_REGISTER: c_long = 0xc020_aa00;
const UFFDIO_WRITEPROTECT: c_long = 0xc018_aa06;
const MODE_MISSING: u64 = 1;
const MODE_WP: u64 = 2;
/// `PAGEFAULT_FLAG_WP | EVENT_REMAP | EVENT_UNMAP | THREAD_ID`. Not
/// `EVENT_REMOVE`: an unread event makes every ioctl of the server fail
/// with `EAGAIN`, and the agent's drops would make one per page; drops are
/// told over the socket instead, and so is the program's own
/// `MADV_DONTNEED`/`MADV_FREE` (`madvise` below).
const FEATURES: u64 = 0x1 | 0x4 | 0x40 | 0x100;

const PROT_RW: c_int = 0x3;
const MAP_PRIVATE: c_int = 0x02;
const MAP_ANONYMOUS: c_int = 0x20;
const MADV_DONTNEED: c_int = 4;
const AF_UNIX: c_int = 1;
const SOCK_STREAM: c_int = 1;
const SOCK_CLOEXEC: c_int = 0o2_000_000;
const SIGKILL: c_int = 9;
const EBADF: c_int = 9;
const PAGE: usize = 4096;
/// The agent's stack.
const AGENT_STACK_BYTES: usize = 64 * 1024;
/// Regions remembered for a fork's child; past this, new ones are left
/// unregistered (their memory is then the host's alone).
const MAX_REGIONS: usize = 1 << 16;

/// The `userfaultfd` (-1: not in use) and the server's socket.
static UFFD: AtomicI32 = AtomicI32::new(-1);
static SOCK: AtomicI32 = AtomicI32::new(-1);
/// The connection a fork in progress holds (prepare to parent).
static FORK_CONN: AtomicI32 = AtomicI32::new(-1);
static ATFORK_DONE: AtomicBool = AtomicBool::new(false);
/// The token the server gave the fork in progress, for the child's hello.
static FORK_TOKEN: AtomicU64 = AtomicU64::new(0);

struct Regions {
    len: usize,
    list: [(usize, usize); MAX_REGIONS],
}

static REGIONS_LOCK: AtomicBool = AtomicBool::new(false);
static mut REGIONS: Regions = Regions {
    len: 0,
    list: [(0, 0); MAX_REGIONS],
};

fn lock_regions() {
    while REGIONS_LOCK
        .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        core::hint::spin_loop();
    }
}

fn unlock_regions() {
    // Release: pairs with the acquire in `lock_regions`.
    REGIONS_LOCK.store(false, Ordering::Release);
}

/// Runs `f` on the region list, locked.
fn with_regions<R>(f: impl FnOnce(&mut Regions) -> R) -> R {
    lock_regions();
    // SAFETY: the spin lock above serialises every access to REGIONS.
    let r = f(unsafe { &mut *core::ptr::addr_of_mut!(REGIONS) });
    unlock_regions();
    r
}

fn raw(nr: c_long, a: [usize; 6]) -> isize {
    // SAFETY: every caller passes the system call's arguments by value
    // or as pointers to live buffers of the sizes the call expects.
    unsafe { sys::syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]) as isize }
}

/// Whether the constructor ran. Regions the heap maps before it (the
/// loader's first `malloc`s) are remembered, and the constructor
/// registers them ([`adopt_early_regions`]).
static INITIALIZED: AtomicBool = AtomicBool::new(false);

/// Registers `[start, start + len)` (missing and write-protect faults),
/// if the process is under the simulator (before the constructor: only
/// remembers it, for the constructor).
pub(crate) fn register(start: usize, len: usize) {
    let uffd = UFFD.load(Ordering::Relaxed);
    if len == 0 {
        return;
    }
    if uffd < 0 {
        // Relaxed: the constructor runs before any other thread exists.
        if !INITIALIZED.load(Ordering::Relaxed) {
            remember(start, len);
        }
        return;
    }
    if register_range(uffd, start, len) {
        remember(start, len);
    }
}

fn register_range(uffd: c_int, start: usize, len: usize) -> bool {
    // struct uffdio_register: range { start, len }, mode, ioctls (out).
    let mut reg = [start as u64, len as u64, MODE_MISSING | MODE_WP, 0];
    raw(
        nr::IOCTL,
        [uffd as usize, UFFDIO_REGISTER as usize, reg.as_mut_ptr() as usize, 0, 0, 0],
    ) == 0
}

/// Remembers a registered region (moved by `mremap`) for a fork's child.
pub(crate) fn remember(start: usize, len: usize) {
    with_regions(|r| {
        if r.len < MAX_REGIONS {
            r.list[r.len] = (start, len);
            r.len += 1;
        }
    });
}

/// Forgets the regions inside `[start, start + len)` (whole ones: the
/// heap unmaps what it mapped).
pub(crate) fn forget(start: usize, len: usize) {
    with_regions(|r| {
        let mut i = 0;
        while i < r.len {
            let (s, l) = r.list[i];
            if s >= start && s + l <= start + len {
                r.len -= 1;
                r.list[i] = r.list[r.len];
            } else {
                i += 1;
            }
        }
    });
}

/// The shim's constructor: under `memcg run` with anonymous memory on,
/// connects to the server.
pub(crate) extern "C" fn init() {
    let started = sys::env(ENV).is_some() && start(0);
    INITIALIZED.store(true, Ordering::Relaxed);
    if !started {
        // The regions remembered for registration stay the host's.
        with_regions(|r| r.len = 0);
        return;
    }
    adopt_early_regions();
    if !ATFORK_DONE.swap(true, Ordering::Relaxed) {
        // SAFETY: three plain functions of ours.
        unsafe { sys::pthread_atfork(Some(prepare), Some(parent), Some(child)) };
    }
}

/// Registers the regions the heap mapped before the process had its
/// `userfaultfd` (the loader's first allocations) and has the server
/// charge the pages already touched there (`A`), as the kernel charged
/// each at its first touch. A region that cannot be registered is
/// forgotten: it stays the host's. Runs in the constructor, before any
/// other thread of the program.
fn adopt_early_regions() {
    let uffd = UFFD.load(Ordering::Relaxed);
    let mut i = 0;
    while let Some((start, len)) = with_regions(|r| (i < r.len).then(|| r.list[i])) {
        if register_range(uffd, start, len) {
            ask(b'A', start, len);
            i += 1;
        } else {
            forget(start, len);
        }
    }
}

/// Makes the `userfaultfd`, hands it to the server and starts the agent;
/// false (and nothing is registered) if any of it fails.
fn start(token: u64) -> bool {
    // O_CLOEXEC | O_NONBLOCK.
    let uffd = high(raw(nr::USERFAULTFD, [0o2_000_000 | 0o4000, 0, 0, 0, 0, 0]) as c_int);
    if uffd < 0 {
        return false;
    }
    let mut api = [UFFD_API, FEATURES, 0];
    let ok = raw(nr::IOCTL, [uffd as usize, UFFDIO_API as usize, api.as_mut_ptr() as usize, 0, 0, 0]) == 0;
    let sock = if ok { high(connect()) } else { -1 };
    if sock < 0 || !hello(sock, uffd, token) || !start_agent(sock) {
        // SAFETY: closing our own descriptors.
        unsafe {
            sys::close(uffd);
            if sock >= 0 {
                sys::close(sock);
            }
        }
        return false;
    }
    SOCK.store(sock, Ordering::Relaxed);
    UFFD.store(uffd, Ordering::Relaxed);
    true
}

/// Descriptors of the shim's own live from here up, out of the way of a
/// program's numbering (`exec 3< FILE` in a shell reuses low numbers).
const HIGH_FD: usize = 900;

/// `fd` moved to [`HIGH_FD`] or above (close-on-exec), or left where it is
/// if that fails (a low descriptor limit).
fn high(fd: c_int) -> c_int {
    if fd < 0 {
        return fd;
    }
    // F_DUPFD_CLOEXEC.
    let moved = raw(nr::FCNTL, [fd as usize, 1030, HIGH_FD, 0, 0, 0]) as c_int;
    if moved < 0 {
        return fd;
    }
    // SAFETY: our own descriptor, now duplicated.
    unsafe { sys::close(fd) };
    moved
}

/// A connection to the server's socket, or -1.
fn connect() -> c_int {
    let Some(path) = sys::env(ENV) else {
        return -1;
    };
    // struct sockaddr_un: family, then the path (108 bytes).
    let mut addr = [0u8; 110];
    if path.len() >= 108 {
        return -1;
    }
    addr[..2].copy_from_slice(&(AF_UNIX as u16).to_ne_bytes());
    addr[2..2 + path.len()].copy_from_slice(path);
    let fd = raw(nr::SOCKET, [AF_UNIX as usize, (SOCK_STREAM | SOCK_CLOEXEC) as usize, 0, 0, 0, 0]) as c_int;
    if fd < 0 {
        return -1;
    }
    if raw(nr::CONNECT, [fd as usize, addr.as_ptr() as usize, addr.len(), 0, 0, 0]) != 0 {
        // SAFETY: our own descriptor.
        unsafe { sys::close(fd) };
        return -1;
    }
    fd
}

/// Sends a request: `byte`, a pid (this process's, in its pid namespace,
/// or a child's) and a fork token (0: none), with descriptor `fd`
/// attached if not -1.
fn send(sock: c_int, byte: u8, pid: c_int, token: u64, fd: c_int) -> bool {
    let mut data = [0u8; 13];
    data[0] = byte;
    data[1..5].copy_from_slice(&pid.to_ne_bytes());
    data[5..].copy_from_slice(&token.to_ne_bytes());
    let iov = [data.as_ptr() as usize, data.len()];
    // struct cmsghdr (len, level SOL_SOCKET, type SCM_RIGHTS) + one int,
    // padded to 8 bytes.
    let mut cmsg = [0u8; 24];
    cmsg[..8].copy_from_slice(&20u64.to_ne_bytes());
    cmsg[8..12].copy_from_slice(&1i32.to_ne_bytes());
    cmsg[12..16].copy_from_slice(&1i32.to_ne_bytes());
    cmsg[16..20].copy_from_slice(&fd.to_ne_bytes());
    // struct msghdr: name, namelen, iov, iovlen, control, controllen, flags.
    let msg: [usize; 7] = [
        0,
        0,
        iov.as_ptr() as usize,
        1,
        if fd >= 0 { cmsg.as_ptr() as usize } else { 0 },
        if fd >= 0 { cmsg.len() } else { 0 },
        0,
    ];
    raw(nr::SENDMSG, [sock as usize, msg.as_ptr() as usize, 0, 0, 0, 0]) == data.len() as isize
}

fn own_pid() -> c_int {
    // SAFETY: getpid has no preconditions.
    unsafe { sys::getpid() }
}

/// Reads one byte from `sock`; None at its end or on an error.
fn recv_byte(sock: c_int) -> Option<u8> {
    let mut b = [0u8; 1];
    loop {
        // SAFETY: one byte into `b`.
        let n = unsafe { sys::read(sock, b.as_mut_ptr().cast(), 1) };
        match n {
            1 => return Some(b[0]),
            _ if n < 0 && sys::errno() == sys::EINTR => {}
            _ => return None,
        }
    }
}

/// Reads the server's answer to a fork (`K` and a token) into
/// [`FORK_TOKEN`].
fn recv_token(conn: c_int) -> bool {
    let mut answer = [0u8; 9];
    if !read_exact(conn, &mut answer) || answer[0] != b'K' {
        return false;
    }
    let mut token = [0u8; 8];
    token.copy_from_slice(&answer[1..]);
    FORK_TOKEN.store(u64::from_ne_bytes(token), Ordering::Relaxed);
    true
}

/// Hands `uffd` to the server (with the token of the fork that made
/// this process, if any) and waits for it to be served.
fn hello(sock: c_int, uffd: c_int, token: u64) -> bool {
    send(sock, b'H', own_pid(), token, uffd) && recv_byte(sock) == Some(b'K')
}

/// Starts the agent, reading `sock`, on a stack of its own (never
/// registered).
fn start_agent(sock: c_int) -> bool {
    let stack = raw(
        nr::MMAP,
        [0, AGENT_STACK_BYTES, PROT_RW as usize, (MAP_PRIVATE | MAP_ANONYMOUS) as usize, usize::MAX, 0],
    );
    if stack < 0 {
        return false;
    }
    let mut attr = [0u64; 8];
    let mut thread = 0u64;
    // The agent takes no signal of the program's (a signal sent to the
    // process must reach a thread of the program's): it starts with every
    // signal blocked, as this thread has them for the moment, but for the
    // C library's own two, which every thread must take (SIGCANCEL, 32;
    // SIGSETXID, 33: `setuid` waits for each thread to run its handler).
    let all = [u64::MAX & !(1 << 31) & !(1 << 32)];
    let mut before = [0u64];
    raw(nr::RT_SIGPROCMASK, [0, all.as_ptr() as usize, before.as_mut_ptr() as usize, 8, 0, 0]);
    // SAFETY: `attr` is larger than glibc's pthread_attr_t (56 bytes);
    // the stack is ours for the thread's life (never unmapped).
    let started = unsafe {
        sys::pthread_attr_init(attr.as_mut_ptr().cast()) == 0
            && sys::pthread_attr_setstack(attr.as_mut_ptr().cast(), stack as *mut c_void, AGENT_STACK_BYTES) == 0
            && sys::pthread_create(&mut thread, attr.as_ptr().cast(), agent, sock as usize as *mut c_void) == 0
    };
    // SIG_SETMASK: as it was.
    raw(nr::RT_SIGPROCMASK, [2, before.as_ptr() as usize, 0, 8, 0, 0]);
    started
}

/// Drop requests the agent takes at once, and answers it writes at once.
const BATCH: usize = 64;
/// An answer: `d` or `s`, the page's start and end.
const ANSWER_BYTES: usize = 17;

/// The agent's loop: each 8 bytes the server sends on `sock` are the
/// address of a page to drop. It takes every request waiting (up to
/// [`BATCH`]) in one read and answers them all in one write.
extern "C" fn agent(sock: *mut c_void) -> *mut c_void {
    let sock = sock as usize as c_int;
    // PR_SET_NAME: the server leaves this thread out of cgroup.threads.
    raw(nr::PRCTL, [15, b"memcg-agent\0".as_ptr() as usize, 0, 0, 0, 0]);
    let pagemap = sys::open_raw(sys::AT_FDCWD, b"/proc/self/pagemap\0", sys::O_CLOEXEC, 0);
    let mut requests = [0u8; 8 * BATCH];
    let mut answers = [0u8; ANSWER_BYTES * BATCH];
    loop {
        sys::set_errno(0);
        let Some(n) = read_requests(sock, &mut requests) else {
            if sys::errno() == EBADF {
                // The program closed every descriptor (`closefrom`, before
                // an exec): no more drops; the server sees its end.
                return core::ptr::null_mut();
            }
            // The server is gone, and with it the memory it held for us.
            // SAFETY: getpid has no preconditions.
            let pid = unsafe { sys::getpid() };
            raw(nr::KILL, [pid as usize, SIGKILL as usize, 0, 0, 0, 0]);
            return core::ptr::null_mut();
        };
        let mut len = 0;
        for request in requests[..n].chunks_exact(8) {
            let mut word = [0u8; 8];
            word.copy_from_slice(request);
            let addr = u64::from_ne_bytes(word) as usize;
            let what = drop_page(pagemap, addr);
            answer(&mut answers[len..len + ANSWER_BYTES], what, addr);
            len += ANSWER_BYTES;
        }
        write_all(sock, &answers[..len]);
    }
}

/// Drops the page at `addr` if it is still write-protected: `d` if it
/// was dropped, `s` if it was left.
fn drop_page(pagemap: c_int, addr: usize) -> u8 {
    if !still_protected(pagemap, addr) {
        return b's';
    }
    if raw(nr::MADVISE, [addr, PAGE, MADV_DONTNEED as usize, 0, 0, 0]) == 0 {
        return b'd';
    }
    // Locked (`mlock`): the page stays; its writers must not wait for a
    // drop that will not come.
    let mut wp = [addr as u64, PAGE as u64, 0];
    let uffd = UFFD.load(Ordering::Relaxed) as usize;
    raw(nr::IOCTL, [uffd, UFFDIO_WRITEPROTECT as usize, wp.as_mut_ptr() as usize, 0, 0, 0]);
    b's'
}

/// Reads at least one whole request from `fd` into `buf`, and whatever
/// more is waiting: the bytes read, a multiple of 8; `None` at the end
/// or on an error.
fn read_requests(fd: c_int, buf: &mut [u8]) -> Option<usize> {
    let mut done = 0;
    loop {
        // SAFETY: reads into the rest of `buf`.
        let n = unsafe { sys::read(fd, buf[done..].as_mut_ptr().cast(), buf.len() - done) };
        if n < 0 && sys::errno() == sys::EINTR {
            continue;
        }
        if n <= 0 {
            return None;
        }
        done += n as usize;
        if done % 8 == 0 {
            return Some(done);
        }
    }
}

/// One answer into `out`: `what` (`d` the page at `start` was dropped,
/// `s` it was left), the page's start and end.
fn answer(out: &mut [u8], what: u8, start: usize) {
    out[0] = what;
    out[1..9].copy_from_slice(&(start as u64).to_ne_bytes());
    out[9..ANSWER_BYTES].copy_from_slice(&((start + PAGE) as u64).to_ne_bytes());
}

/// Writes all of `bytes` to `fd` (the agent is the only writer of its
/// socket); gives up on an error (the server is gone: the next read says
/// so).
fn write_all(fd: c_int, mut bytes: &[u8]) {
    while !bytes.is_empty() {
        // SAFETY: writes from `bytes`.
        let n = unsafe { sys::write(fd, bytes.as_ptr().cast(), bytes.len()) };
        if n < 0 && sys::errno() == sys::EINTR {
            continue;
        }
        if n <= 0 {
            return;
        }
        bytes = &bytes[n as usize..];
    }
}

/// Asks the server `what` (`R` forget, `P` page out, `A` adopt) of
/// `[start, start + len)` and waits for it to be done.
fn ask(what: u8, start: usize, len: usize) {
    let conn = connect();
    if conn < 0 {
        return;
    }
    let len = (len as u64).to_ne_bytes();
    // SAFETY: writes `len` after the request.
    if send(conn, what, own_pid(), start as u64, -1)
        && unsafe { sys::write(conn, len.as_ptr().cast(), 8) } == 8
    {
        recv_byte(conn);
    }
    // SAFETY: our own descriptor.
    unsafe { sys::close(conn) };
}

const MADV_FREE: c_int = 8;
const MADV_REMOVE: c_int = 9;
const MADV_PAGEOUT: c_int = 21;

/// `madvise`: before the program's own `MADV_DONTNEED`, `MADV_FREE` or
/// `MADV_REMOVE` of memory the server holds, the server forgets the pages
/// there (their charges and swap slots go), and only then are they
/// dropped: a touch after `madvise` returns finds nothing of the old
/// bytes, never a stale copy from swap. `MADV_PAGEOUT` swaps the range
/// out through the server.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn madvise(addr: *mut c_void, len: usize, advice: c_int) -> c_int {
    let held = SOCK.load(Ordering::Relaxed) >= 0;
    if held && matches!(advice, MADV_DONTNEED | MADV_FREE | MADV_REMOVE) {
        ask(b'R', addr as usize, len);
    }
    let rc = raw(nr::MADVISE, [addr as usize, len, advice as usize, 0, 0, 0]);
    if rc < 0 {
        sys::set_errno(-rc as c_int);
        return -1;
    }
    if held && advice == MADV_PAGEOUT {
        ask(b'P', addr as usize, len);
    }
    0
}

/// Whether the page at `addr` is still write-protected (pagemap's
/// `PM_UFFD_WP`, bit 57): the server's copy of it is then current.
fn still_protected(pagemap: c_int, addr: usize) -> bool {
    let mut entry = [0u8; 8];
    let n = raw(
        nr::PREAD64,
        [pagemap as usize, entry.as_mut_ptr() as usize, 8, (addr / PAGE) * 8, 0, 0],
    );
    n == 8 && u64::from_ne_bytes(entry) & (1 << 57) != 0
}

fn read_exact(fd: c_int, buf: &mut [u8]) -> bool {
    let mut done = 0;
    while done < buf.len() {
        // SAFETY: reads into the rest of `buf`.
        let n = unsafe { sys::read(fd, buf[done..].as_mut_ptr().cast(), buf.len() - done) };
        if n < 0 && sys::errno() == sys::EINTR {
            continue;
        }
        if n <= 0 {
            return false;
        }
        done += n as usize;
    }
    true
}

/// `pthread_atfork` prepare: the server brings every swapped-out page of
/// the process back and keeps reclaim away until the fork is done.
extern "C" fn prepare() {
    lock_regions();
    if UFFD.load(Ordering::Relaxed) < 0 {
        return;
    }
    let conn = connect();
    if conn >= 0 && send(conn, b'F', own_pid(), 0, -1) && recv_token(conn) {
        FORK_CONN.store(conn, Ordering::Relaxed);
    } else if conn >= 0 {
        // SAFETY: our own descriptor.
        unsafe { sys::close(conn) };
    }
}

/// `pthread_atfork` parent: the fork is done; reclaim may come back.
extern "C" fn parent() {
    FORK_TOKEN.store(0, Ordering::Relaxed);
    let conn = FORK_CONN.swap(-1, Ordering::Relaxed);
    if conn >= 0 {
        // SAFETY: our own descriptor; closing it ends the fork.
        unsafe { sys::close(conn) };
    }
    unlock_regions();
}

/// `pthread_atfork` child: a process of its own to the server, with the
/// parent's regions registered again and write-protected.
extern "C" fn child() {
    let conn = FORK_CONN.swap(-1, Ordering::Relaxed);
    let (uffd, sock) = (UFFD.swap(-1, Ordering::Relaxed), SOCK.swap(-1, Ordering::Relaxed));
    // SAFETY: the parent's descriptors, copied into this process.
    unsafe {
        for fd in [conn, uffd, sock] {
            if fd >= 0 {
                sys::close(fd);
            }
        }
    }
    if uffd < 0 || !start(FORK_TOKEN.swap(0, Ordering::Relaxed)) {
        // SAFETY: the lock taken in `prepare`.
        with_regions_locked(|r| r.len = 0);
        unlock_regions();
        return;
    }
    let uffd = UFFD.load(Ordering::Relaxed);
    with_regions_locked(|r| {
        for &(start, len) in &r.list[..r.len] {
            if register_range(uffd, start, len) {
                // struct uffdio_writeprotect: range, mode (WP).
                let mut wp = [start as u64, len as u64, 1];
                raw(nr::IOCTL, [uffd as usize, UFFDIO_WRITEPROTECT as usize, wp.as_mut_ptr() as usize, 0, 0, 0]);
            }
        }
    });
    unlock_regions();
}

/// Runs `f` on the region list, whose lock the caller holds.
fn with_regions_locked<R>(f: impl FnOnce(&mut Regions) -> R) -> R {
    // SAFETY: the caller holds REGIONS_LOCK.
    f(unsafe { &mut *core::ptr::addr_of_mut!(REGIONS) })
}

const MAP_SHARED: c_int = 0x01;
const MAP_SHARED_VALIDATE: c_int = 0x03;
const MAP_STACK: c_int = 0x2_0000;
const MAP_HUGETLB: c_int = 0x4_0000;

/// `mmap`: the program's private anonymous mappings (not stacks, not
/// huge pages) are registered; everything else passes through.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mmap(
    addr: *mut c_void,
    len: usize,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    offset: i64,
) -> *mut c_void {
    let p = raw(
        nr::MMAP,
        [addr as usize, len, prot as usize, flags as usize, fd as usize, offset as usize],
    );
    if (-4095..0).contains(&p) {
        sys::set_errno(-p as c_int);
        return usize::MAX as *mut c_void;
    }
    let private_anon = flags & MAP_ANONYMOUS != 0 && flags & MAP_SHARED_VALIDATE != MAP_SHARED;
    if private_anon && flags & (MAP_STACK | MAP_HUGETLB) == 0 {
        register(p as usize, len.next_multiple_of(PAGE));
    }
    p as *mut c_void
}

/// `mmap64`: the same call on 64-bit systems.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mmap64(
    addr: *mut c_void,
    len: usize,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    offset: i64,
) -> *mut c_void {
    // SAFETY: the same contract.
    unsafe { mmap(addr, len, prot, flags, fd, offset) }
}

/// `munmap`: the region is forgotten for a fork's child (the server
/// learns of the unmap from the kernel).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn munmap(addr: *mut c_void, len: usize) -> c_int {
    let rc = raw(nr::MUNMAP, [addr as usize, len, 0, 0, 0, 0]);
    if rc < 0 {
        sys::set_errno(-rc as c_int);
        return -1;
    }
    forget(addr as usize, len.next_multiple_of(PAGE));
    0
}

/// After a wait reaped child `pid`: the server has released its memory
/// before the wait returns, as the kernel's exit has (the child's end of
/// its socket closes as it dies; the server takes a moment to see it).
fn reaped(pid: c_int) {
    if pid <= 0 || sys::env(ENV).is_none() {
        return;
    }
    let conn = connect();
    if conn < 0 {
        return;
    }
    if send(conn, b'W', pid, 0, -1) {
        recv_byte(conn);
    }
    // SAFETY: our own descriptor.
    unsafe { sys::close(conn) };
}

const WUNTRACED: c_int = 2;
const WCONTINUED: c_int = 8;

/// Whether a wait status says the child ended (not stopped or
/// continued); without a status, whether the options let it say more.
fn ended(status: *const c_int, options: c_int) -> bool {
    if status.is_null() {
        return options & (WUNTRACED | WCONTINUED) == 0;
    }
    // SAFETY: the caller's status word, just filled by the wait.
    let s = unsafe { *status };
    // WIFEXITED or WIFSIGNALED.
    s & 0x7f == 0 || ((s & 0x7f) + 1) as i8 >> 1 > 0
}

/// `waitpid`, then [`reaped`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn waitpid(pid: c_int, status: *mut c_int, options: c_int) -> c_int {
    let Some(next) = sys::next!("waitpid", unsafe extern "C" fn(c_int, *mut c_int, c_int) -> c_int) else {
        return -1;
    };
    let mut own = 0;
    let status = if status.is_null() { &mut own } else { status };
    // SAFETY: the caller's arguments.
    let r = unsafe { next(pid, status, options) };
    if r > 0 && ended(status, options) {
        reaped(r);
    }
    r
}

/// `wait`: `waitpid(-1, status, 0)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn wait(status: *mut c_int) -> c_int {
    // SAFETY: the same contract.
    unsafe { waitpid(-1, status, 0) }
}

/// `wait4`, then [`reaped`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn wait4(pid: c_int, status: *mut c_int, options: c_int, usage: *mut c_void) -> c_int {
    let Some(next) = sys::next!("wait4", unsafe extern "C" fn(c_int, *mut c_int, c_int, *mut c_void) -> c_int) else {
        return -1;
    };
    let mut own = 0;
    let status = if status.is_null() { &mut own } else { status };
    // SAFETY: the caller's arguments.
    let r = unsafe { next(pid, status, options, usage) };
    if r > 0 && ended(status, options) {
        reaped(r);
    }
    r
}

/// `waitid`, then [`reaped`] for an exited, killed or dumped child reaped
/// (not with `WNOWAIT`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn waitid(idtype: c_int, id: u32, info: *mut c_int, options: c_int) -> c_int {
    let Some(next) = sys::next!("waitid", unsafe extern "C" fn(c_int, u32, *mut c_int, c_int) -> c_int) else {
        return -1;
    };
    // SAFETY: the caller's arguments.
    let r = unsafe { next(idtype, id, info, options) };
    const WNOWAIT: c_int = 0x0100_0000;
    if r == 0 && !info.is_null() && options & WNOWAIT == 0 {
        // siginfo_t: si_signo, si_errno, si_code, (pad), si_pid.
        // SAFETY: the siginfo the wait filled.
        let (code, pid) = unsafe { (*info.add(2), *info.add(4)) };
        // CLD_EXITED, CLD_KILLED, CLD_DUMPED.
        if (1..=3).contains(&code) {
            reaped(pid);
        }
    }
    r
}
