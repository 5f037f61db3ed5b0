//! A filesystem with real contents, its dentry and inode caches on
//! memcg-aware list_lrus, and the superblock shrinker that frees them
//! (fs/dcache.c, fs/inode.c, fs/super.c, fs/drop_caches.c, v6.14).
//!
//! # What it does
//!
//! A [`Superblock`] is one mounted filesystem: a tree of directories,
//! regular files and symbolic links (`namei.rs`: names, hard links,
//! renames, owners, modes, times), whose files' bytes live on a RAM disk
//! or in a host directory (`disk.rs`), read
//! and written through each file's page cache ([`AddressSpace`]), whose
//! dirty pages its backing device's flusher writes back ([`Bdi`]: inline,
//! or on a thread of its own, [`Superblock::start_flusher_thread`]), and
//! whose readahead size (`read_ahead_kb`) the device keeps too;
//! [`Superblock::sync`] is `syncfs(2)`. Looking
//! a file up creates, if they are not cached, its dentry and its inode:
//! slab objects charged to the object cgroup of the memory cgroup that
//! looks it up (`slab_reclaimable`), and an open file charges a `struct
//! file` until closed (`slab_unreclaimable`).
//!
//! An unused dentry sits on the superblock's dentry list_lru under its
//! object cgroup's memory cgroup; an inode no dentry holds sits on the
//! inode list_lru. Both list_lrus share one shrinker id, and one
//! memcg-aware shrinker (`super_cache_count`/`super_cache_scan`, seeks 2,
//! batch 1024) splits each scan between them in proportion to their
//! counts:
//!
//! - a dentry in use again is taken off the list; one used since the last
//!   scan (`DCACHE_REFERENCED`) gets another round; the rest are freed,
//!   dropping their inode's reference (`dentry_lru_isolate`);
//! - an inode in use is taken off the list; so is one whose mapping is not
//!   shrinkable (`mapping_shrinkable`: it holds folios, or shadows other
//!   than a lone one at index 0, which stay until the shadow-node shrinker
//!   frees their nodes, `workingset.rs`): the mapping puts it back when
//!   that changes; a referenced one gets another round; the rest are
//!   evicted, a lone shadow at index 0 with them (`inode_lru_isolate`).
//!
//! [`drop_caches`] is `/proc/sys/vm/drop_caches`: 1 invalidates every
//! file's clean page cache, 2 runs every shrinker on every memory cgroup,
//! dying ones included, until little is freed (`drop_slab`), 3 both.
//!
//! One file per part: this one is the superblock and its file API (mount,
//! read, write, unlink, sync, the flusher's thread, drop_caches);
//! `namei.rs` the namespace (directories, names, links, attributes);
//! `dcache.rs` looking files up and letting go of dentries; `file.rs`
//! open files; `inode.rs` inode references, the inode LRU and eviction;
//! `shrinker.rs` the superblock shrinker and its prune walks; `disk.rs`
//! the RAM disk and the host directory.
//!
//! # Invariants
//!
//! - A cached dentry is a name `(directory, name)` of a regular file and
//!   holds one reference to its cached inode (a name removed while the
//!   dentry is in use moves it off the cache until its last close); a dentry is on the dentry list_lru only while
//!   cached, an inode on the inode list_lru only while cached.
//! - Every cached dentry and inode is charged, in bytes, to its object
//!   cgroup; freeing it uncharges exactly that.
//!
//! # Locking
//!
//! One mutex over the namespace and both caches (`Namespace`, the kernel's
//! `d_lock`/`i_lock`/hash locks in one). List_lru adds and deletes happen
//! under it (namespace, then list); the shrinker's walk callbacks run
//! under a list lock and only try the namespace lock, skipping the item
//! when it is held (`spin_trylock(&dentry->d_lock)`). Slab charges, which
//! may reclaim and so run this shrinker, are made before the namespace
//! lock is taken. A file's page cache has its own lock (`filemap.rs`).

