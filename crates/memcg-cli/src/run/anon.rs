//! The server's side of CMD's anonymous memory (`memcg run --anon on`):
//! the shim in each process hands over a `userfaultfd` on a socket, and a
//! handler thread per process turns its faults and events into the
//! simulator's ([`memcg_sim::host_mm`]).
//!
//! The socket (`anon.sock` in the shim's directory, named to the shim by
//! `MEMCG_ANON_SOCKET`) takes two kinds of connection, told apart by
//! their first byte:
//!
//! - `H` with the `userfaultfd` attached (`SCM_RIGHTS`): a process
//!   (identified by `SO_PEERCRED`, in this server's pid namespace) puts
//!   its memory under the simulator; answered `K` once served. The
//!   connection stays: the server writes to it the address of each page
//!   it reclaimed (8 bytes), for the shim's agent to drop; its end is the
//!   process's end (exit, exec, kill), which releases the memory.
//! - `F`: the process is about to fork: its handler brings every page on
//!   swap back in and keeps reclaim away until this connection closes
//!   (after the fork); answered `K`.
//! - `P`, `R`, `A` with a range: the program's `MADV_PAGEOUT`, its own
//!   `MADV_DONTNEED` about to be made, and a range registered only after
//!   pages there were touched (the heap's first chunk, mapped by the
//!   loader's first `malloc`), whose touched pages are charged then;
//!   answered `K` when done.
//!
//! A handler serves one process: it polls the `userfaultfd` (faults;
//! unmap, remove and remap events), its connection (the end) and an
//! eventfd (fork requests), and retries faults that met `EAGAIN` (an event
//! was waiting) after reading the events.

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::FileExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use memcg::swapops::SwapEntry;
use memcg_sim::Sim;
use memcg_sim::host_mm::{FaultIo, FaultKind, FaultOutcome, HostMm, HostPages};

use crate::fuse::FsView;

/// The socket's file name, in the shim's directory.
const SOCKET_NAME: &str = "anon.sock";

/// The variable that names the socket to the shim.
pub(super) const SOCKET_ENV: &str = "MEMCG_ANON_SOCKET";

const UFFDIO_WAKE: libc::c_ulong = 0x8010_aa02;
const UFFDIO_COPY: libc::c_ulong = 0xc028_aa03;
const UFFDIO_ZEROPAGE: libc::c_ulong = 0xc020_aa04;
const UFFDIO_WRITEPROTECT: libc::c_ulong = 0xc018_aa06;
const UFFD_EVENT_PAGEFAULT: u8 = 0x12;
const UFFD_EVENT_REMAP: u8 = 0x14;
const UFFD_EVENT_UNMAP: u8 = 0x16;
const UFFD_PAGEFAULT_FLAG_WRITE: u64 = 1;
const UFFD_PAGEFAULT_FLAG_WP: u64 = 2;
/// `struct uffd_msg`.
const MSG_BYTES: usize = 32;
const PAGE: u64 = 4096;

static ZERO_PAGE: [u8; PAGE as usize] = [0; PAGE as usize];

/// Zeros for the largest folio fill (2M, `MAX_ANON_ORDER`), made once:
/// the source of [`FaultIo::fill_zero`]'s copies.
fn zero_folio() -> &'static [u8] {
    static ZEROS: OnceLock<Vec<u8>> = OnceLock::new();
    ZEROS.get_or_init(|| vec![0; (PAGE as usize) << memcg::huge_memory::MAX_ANON_ORDER])
}

/// What a process's handler is handed, in order: by its reader (the
/// `userfaultfd`'s messages, the connection's end) and by the accept
/// thread (forks).
enum Msg {
    Fault(u64, FaultKind),
    /// The program's own `MADV_DONTNEED`/`MADV_FREE` about to be made
    /// (asked by the shim); say when the pages are forgotten.
    Forget(u64, u64, mpsc::Sender<u64>),
    Unmap(u64, u64),
    /// The agent dropped a page reclaim swapped out.
    Dropped(u64),
    /// The agent left a page reclaim asked it to drop.
    NotDropped(u64),
    Remap(u64, u64, u64),
    /// Pin (no reclaim until the fork is done) and hand over a second
    /// reference to every page on swap, for the child.
    Fork(mpsc::Sender<Vec<(u64, SwapEntry)>>),
    /// The fork is over.
    Unpin,
    /// `MADV_PAGEOUT` of a range; say how many pages went.
    Pageout(u64, u64, mpsc::Sender<u64>),
    /// A range registered late: charge the pages touched there before;
    /// say how many.
    Adopt(u64, u64, mpsc::Sender<u64>),
    /// The process is gone.
    End,
}