mod dcache;
mod disk;
mod file;
mod inode;
mod namei;
mod shrinker;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use crate::errno::Errno;
#[cfg(not(loom))]
use crate::filemap::FlusherThread;
use crate::filemap::{AddressSpace, Backing, BackingError, Bdi, FilemapError};
use crate::folio::Folio;
use crate::list_lru::{ItemId, ListLru, ListLruConfig, LruDesign};
use crate::memcontrol::{CgroupTree, ChargeError, MemCgroup, ObjCgroup};
use crate::shrinker::{ShrinkerHandle, register_shrinker};
use crate::sync::{Arc, Mutex, lock};
use crate::vmscan::SwapSpace;
use disk::{Disk, RamDisk};
pub use file::{Fallocate, File};
use inode::InodeHost;
use namei::{Body, DKey, Meta, pages};
pub use namei::{
    DirEntry, FileKind, MAX_LINKS, MAX_NODES, Owner, ROOT_INO, RenameMode, SYMLINK_MAX, SetAttr,
    Stat, StatFs,
};
use shrinker::SbShrinker;

/// Bytes of a dentry (`sizeof(struct dentry)` on x86-64).
pub const DENTRY_BYTES: u64 = 192;
/// Bytes of an inode (an ext4/xfs in-memory inode is about 1 KiB).
pub const INODE_BYTES: u64 = 1024;
/// Bytes of an open file (`sizeof(struct file)`).
pub const FILE_BYTES: u64 = 256;
/// The longest file name (`NAME_MAX`).
pub const NAME_MAX: usize = 255;
/// The most a read or write moves per step.
pub const IO_CHUNK_BYTES: usize = 64 << 10;
/// The `read(2)` calls of [`Superblock::read_calls`]: `count` calls (all
/// until the end of the file if `None`) of `bs` bytes each, from byte
/// `offset` on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadCalls {
    /// Where the first call reads.
    pub offset: u64,
    /// Bytes each call asks for (at least 1).
    pub bs: usize,
    /// How many calls, at most.
    pub count: Option<u64>,
}

impl Default for ReadCalls {
    /// The whole file in [`IO_CHUNK_BYTES`] calls.
    fn default() -> Self {
        Self {
            offset: 0,
            bs: IO_CHUNK_BYTES,
            count: None,
        }
    }
}

/// Objects per superblock shrinker scan (`s_shrink->batch`).
const SB_SHRINK_BATCH: u64 = 1024;
/// Dentries and inodes a superblock can cache at once (list_lru items).
const MAX_CACHED: u32 = 1 << 20;

/// Why a filesystem operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FsError {
    /// No such file.
    #[error("{name}: no such file")]
    NotFound {
        /// The name looked up.
        name: String,
    },
    /// A name a directory cannot hold (empty, `.`/`..`, a `/`, too
    /// long), or a symbolic link's target it cannot hold.
    #[error("{name:?}: invalid file name")]
    InvalidName {
        /// The name.
        name: String,
    },
    /// The name exists already.
    #[error("{name}: file exists")]
    Exists {
        /// The name.
        name: String,
    },
    /// A path component, or a rename's source, is not a directory where
    /// one is needed.
    #[error("{name}: not a directory")]
    NotDir {
        /// The name.
        name: String,
    },
    /// A directory where a non-directory is needed.
    #[error("{name}: is a directory")]
    IsDir {
        /// The name.
        name: String,
    },
    /// A directory removed or renamed over still has entries.
    #[error("{name}: directory not empty")]
    NotEmpty {
        /// The name.
        name: String,
    },
    /// A directory renamed into itself.
    #[error("{name}: a directory cannot move into itself")]
    IntoItself {
        /// The name.
        name: String,
    },
    /// More hard links (or subdirectories) than [`MAX_LINKS`].
    #[error("{name}: too many links")]
    TooManyLinks {
        /// The name.
        name: String,
    },
    /// A symbolic link opened as a file (`O_NOFOLLOW`; the VFS follows
    /// links before it opens).
    #[error("{name}: a symbolic link")]
    Symlink {
        /// The name.
        name: String,
    },
    /// A hard link to a directory.
    #[error("inode {ino}: directories cannot be hard-linked")]
    LinkDir {
        /// The directory.
        ino: u64,
    },
    /// `readlink` of something that is no symbolic link.
    #[error("inode {ino}: not a symbolic link")]
    NotSymlink {
        /// The node.
        ino: u64,
    },
    /// A node that no longer exists (its last name and open file went).
    #[error("inode {ino}: no such file (removed)")]
    Stale {
        /// The node.
        ino: u64,
    },
    /// The filesystem holds [`MAX_NODES`] nodes.
    #[error("no free inodes (at most {max})")]
    NoNodes {
        /// The limit.
        max: usize,
    },
    /// An operation the filesystem does not do (a `fallocate` mode).
    #[error("{op}: operation not supported")]
    NotSupported {
        /// The operation.
        op: &'static str,
    },
    /// A host directory refused a change (it went away, or is full).
    #[error("host directory: {errno}")]
    Host {
        /// The host's errno.
        errno: Errno,
    },
    /// A file too large to read into memory at once.
    #[error("{name}: {size_bytes} bytes is more than the machine's memory")]
    TooLarge {
        /// The file.
        name: String,
        /// Its size.
        size_bytes: u64,
    },
    /// Files are open (unmount).
    #[error("the filesystem is busy: {nr_open} files open")]
    Busy {
        /// Open files.
        nr_open: u64,
    },
    /// Too many dentries and inodes cached.
    #[error("too many cached dentries and inodes ({max})")]
    CacheFull {
        /// The limit.
        max: u32,
    },
    /// A slab object could not be charged.
    #[error("slab charge failed: {0}")]
    Charge(#[from] ChargeError),
    /// The page cache or the disk failed.
    #[error(transparent)]
    Filemap(#[from] FilemapError),
}

impl From<BackingError> for FsError {
    fn from(e: BackingError) -> Self {
        FsError::Filemap(FilemapError::Backing(e))
    }
}

impl FsError {
    /// The errno a system call would return.
    pub fn errno(&self) -> Errno {
        match self {
            FsError::NotFound { .. } | FsError::Stale { .. } => Errno::ENOENT,
            FsError::InvalidName { name } if name.len() > NAME_MAX => Errno::ENAMETOOLONG,
            FsError::InvalidName { .. }
            | FsError::IntoItself { .. }
            | FsError::NotSymlink { .. } => Errno::EINVAL,
            FsError::Exists { .. } => Errno::EEXIST,
            FsError::NotDir { .. } => Errno::ENOTDIR,
            FsError::IsDir { .. } => Errno::EISDIR,
            FsError::NotEmpty { .. } => Errno::ENOTEMPTY,
            FsError::TooManyLinks { .. } => Errno::EMLINK,
            FsError::Symlink { .. } => Errno::ELOOP,
            FsError::LinkDir { .. } => Errno::EPERM,
            FsError::NoNodes { .. } => Errno::ENOSPC,
            FsError::NotSupported { .. } => Errno::EOPNOTSUPP,
            FsError::Host { errno } => *errno,
            FsError::Busy { .. } => Errno::EBUSY,
            FsError::TooLarge { .. } => Errno::EFBIG,
            FsError::CacheFull { .. } | FsError::Charge(_) => Errno::ENOMEM,
            FsError::Filemap(e) => e.errno(),
        }
    }
}

/// What kind of storage a superblock has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FsSource {
    /// A RAM disk of this many bytes (`brd`).
    Ram {
        /// Its size.
        size_bytes: u64,
    },
    /// A directory of the host.
    Dir(PathBuf),
}

/// A cached dentry (`struct dentry`).
struct Dentry {
    ino: u64,
    objcg: Arc<ObjCgroup>,
    item: ItemId,
    /// `d_lockref.count`.
    count: u32,
    /// `DCACHE_REFERENCED`.
    referenced: bool,
    /// `DCACHE_LRU_LIST`.
    on_lru: bool,
}

/// A cached inode (`struct inode`).
struct Inode {
    mapping: Arc<AddressSpace>,
    /// Where its bytes live (a host file is cut to the file's size after
    /// writeback, which writes whole pages).
    backing: Arc<dyn Backing>,
    objcg: Arc<ObjCgroup>,
    item: ItemId,
    /// `i_count`: the dentry's reference.
    count: u32,
    /// `I_REFERENCED`.
    referenced: bool,
    on_lru: bool,
}

/// Free list_lru item ids.
#[derive(Default)]
struct Items {
    next: ItemId,
    free: Vec<ItemId>,
}

impl Items {
    fn alloc(&mut self) -> Result<ItemId, FsError> {
        if let Some(item) = self.free.pop() {
            return Ok(item);
        }
        if self.next >= MAX_CACHED {
            return Err(FsError::CacheFull { max: MAX_CACHED });
        }
        self.next += 1;
        Ok(self.next - 1)
    }
}