static SERIAL: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The served processes by their pid in CMD's pid namespace, so that a
/// wait that reaped one can wait for its memory to be released.
#[derive(Default)]
struct Live {
    /// Every process image served under each pid (an exec'd image may
    /// still be releasing as the new one runs).
    serials: Mutex<HashMap<u32, Vec<u64>>>,
    /// The host pid of each pid in CMD's namespace served, until reaped.
    hosts: Mutex<HashMap<u32, u32>>,
    changed: Condvar,
}

/// How long a wait waits for a reaped child's memory to go.
const RELEASE_WAIT: Duration = Duration::from_secs(2);

impl Live {
    fn begin(&self, ns_pid: u32, serial: u64, host_pid: u32) {
        lock(&self.serials).entry(ns_pid).or_default().push(serial);
        lock(&self.hosts).insert(ns_pid, host_pid);
    }

    fn end(&self, ns_pid: u32, serial: u64) {
        let mut serials = lock(&self.serials);
        if let Some(list) = serials.get_mut(&ns_pid) {
            list.retain(|&s| s != serial);
            if list.is_empty() {
                serials.remove(&ns_pid);
            }
        }
        self.changed.notify_all();
    }

    /// Waits until every image of `ns_pid` was released; its host pid,
    /// if it was ever served.
    fn wait_gone(&self, ns_pid: u32) -> Option<u32> {
        let serials = lock(&self.serials);
        let _ = self
            .changed
            .wait_timeout_while(serials, RELEASE_WAIT, |s| s.contains_key(&ns_pid));
        lock(&self.hosts).remove(&ns_pid)
    }
}

/// The socket and its accept thread; dropping it removes the socket.
pub(super) struct AnonServer {
    path: PathBuf,
}

impl AnonServer {
    /// Listens in `dir` (the shim's directory) and serves processes of
    /// the machine `view` shows.
    pub(super) fn start(dir: &Path, view: Arc<FsView>) -> io::Result<Self> {
        let path = dir.join(SOCKET_NAME);
        let listener = UnixListener::bind(&path)?;
        let shared = Arc::new(Shared {
            forks: Forks::new(Arc::clone(view.sim())),
            view,
            mailboxes: Mutex::new(HashMap::new()),
            live: Live::default(),
        });
        std::thread::Builder::new()
            .name("memcg-anon".into())
            .spawn(move || accept_loop(&listener, &shared))?;
        Ok(Self { path })
    }

    /// The socket's path (the shim's `MEMCG_ANON_SOCKET`).
    pub(super) fn socket_path(dir: &Path) -> PathBuf {
        dir.join(SOCKET_NAME)
    }
}

impl Drop for AnonServer {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// What the connections share.
struct Shared {
    view: Arc<FsView>,
    /// Each served process's handler, by (host) pid, with its serial
    /// number (a process that exec'd is served anew under its pid).
    mailboxes: Mutex<HashMap<u32, (u64, mpsc::Sender<Msg>)>>,
    live: Live,
    forks: Forks,
}

fn accept_loop(listener: &UnixListener, shared: &Arc<Shared>) {
    for conn in listener.incoming() {
        let Ok(conn) = conn else { continue };
        let shared = Arc::clone(shared);
        // A connection's first message decides; a slow client blocks only
        // its own thread.
        let _ = std::thread::Builder::new()
            .name("memcg-anon-conn".into())
            .spawn(move || {
                if let Err(e) = connection(conn, &shared) {
                    eprintln!("memcg run: anonymous memory: {e}");
                }
            });
    }
}

/// Serves one connection (see the module docs).
fn connection(conn: UnixStream, shared: &Shared) -> io::Result<()> {
    let pid = peer_pid(&conn)?;
    let (kind, ns_pid, token, fd) = recv_with_fd(&conn)?;
    match (kind, fd) {
        (b'H', Some(uffd)) => serve(conn, shared, pid, ns_pid, token, uffd),
        (b'W', None) => {
            if let Some(host_pid) = shared.live.wait_gone(ns_pid) {
                shared.view.host_procs().reaped(host_pid);
            }
            write_byte(&conn, b'K')
        }
        (b'F', None) => fork_window(conn, pid, shared),
        (b'P' | b'R' | b'A', None) => range_request(conn, kind, pid, token, shared),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "unknown request",
        )),
    }
}