/// The namespace and the caches, under one lock.
struct Namespace {
    /// Every node, by inode number (`namei.rs`).
    nodes: HashMap<u64, Meta>,
    next_ino: u64,
    /// Pages the regular files' sizes take.
    used_pages: u64,
    dcache: HashMap<DKey, Dentry>,
    icache: HashMap<u64, Inode>,
    dentry_of_item: HashMap<ItemId, DKey>,
    inode_of_item: HashMap<ItemId, u64>,
    dentry_items: Items,
    inode_items: Items,
    /// Dentries of names removed while in use, by list_lru item
    /// (`d_delete` of a dentry in use unhashes it; its last close frees
    /// it).
    unlinked: HashMap<ItemId, Dentry>,
    nr_open: u64,
}

impl Namespace {
    /// An empty root directory owned by root, mode 0755 (or the host
    /// directory's).
    fn new(root: Owner) -> Self {
        let mut nodes = HashMap::new();
        let dir = Body::Dir {
            entries: BTreeMap::new(),
        };
        nodes.insert(ROOT_INO, Meta::new(dir, root));
        Self {
            nodes,
            next_ino: ROOT_INO + 1,
            used_pages: 0,
            dcache: HashMap::new(),
            icache: HashMap::new(),
            dentry_of_item: HashMap::new(),
            inode_of_item: HashMap::new(),
            dentry_items: Items::default(),
            inode_items: Items::default(),
            unlinked: HashMap::new(),
            nr_open: 0,
        }
    }

    /// Sets regular file `ino`'s size, keeping `used_pages` (nothing for
    /// a directory or a link).
    fn set_size(&mut self, ino: u64, size_bytes: u64) {
        if let Some(meta) = self.nodes.get_mut(&ino)
            && matches!(meta.body, Body::File)
        {
            self.used_pages = self.used_pages - pages(meta.size_bytes) + pages(size_bytes);
            meta.size_bytes = size_bytes;
        }
    }

    /// Regular file `ino`'s size (0 if it is gone).
    fn size_of(&self, ino: u64) -> u64 {
        self.nodes.get(&ino).map_or(0, |m| m.size_bytes)
    }
}

/// A mounted filesystem (`struct super_block`).
pub struct Superblock {
    tree: CgroupTree,
    disk: Arc<Disk>,
    /// Its backing device: the flusher of its files' dirty pages, and
    /// their readahead size.
    bdi: Arc<Bdi>,
    /// The flusher's own thread, if it has one.
    #[cfg(not(loom))]
    flusher: Mutex<Option<FlusherThread>>,
    swap: Arc<dyn Fn() -> SwapSpace + Send + Sync>,
    ns: Mutex<Namespace>,
    /// Serialises the writes that change a file's size (a whole-file
    /// write, a positional write, a truncate), so the disk-space check and
    /// the size update of one cannot interleave with another's. Taken
    /// before any other lock of the superblock.
    resize: Mutex<()>,
    dentry_lru: ListLru,
    inode_lru: ListLru,
    shrinker: Mutex<Option<ShrinkerHandle>>,
    /// Itself, for its inodes' mappings to call back ([`InodeHost`]).
    me: std::sync::Weak<Superblock>,
}

impl std::fmt::Debug for Superblock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Superblock")
            .field("counts", &self.counts())
            .finish_non_exhaustive()
    }
}

/// What a superblock holds ([`Superblock::counts`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SbCounts {
    /// Files in the directory.
    pub nr_files: u64,
    /// Cached dentries.
    pub nr_dentries: u64,
    /// Cached inodes.
    pub nr_inodes: u64,
    /// Dentries and inodes on the list_lrus (unused).
    pub nr_unused: u64,
    /// Page-cache folios of all cached inodes.
    pub nr_cached_pages: u64,
    /// Of those, the dirty ones.
    pub nr_dirty_pages: u64,
    /// Radix-tree nodes holding the cached inodes' folios and shadows
    /// (slab, [`crate::filemap::XA_NODE_BYTES`] each).
    pub nr_xa_nodes: u64,
    /// RAM-disk pages in use (0 on a host directory).
    pub disk_pages: u64,
}

/// What a shrinker pass over one memory cgroup freed.
#[derive(Debug, Default, Clone, Copy)]
struct Pruned {
    objects: u64,
    bytes: u64,
}

impl Superblock {
    /// Mounts a filesystem on `source` (`mount`): a RAM disk starts with
    /// an empty root directory; a host directory's tree (directories,
    /// regular files, symbolic links) is the tree. Its dentry and inode
    /// lists use list_lru `design`; `swap` reports the swap space (for
    /// refault distances).
    pub fn mount(
        tree: &CgroupTree,
        source: FsSource,
        design: LruDesign,
        swap: Arc<dyn Fn() -> SwapSpace + Send + Sync>,
    ) -> Result<Arc<Self>, FsError> {
        let (ns, disk) = match source {
            FsSource::Ram { size_bytes } => (
                Namespace::new(Owner::root(0o755)),
                Disk::Ram(RamDisk::new(tree, size_bytes)),
            ),
            FsSource::Dir(dir) => (disk::scan_host_tree(&dir)?, Disk::Dir(dir)),
        };
        let config = ListLruConfig {
            memcg_aware: true,
            max_items: MAX_CACHED,
            design,
        };
        let lru_error = |_| FsError::CacheFull { max: MAX_CACHED };
        let dentry_lru = ListLru::new(tree, config).map_err(lru_error)?;
        let inode_lru = ListLru::sharing_shrinker(tree, config, &dentry_lru).map_err(lru_error)?;
        let id = dentry_lru.shrinker_id();
        let sb = Arc::new_cyclic(|me| Self {
            tree: tree.clone(),
            disk: Arc::new(disk),
            bdi: Bdi::new(tree),
            #[cfg(not(loom))]
            flusher: Mutex::new(None),
            swap,
            ns: Mutex::new(ns),
            resize: Mutex::new(()),
            dentry_lru,
            inode_lru,
            shrinker: Mutex::new(None),
            me: me.clone(),
        });
        let shrinker = Arc::new(SbShrinker(Arc::downgrade(&sb)));
        *lock(&sb.shrinker) = Some(register_shrinker(tree, shrinker, id));
        Ok(sb)
    }

    /// The list_lru design of its caches.
    pub fn lru_design(&self) -> LruDesign {
        self.dentry_lru.design()
    }

    /// Its device's `read_ahead_kb` (`/sys/class/bdi/*/read_ahead_kb`):
    /// the most a readahead window reads, in KiB (128 by default).
    pub fn read_ahead_kb(&self) -> u64 {
        self.bdi.read_ahead_kb()
    }

    /// Sets `read_ahead_kb` (`read_ahead_kb_store`: rounded down to whole
    /// pages; 0 turns readahead off). Files opened from now on use it.
    pub fn set_read_ahead_kb(&self, read_ahead_kb: u64) {
        self.bdi.set_read_ahead_kb(read_ahead_kb);
    }

    /// `bdi->ra_pages`.
    fn ra_pages(&self) -> u64 {
        self.bdi.ra_pages()
    }

    /// Whether its files live in a host directory.
    pub fn is_host_dir(&self) -> bool {
        self.disk.is_host()
    }

    /// Unmounts (`umount`): refused while a file is open; writes dirty
    /// pages back, stops the flusher's thread, frees every dentry, inode
    /// and cached page, and stops the shrinker. The disk goes with the last
    /// reference.
    pub fn unmount(&self) -> Result<(), FsError> {
        self.sync()?;
        let mut ns = lock(&self.ns);
        if ns.nr_open > 0 {
            return Err(FsError::Busy {
                nr_open: ns.nr_open,
            });
        }
        #[cfg(not(loom))]
        lock(&self.flusher).take();
        let keys: Vec<DKey> = ns.dcache.keys().cloned().collect();
        for key in keys {
            self.kill_dentry(&mut ns, &key);
        }
        let inos: Vec<u64> = ns.icache.keys().copied().collect();
        for ino in inos {
            self.evict_inode(&mut ns, ino);
        }
        drop(ns);
        lock(&self.shrinker).take();
        Ok(())
    }