/// The `H` connection: serves process `pid` (`ns_pid` in CMD's pid
/// namespace) until it is gone, then releases its memory.
fn serve(
    conn: UnixStream,
    shared: &Shared,
    pid: u32,
    ns_pid: u32,
    token: u64,
    uffd: OwnedFd,
) -> io::Result<()> {
    let view = &shared.view;
    let task = view
        .host_procs()
        .task(pid)
        .map_err(|e| io::Error::from_raw_os_error(e.code()))?;
    let host = UffdPages::new(uffd, pid, conn.try_clone()?)?;
    let uffd = Arc::clone(&host.uffd);
    let mm = view.sim().attach_host_mm(&task, Box::new(host));
    mm.inherit(shared.forks.claim(token));
    let (tx, rx) = mpsc::channel();
    // Relaxed: a unique number, nothing more.
    let serial = SERIAL.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    lock(&shared.mailboxes).insert(pid, (serial, tx.clone()));
    shared.live.begin(ns_pid, serial, pid);
    write_byte(&conn, b'K')?;
    let queued = Arc::new(AtomicUsize::new(0));
    let reader = {
        let (mm, uffd, queued) = (Arc::clone(&mm), Arc::clone(&uffd), Arc::clone(&queued));
        std::thread::Builder::new()
            .name("memcg-anon-read".into())
            .spawn(move || read_loop(&mm, &uffd, &conn, &tx, &queued))?
    };
    Handler::new(Arc::clone(&mm), uffd, queued).run(&rx);
    let _ = reader.join();
    let mut boxes = lock(&shared.mailboxes);
    if boxes.get(&pid).is_some_and(|(s, _)| *s == serial) {
        boxes.remove(&pid);
    }
    drop(boxes);
    view.sim().detach_host_mm(&mm);
    shared.live.end(ns_pid, serial);
    Ok(())
}

/// The `F` connection: the process's handler pins it and takes a swap
/// reference for the child to every page of it on swap; they are kept
/// under a token, answered with `K` and the token (which the child hands
/// back in its `H`); the connection's end (the fork done) unpins.
fn fork_window(mut conn: UnixStream, pid: u32, shared: &Shared) -> io::Result<()> {
    let mailbox = lock(&shared.mailboxes).get(&pid).map(|(_, tx)| tx.clone());
    let Some(mailbox) = mailbox else {
        // Not served: nothing of it is on swap.
        return conn.write_all(&reply(0));
    };
    let (tx, rx) = mpsc::channel();
    let _ = mailbox.send(Msg::Fork(tx));
    let swapped = rx.recv().unwrap_or_default();
    let token = shared.forks.keep(swapped);
    conn.write_all(&reply(token))?;
    let mut rest = [0u8; 16];
    while matches!(conn.read(&mut rest), Ok(n) if n > 0) {}
    let _ = mailbox.send(Msg::Unpin);
    Ok(())
}

/// The `P`, `R` and `A` connections: `MADV_PAGEOUT` of `[start, start +
/// len)` (`start` in the token, `len` next), the program's own
/// `MADV_DONTNEED` of it about to be made (its pages forgotten first), or
/// a range registered only now whose pages touched before are to be
/// charged ([`HostMm::adopt`]), done by the process's handler before `K`.
fn range_request(
    mut conn: UnixStream,
    kind: u8,
    pid: u32,
    start: u64,
    shared: &Shared,
) -> io::Result<()> {
    let mut len = [0u8; 8];
    conn.read_exact(&mut len)?;
    let end = start.saturating_add(u64::from_ne_bytes(len));
    let mailbox = lock(&shared.mailboxes).get(&pid).map(|(_, tx)| tx.clone());
    if let Some(mailbox) = mailbox {
        let (tx, rx) = mpsc::channel();
        let msg = match kind {
            b'P' => Msg::Pageout(start, end, tx),
            b'A' => Msg::Adopt(start, end, tx),
            _ => Msg::Forget(start, end, tx),
        };
        let _ = mailbox.send(msg);
        let _ = rx.recv();
    }
    write_byte(&conn, b'K')
}