    /// Files, dentries, inodes and pages it holds.
    pub fn counts(&self) -> SbCounts {
        let ns = lock(&self.ns);
        SbCounts {
            nr_files: ns
                .nodes
                .values()
                .filter(|m| matches!(m.body, Body::File))
                .count() as u64,
            nr_dentries: ns.dcache.len() as u64,
            nr_inodes: ns.icache.len() as u64,
            nr_unused: (self.dentry_lru.count_node(0).unwrap_or(0)
                + self.inode_lru.count_node(0).unwrap_or(0)) as u64,
            nr_cached_pages: ns.icache.values().map(|i| i.mapping.nr_folios()).sum(),
            nr_dirty_pages: ns.icache.values().map(|i| i.mapping.nr_dirty()).sum(),
            nr_xa_nodes: ns
                .icache
                .values()
                .map(|i| i.mapping.nr_nodes() as u64)
                .sum(),
            disk_pages: match &*self.disk {
                Disk::Ram(ram) => ram.used_pages(),
                Disk::Dir(_) => 0,
            },
        }
    }

    /// The regular files of the root directory and their sizes, by name
    /// (`ls`).
    pub fn list(&self) -> Vec<(String, u64)> {
        let ns = lock(&self.ns);
        let Ok(root) = ns.node(ROOT_INO) else {
            return Vec::new();
        };
        let Body::Dir { entries } = &root.body else {
            return Vec::new();
        };
        entries
            .iter()
            .filter_map(|(name, ino)| {
                let meta = ns.nodes.get(ino)?;
                matches!(meta.body, Body::File).then(|| (name.clone(), meta.size_bytes))
            })
            .collect()
    }

    /// The disk's size and the pages its files take (`statfs`): `None`
    /// for the size of a host directory (as much as the host has).
    pub fn space_pages(&self) -> (Option<u64>, u64) {
        (self.disk.capacity_pages(), lock(&self.ns).used_pages)
    }

    /// The size of the regular file at `path` (from the root).
    pub fn size_of(&self, path: &str) -> Result<u64, FsError> {
        let ns = lock(&self.ns);
        let ino = ns.resolve(path)?;
        match ns.node(ino)?.body {
            Body::File => Ok(ns.size_of(ino)),
            Body::Dir { .. } => Err(FsError::IsDir {
                name: path.to_owned(),
            }),
            Body::Symlink { .. } => Err(FsError::NotFound {
                name: path.to_owned(),
            }),
        }
    }

    /// Reads the whole file `name` as a task of `memcg` would (open, read,
    /// close): the dentry, inode and open file are charged to `memcg` if
    /// not cached, and so are missing pages. A file larger than the
    /// machine's memory is refused (`EFBIG`: its bytes could not be held);
    /// [`Superblock::read_with`] streams any size.
    pub fn read(&self, memcg: &Arc<MemCgroup>, name: &str) -> Result<Vec<u8>, FsError> {
        let size = self.size_of(name)?;
        let limit = self.tree.machine_pages() * crate::mm_types::PAGE_SIZE;
        if size > limit {
            return Err(FsError::TooLarge {
                name: name.to_owned(),
                size_bytes: size,
            });
        }
        let mut out = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        self.read_with(memcg, name, |chunk| out.extend_from_slice(chunk))?;
        Ok(out)
    }

    /// Reads the whole file `name` as [`Superblock::read`] does, handing
    /// it to `sink` in chunks of at most [`IO_CHUNK_BYTES`] in order;
    /// returns its size.
    pub fn read_with(
        &self,
        memcg: &Arc<MemCgroup>,
        name: &str,
        sink: impl FnMut(&[u8]),
    ) -> Result<u64, FsError> {
        self.read_calls(memcg, name, ReadCalls::default(), sink)
    }

    /// Opens `name` as a task of `memcg` would and reads it with the
    /// `read(2)` calls `calls` describes, one open file throughout (its
    /// readahead state follows the calls), handing what each returns to
    /// `sink`; stops at the end of the file. Returns the bytes read.
    pub fn read_calls(
        &self,
        memcg: &Arc<MemCgroup>,
        name: &str,
        calls: ReadCalls,
        mut sink: impl FnMut(&[u8]),
    ) -> Result<u64, FsError> {
        let file = self.open_file(memcg, name, false)?;
        // A buffer no larger than what the file holds from `offset`, so a
        // huge `bs` allocates nothing past it (requests are cut to it too:
        // the readahead window near the end of the file may be smaller
        // than for the full request, never what it reads).
        let held = file.size_bytes().saturating_sub(calls.offset);
        let len = calls.bs.min(usize::try_from(held).unwrap_or(usize::MAX));
        let mut buf = vec![0; len];
        let mut offset = calls.offset;
        let mut nr_calls = 0;
        while calls.count.is_none_or(|count| nr_calls < count) {
            let len = file.read_at(memcg, offset, &mut buf)?;
            if len == 0 {
                break;
            }
            sink(&buf[..len]);
            offset += len as u64;
            nr_calls += 1;
        }
        Ok(offset - calls.offset)
    }

    /// Writes `data` as the whole new content of `name` (created if
    /// missing), as a task of `memcg` would: through the page cache, the
    /// pages left dirty for [`Superblock::sync`] or reclaim.
    pub fn write(&self, memcg: &Arc<MemCgroup>, name: &str, data: &[u8]) -> Result<(), FsError> {
        let mut rest = data;
        self.write_with(memcg, name, data.len() as u64, |chunk| {
            let (head, tail) = rest.split_at(chunk.len());
            chunk.copy_from_slice(head);
            rest = tail;
        })
    }

    /// Writes `size_bytes` as the whole new content of `name`, asking
    /// `produce` for it in order, chunk by chunk (at most
    /// [`IO_CHUNK_BYTES`]), so no copy of a large file is held.
    pub fn write_with(
        &self,
        memcg: &Arc<MemCgroup>,
        name: &str,
        size_bytes: u64,
        mut produce: impl FnMut(&mut [u8]),
    ) -> Result<(), FsError> {
        let file = self.open(memcg, name, true)?;
        let resizing = lock(&self.resize);
        let result = (|| {
            let old_size = lock(&self.ns).size_of(file.ino);
            self.reserve_space(old_size, size_bytes)?;
            let mut buf =
                vec![0; IO_CHUNK_BYTES.min(usize::try_from(size_bytes).unwrap_or(usize::MAX))];
            let mut offset = 0;
            while offset < size_bytes {
                let len = (size_bytes - offset).min(buf.len() as u64) as usize;
                produce(&mut buf[..len]);
                file.mapping.write(memcg, offset, &buf[..len])?;
                offset += len as u64;
            }
            if size_bytes < old_size {
                file.mapping.truncate_to(size_bytes)?;
            }
            let mut ns = lock(&self.ns);
            ns.set_size(file.ino, size_bytes);
            touch(&mut ns, file.ino);
            Ok(())
        })();
        drop(resizing);
        self.close(file);
        result
    }

    /// Refuses a write that would take the disk past its size, counting
    /// every file at its full size (`ENOSPC` at write time, as a
    /// filesystem's block reservation gives, not at writeback).
    fn reserve_space(&self, old_size: u64, new_size: u64) -> Result<(), FsError> {
        let Some(capacity) = self.disk.capacity_pages() else {
            return Ok(());
        };
        let used = lock(&self.ns).used_pages;
        if used.saturating_sub(pages(old_size)) + pages(new_size) > capacity {
            return Err(BackingError::NoSpace.into());
        }
        Ok(())
    }

    /// Extends `name` to `size_bytes` if it is smaller (the new part a
    /// hole, read as zeros); a larger file keeps its size. Cutting a file
    /// goes through an open file ([`File::set_len`]).
    pub fn extend(&self, name: &str, size_bytes: u64) -> Result<(), FsError> {
        let _resizing = lock(&self.resize);
        let old_size = self.size_of(name)?;
        if size_bytes <= old_size {
            return Ok(());
        }
        self.reserve_space(old_size, size_bytes)?;
        let mut ns = lock(&self.ns);
        let ino = ns.resolve(name)?;
        ns.set_size(ino, size_bytes);
        Ok(())
    }

    /// Removes `path` (`unlink`): its dentry and inode, with their pages
    /// and its data on the disk, go as soon as no one uses them.
    pub fn unlink(&self, path: &str) -> Result<(), FsError> {
        let (parent, name) = lock(&self.ns).resolve_parent(path)?;
        self.unlink_at(parent, &name)
    }

    /// Writes every dirty page back and waits for it (`syncfs(2)`, and
    /// this filesystem's part of `sync(2)`: `sync_inodes_sb` through its
    /// flusher); returns the pages written, or the first error of this
    /// writeback or of an earlier one not yet reported.
    pub fn sync(&self) -> Result<u64, FsError> {
        let written = self.bdi.sync(None)?;
        if self.disk.is_host() {
            let sizes: Vec<(Arc<dyn Backing>, u64)> = {
                let ns = lock(&self.ns);
                ns.icache
                    .iter()
                    .map(|(ino, i)| (Arc::clone(&i.backing), ns.size_of(*ino)))
                    .collect()
            };
            for (backing, size) in sizes {
                backing.truncate(size)?;
            }
        }
        Ok(written)
    }