fn reply(token: u64) -> [u8; 9] {
    let mut r = [b'K'; 9];
    r[1..].copy_from_slice(&token.to_ne_bytes());
    r
}

/// The swap references a fork's child inherits: (address, entry).
type Inherited = Vec<(u64, SwapEntry)>;

/// How long a fork's swap references wait for its child.
const FORK_CLAIM_WAIT: Duration = Duration::from_secs(60);

/// Swap references taken at forks, by token, until the child claims them
/// (or gives up: a child that never says hello, after
/// [`FORK_CLAIM_WAIT`], and whatever is left when the server stops).
struct Forks {
    sim: Arc<Sim>,
    next: std::sync::atomic::AtomicU64,
    pending: Mutex<HashMap<u64, (Instant, Inherited)>>,
}

impl Forks {
    fn new(sim: Arc<Sim>) -> Self {
        Self {
            sim,
            next: std::sync::atomic::AtomicU64::new(1),
            pending: Mutex::new(HashMap::new()),
        }
    }

    fn keep(&self, swapped: Vec<(u64, SwapEntry)>) -> u64 {
        // Relaxed: a unique number.
        let token = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let now = Instant::now();
        let mut pending = lock(&self.pending);
        let stale: Vec<u64> = pending
            .iter()
            .filter(|(_, (at, _))| now.duration_since(*at) > FORK_CLAIM_WAIT)
            .map(|(&t, _)| t)
            .collect();
        for t in stale {
            if let Some((_, swapped)) = pending.remove(&t) {
                HostMm::drop_swap(&self.sim, swapped);
            }
        }
        pending.insert(token, (now, swapped));
        token
    }

    fn claim(&self, token: u64) -> Vec<(u64, SwapEntry)> {
        lock(&self.pending)
            .remove(&token)
            .map(|(_, s)| s)
            .unwrap_or_default()
    }
}

impl Drop for Forks {
    fn drop(&mut self) {
        let pending = std::mem::take(&mut *lock(&self.pending));
        for (_, (_, swapped)) in pending {
            HostMm::drop_swap(&self.sim, swapped);
        }
    }
}