    /// Writes back the dirty pages of `path` only and waits for them
    /// (`fsync(2)`: the other files' dirty pages stay dirty); returns the
    /// pages written.
    pub fn fsync(&self, path: &str) -> Result<u64, FsError> {
        let ino = lock(&self.ns).resolve(path)?;
        self.fsync_ino(ino)
    }

    /// [`Superblock::fsync`] of node `ino`. A file whose inode is not
    /// cached has nothing dirty.
    pub fn fsync_ino(&self, ino: u64) -> Result<u64, FsError> {
        let (mapping, backing, size) = {
            let ns = lock(&self.ns);
            ns.node(ino)?;
            let Some(inode) = ns.icache.get(&ino) else {
                return Ok(0);
            };
            (
                Arc::downgrade(&inode.mapping),
                Arc::clone(&inode.backing),
                ns.size_of(ino),
            )
        };
        let written = self.bdi.sync(Some(mapping))?;
        if self.disk.is_host() {
            backing.truncate(size)?;
        }
        Ok(written)
    }

    /// The folio cached at page `index` of `name`, if its inode and that
    /// page are cached (for tests and checks).
    pub fn folio(&self, name: &str, index: u64) -> Option<Arc<Folio>> {
        self.mapping(name)?.folio(index)
    }

    /// The page cache of `name`, if its inode is cached (for tests and
    /// checks).
    pub fn mapping(&self, name: &str) -> Option<Arc<AddressSpace>> {
        let ns = lock(&self.ns);
        let ino = ns.resolve(name).ok()?;
        Some(Arc::clone(&ns.icache.get(&ino)?.mapping))
    }

    /// Its backing device (its flusher and writebacks).
    pub fn bdi(&self) -> &Arc<Bdi> {
        &self.bdi
    }

    /// Runs its flusher on a thread of its own until unmounted or dropped
    /// (a server on the real clock); without one the flusher runs inline
    /// (see [`Bdi`]). Starting it twice keeps the first.
    #[cfg(not(loom))]
    pub fn start_flusher_thread(&self) -> Result<(), FsError> {
        let mut flusher = lock(&self.flusher);
        if flusher.is_none() {
            let thread = self
                .bdi
                .spawn_thread()
                .map_err(|e| BackingError::Io(e.kind()))?;
            *flusher = Some(thread);
        }
        Ok(())
    }

    /// Drops the clean page cache of every cached inode (`drop_caches` 1,
    /// `drop_pagecache_sb`); returns the pages dropped.
    pub(crate) fn drop_pagecache(&self) -> u64 {
        let mappings: Vec<Arc<AddressSpace>> = lock(&self.ns)
            .icache
            .values()
            .map(|i| Arc::clone(&i.mapping))
            .collect();
        mappings.iter().map(|m| m.invalidate()).sum()
    }

    /// Frees the disk space of node `ino`, gone with its last name and
    /// open file (a host directory's file went with its last name).
    fn discard(&self, gone: Option<u64>) {
        if let (Some(ino), Disk::Ram(ram)) = (gone, &*self.disk) {
            ram.discard(ino);
        }
    }
}

/// A file's contents changed now (`file_update_time`).
fn touch(ns: &mut Namespace, ino: u64) {
    if let Ok(meta) = ns.node_mut(ino) {
        let now = std::time::SystemTime::now();
        meta.mtime = now;
        meta.ctime = now;
    }
}

/// `/proc/sys/vm/drop_caches`: `mode` 1 drops clean page cache of every
/// superblock, 2 the slab caches of every memory cgroup through the
/// shrinkers, 3 both. Returns (pages dropped, objects freed).
pub fn drop_caches(tree: &CgroupTree, supers: &[Arc<Superblock>], mode: u32) -> (u64, u64) {
    let pages = if mode & 1 != 0 {
        supers.iter().map(|sb| sb.drop_pagecache()).sum()
    } else {
        0
    };
    let objects = if mode & 2 != 0 {
        crate::vmscan::drop_slab(tree)
    } else {
        0
    };
    (pages, objects)
}