/// The reader: takes every message off the `userfaultfd` as it comes (an
/// unread event holds up the ioctls of reclaim, which may be running on
/// the handler itself), resolves a reclaimer's own faults at once
/// ([`HostMm::fault_by_reclaim`]), and hands the rest to the handler in
/// order. Ends (and tells the handler) when the process's connection
/// ends.
fn read_loop(
    mm: &HostMm,
    uffd: &OwnedFd,
    conn: &UnixStream,
    handler: &mpsc::Sender<Msg>,
    queued: &AtomicUsize,
) {
    let mut buf = [0u8; MSG_BYTES * 64];
    let mut said = Vec::new();
    loop {
        let mut fds = [pollfd(uffd.as_raw_fd()), pollfd(conn.as_raw_fd())];
        // SAFETY: polls two descriptors we hold, in `fds`.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
        if n < 0 && io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            break;
        }
        if fds[1].revents != 0 && !from_process(conn, &mut said, handler, queued) {
            break;
        }
        loop {
            // SAFETY: reads whole messages into `buf`.
            let n = unsafe { libc::read(uffd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            let Ok(n) = usize::try_from(n) else { break };
            if n == 0 {
                break;
            }
            for msg in buf[..n].chunks_exact(MSG_BYTES) {
                if let Some(msg) = decode(mm, uffd, queued, msg) {
                    // Relaxed: the channel orders the message itself.
                    queued.fetch_add(1, Ordering::Relaxed);
                    let _ = handler.send(msg);
                }
            }
        }
    }
    let _ = handler.send(Msg::End);
}

/// A `struct uffd_msg` as the handler's message; `None` for what the
/// reader resolved itself or does not know.
fn decode(mm: &HostMm, uffd: &OwnedFd, queued: &AtomicUsize, msg: &[u8]) -> Option<Msg> {
    let word =
        |i: usize| u64::from_ne_bytes(msg[8 + i * 8..16 + i * 8].try_into().expect("8 bytes"));
    match msg[0] {
        UFFD_EVENT_PAGEFAULT => {
            let (flags, addr) = (word(0), word(1) & !(PAGE - 1));
            if flags & UFFD_PAGEFAULT_FLAG_WP != 0 {
                return Some(Msg::Fault(addr, FaultKind::WriteProtect));
            }
            let mut io = UffdIo(uffd.as_raw_fd());
            if mm.fault_by_reclaim(addr, &mut io) {
                return None;
            }
            let kind = FaultKind::Missing {
                write: flags & UFFD_PAGEFAULT_FLAG_WRITE != 0,
            };
            // In order: only with nothing of this process's queued.
            // Acquire: pairs with the handler's release once done.
            if queued.load(Ordering::Acquire) == 0 && mm.fault_fast(addr, kind, &mut io).is_some() {
                return None;
            }
            Some(Msg::Fault(addr, kind))
        }
        UFFD_EVENT_UNMAP => Some(Msg::Unmap(word(0), word(1))),
        UFFD_EVENT_REMAP => Some(Msg::Remap(word(0), word(1), word(2))),
        _ => None,
    }
}

/// One process's handler (module docs).
struct Handler {
    mm: Arc<HostMm>,
    uffd: Arc<OwnedFd>,
    /// The reader's messages not yet done with (faults waiting to be tried
    /// again included): the reader takes a fault itself only at zero.
    queued: Arc<AtomicUsize>,
    /// Faults that met `EAGAIN` or a failed charge, to try again.
    pending: VecDeque<(u64, FaultKind)>,
}

impl Handler {
    fn new(mm: Arc<HostMm>, uffd: Arc<OwnedFd>, queued: Arc<AtomicUsize>) -> Self {
        Self {
            mm,
            uffd,
            queued,
            pending: VecDeque::new(),
        }
    }

    /// Serves until the process is gone.
    fn run(&mut self, rx: &mpsc::Receiver<Msg>) {
        loop {
            let msg = if self.pending.is_empty() {
                rx.recv().ok()
            } else {
                match rx.recv_timeout(Duration::from_millis(1)) {
                    Ok(msg) => Some(msg),
                    Err(mpsc::RecvTimeoutError::Timeout) => None,
                    Err(mpsc::RecvTimeoutError::Disconnected) => return,
                }
            };
            match msg {
                Some(Msg::End) => return,
                Some(msg) => self.handle(msg),
                None if self.pending.is_empty() => return,
                None => {}
            }
            self.retry();
        }
    }

    fn handle(&mut self, msg: Msg) {
        let mut io = UffdIo(self.uffd.as_raw_fd());
        let event = matches!(msg, Msg::Unmap(..) | Msg::Remap(..) | Msg::Dropped(..));
        match msg {
            Msg::Fault(addr, kind) => return self.fault(addr, kind),
            Msg::Forget(start, end, done) => {
                self.mm.remove(start, end);
                let _ = done.send(0);
            }
            Msg::Unmap(start, end) => self.mm.unmap(start, end),
            Msg::Dropped(addr) => self.mm.dropped(addr, &mut io),
            Msg::NotDropped(addr) => self.mm.not_dropped(addr),
            Msg::Remap(from, to, len) => self.mm.remap(from, to, len),
            Msg::Fork(done) => {
                self.retry();
                self.mm.pin(true);
                let _ = done.send(self.mm.fork_swap());
            }
            Msg::Unpin => self.mm.pin(false),
            Msg::Pageout(start, end, done) => {
                let _ = done.send(self.mm.pageout(start, end));
            }
            Msg::Adopt(start, end, done) => {
                let _ = done.send(self.mm.adopt(start, end));
            }
            Msg::End => {}
        }
        if event {
            self.done_one();
        }
    }

    /// One of the reader's messages is done with.
    fn done_one(&self) {
        // Release: pairs with the reader's acquire load, so that it takes
        // a fault itself only after what came before is in the table.
        self.queued.fetch_sub(1, Ordering::Release);
    }

    fn fault(&mut self, addr: u64, kind: FaultKind) {
        let mut io = UffdIo(self.uffd.as_raw_fd());
        match self.mm.fault(addr, kind, &mut io) {
            Ok(FaultOutcome::Again) => self.pending.push_back((addr, kind)),
            Ok(_) => self.done_one(),
            Err(_) => {
                // A charge that failed with nothing left to reclaim or
                // kill: the kernel's fault would retry; so does this, a
                // little later.
                std::thread::sleep(Duration::from_millis(10));
                self.pending.push_back((addr, kind));
            }
        }
    }

    fn retry(&mut self) {
        for _ in 0..self.pending.len() {
            if let Some((addr, kind)) = self.pending.pop_front() {
                self.fault(addr, kind);
            }
        }
    }
}

fn pollfd(fd: RawFd) -> libc::pollfd {
    libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }
}

/// Reads what the process says on its connection (17-byte messages: `d`
/// and a page its agent dropped, `s` one it left) and hands each to the
/// handler; false once it ended. Without
/// blocking, and without changing the descriptor's flags, which it shares
/// with the reclaimers' writes.
fn from_process(
    conn: &UnixStream,
    said: &mut Vec<u8>,
    handler: &mpsc::Sender<Msg>,
    queued: &AtomicUsize,
) -> bool {
    let mut buf = [0u8; 17 * 64];
    // SAFETY: reads into `buf`.
    let n = unsafe {
        libc::recv(
            conn.as_raw_fd(),
            buf.as_mut_ptr().cast(),
            buf.len(),
            libc::MSG_DONTWAIT,
        )
    };
    let Ok(n) = usize::try_from(n) else {
        return matches!(
            io::Error::last_os_error().raw_os_error(),
            Some(libc::EAGAIN | libc::EINTR)
        );
    };
    if n == 0 {
        return false;
    }
    said.extend_from_slice(&buf[..n]);
    let whole = said.len() / 17 * 17;
    for m in said[..whole].chunks_exact(17) {
        let word =
            |i: usize| u64::from_ne_bytes(m[1 + i * 8..9 + i * 8].try_into().expect("8 bytes"));
        let msg = match m[0] {
            b'd' => Msg::Dropped(word(0)),
            b's' => Msg::NotDropped(word(0)),
            _ => continue,
        };
        // Relaxed: the channel orders the message itself.
        queued.fetch_add(1, Ordering::Relaxed);
        let _ = handler.send(msg);
    }
    said.drain(..whole);
    true
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The `userfaultfd` ioctls that resolve faults.
struct UffdIo(RawFd);

impl UffdIo {
    fn ioctl(&self, request: libc::c_ulong, arg: &mut [u64]) -> io::Result<()> {
        // SAFETY: `arg` is the struct this ioctl reads and writes (the
        // callers size it as the uapi header does).
        let rc = unsafe { libc::ioctl(self.0, request, arg.as_mut_ptr()) };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
}

impl FaultIo for UffdIo {
    fn zero(&mut self, addr: u64, write: bool) -> io::Result<()> {
        if write {
            return self.copy(addr, &ZERO_PAGE);
        }
        // struct uffdio_zeropage: range, mode, zeropage (out).
        self.ioctl(UFFDIO_ZEROPAGE, &mut [addr, PAGE, 0, 0])
    }

    fn copy(&mut self, addr: u64, bytes: &[u8]) -> io::Result<()> {
        // struct uffdio_copy: dst, src, len, mode, copy (out).
        self.ioctl(
            UFFDIO_COPY,
            &mut [addr, bytes.as_ptr() as u64, bytes.len() as u64, 0, 0],
        )
    }

    fn fill_zero(&mut self, start: u64, nr: u64) -> io::Result<u64> {
        let zeros = zero_folio();
        let len = (nr * PAGE).min(zeros.len() as u64);
        // struct uffdio_copy: dst, src, len, mode, copy (out: the bytes
        // copied, or the error).
        let mut arg = [start, zeros.as_ptr() as u64, len, 0, 0];
        let result = self.ioctl(UFFDIO_COPY, &mut arg);
        // A copy stopped part way fails with EAGAIN, `copy` saying how far
        // it got (`userfaultfd_copy`).
        let copied = arg[4] as i64;
        match result {
            Ok(()) => Ok(len / PAGE),
            Err(_) if copied > 0 => Ok(copied as u64 / PAGE),
            Err(e) => Err(e),
        }
    }

    fn unprotect(&mut self, addr: u64) -> io::Result<()> {
        // struct uffdio_writeprotect: range, mode (0: clear and wake).
        self.ioctl(UFFDIO_WRITEPROTECT, &mut [addr, PAGE, 0])
    }

    fn wake(&mut self, addr: u64) {
        let _ = self.ioctl(UFFDIO_WAKE, &mut [addr, PAGE]);
    }
}

/// What reclaim needs of a process: its `userfaultfd`, its memory
/// (`process_vm_readv`), its page table (`/proc/PID/pagemap`) and its
/// agent (drop requests on its connection).
struct UffdPages {
    uffd: Arc<OwnedFd>,
    pid: libc::pid_t,
    pagemap: File,
    conn: Mutex<UnixStream>,
}

impl UffdPages {
    fn new(uffd: OwnedFd, pid: u32, conn: UnixStream) -> io::Result<Self> {
        Ok(Self {
            uffd: Arc::new(uffd),
            pid: libc::pid_t::try_from(pid)
                .map_err(|_| io::Error::from_raw_os_error(libc::ESRCH))?,
            pagemap: File::open(format!("/proc/{pid}/pagemap"))?,
            conn: Mutex::new(conn),
        })
    }
}

/// `pagemap` bits: the page is present (63) or on swap (62).
const PM_PRESENT_OR_SWAPPED: u64 = 3 << 62;

impl HostPages for UffdPages {
    fn write_protect(&self, start: u64, len: u64, on: bool) -> io::Result<()> {
        // Protecting: don't wake (nobody waits); unprotecting wakes.
        UffdIo(self.uffd.as_raw_fd()).ioctl(UFFDIO_WRITEPROTECT, &mut [start, len, u64::from(on)])
    }

    fn read(&self, addr: u64, buf: &mut [u8]) -> io::Result<()> {
        let local = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        let remote = libc::iovec {
            iov_base: addr as *mut libc::c_void,
            iov_len: buf.len(),
        };
        // SAFETY: reads `buf.len()` bytes of the process into `buf`.
        let n = unsafe { libc::process_vm_readv(self.pid, &local, 1, &remote, 1, 0) };
        match usize::try_from(n) {
            Ok(n) if n == buf.len() => Ok(()),
            Ok(_) => Err(io::Error::from_raw_os_error(libc::EFAULT)),
            Err(_) => Err(io::Error::last_os_error()),
        }
    }

    fn mapped(&self, addr: u64) -> bool {
        let mut entry = [0u8; 8];
        let at = addr / PAGE * 8;
        // A process gone reads as nothing mapped.
        self.pagemap.read_exact_at(&mut entry, at).is_ok()
            && u64::from_ne_bytes(entry) & PM_PRESENT_OR_SWAPPED != 0
    }

    fn drop_pages(&self, addrs: &[u64]) {
        let bytes: Vec<u8> = addrs.iter().flat_map(|a| a.to_ne_bytes()).collect();
        // The agent reads as fast as it drops; a full socket (a stopped
        // process) blocks this reclaimer until it continues.
        let conn = lock(&self.conn);
        let _ = (&*conn).write_all(&bytes);
    }
}

fn write_byte(mut conn: &UnixStream, byte: u8) -> io::Result<()> {
    conn.write_all(&[byte])
}

/// The pid of the process at the other end (`SO_PEERCRED`).
fn peer_pid(conn: &UnixStream) -> io::Result<u32> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: fills `cred`, of the size given.
    let rc = unsafe {
        libc::getsockopt(
            conn.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    u32::try_from(cred.pid).map_err(|_| io::Error::from_raw_os_error(libc::ESRCH))
}

/// A request: its kind, the sender's pid in its own pid namespace, a fork
/// token (0: none), and the descriptor attached, if any.
fn recv_with_fd(conn: &UnixStream) -> io::Result<(u8, u32, u64, Option<OwnedFd>)> {
    let mut bytes = [0u8; 13];
    let mut iov = libc::iovec {
        iov_base: bytes.as_mut_ptr().cast(),
        iov_len: bytes.len(),
    };
    let mut control = [0u64; 8];
    // SAFETY: all-zero is a valid msghdr, filled in below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control);
    // SAFETY: receives into the buffers `msg` points at.
    let n = unsafe { libc::recvmsg(conn.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
    if n != 13 {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "no request"));
    }
    let mut fd = None;
    // SAFETY: walks the control messages the kernel wrote into `control`.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let raw = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<RawFd>());
                fd = Some(OwnedFd::from_raw_fd(raw));
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    let ns_pid = u32::from_ne_bytes(bytes[1..5].try_into().expect("4 bytes"));
    let token = u64::from_ne_bytes(bytes[5..].try_into().expect("8 bytes"));
    Ok((bytes[0], ns_pid, token, fd))
}
