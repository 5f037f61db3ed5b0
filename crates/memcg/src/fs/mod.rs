//! A filesystem with real contents, its dentry and inode caches on
//! memcg-aware list_lrus, and the superblock shrinker that frees them
//! (fs/dcache.c, fs/inode.c, fs/super.c, fs/drop_caches.c, v6.14).
//!
//! # What it does
//!
//! A [`Superblock`] is one mounted filesystem: a flat directory of files
//! whose bytes live on a RAM disk or in a host directory (`disk.rs`), read
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
//! `dcache.rs` looking files up
//! and letting go of dentries; `inode.rs` inode references, the inode LRU
//! and eviction; `shrinker.rs` the superblock shrinker and its prune
//! walks; `disk.rs` the RAM disk and the host directory.
//!
//! # Invariants
//!
//! - A cached dentry names a file of the directory and holds one reference
//!   to its cached inode; a dentry is on the dentry list_lru only while
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
mod shrinker;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use crate::errno::Errno;
#[cfg(not(loom))]
use crate::filemap::FlusherThread;
use crate::filemap::{AddressSpace, BackingError, Bdi, FilemapError};
use crate::folio::Folio;
use crate::list_lru::{ItemId, ListLru, ListLruConfig, LruDesign};
use crate::memcontrol::{CgroupTree, ChargeError, MemCgroup, ObjCgroup};
use crate::shrinker::{ShrinkerHandle, register_shrinker};
use crate::sync::{Arc, Mutex, lock};
use crate::vmscan::SwapSpace;
use dcache::check_name;
use disk::{Disk, RamDisk};
pub use file::File;
use inode::InodeHost;
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
    /// A name the directory cannot hold (empty, `.`/`..`, a `/`, too long).
    #[error("{name:?}: invalid file name (files sit directly in the mount; no subdirectories)")]
    InvalidName {
        /// The name.
        name: String,
    },
    /// A file too large to read into memory at once.
    #[error("{name}: {size_bytes} bytes is more than the machine's memory")]
    TooLarge {
        /// The file.
        name: String,
        /// Its size.
        size_bytes: u64,
    },
    /// A truncate that would shrink the file (not supported).
    #[error("{name}: shrinking a file is not supported")]
    Shrink {
        /// The file.
        name: String,
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
            FsError::NotFound { .. } => Errno::ENOENT,
            FsError::InvalidName { name } if name.len() > NAME_MAX => Errno::ENAMETOOLONG,
            FsError::InvalidName { .. } | FsError::Shrink { .. } => Errno::EINVAL,
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

/// A file as the directory records it (on disk).
#[derive(Debug, Clone, Copy)]
struct FileMeta {
    ino: u64,
    size_bytes: u64,
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
    name: String,
    mapping: Arc<AddressSpace>,
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

/// The directory and the caches, under one lock.
#[derive(Default)]
struct Namespace {
    files: BTreeMap<String, FileMeta>,
    next_ino: u64,
    dcache: HashMap<String, Dentry>,
    icache: HashMap<u64, Inode>,
    dentry_of_item: HashMap<ItemId, String>,
    inode_of_item: HashMap<ItemId, u64>,
    dentry_items: Items,
    inode_items: Items,
    /// Dentries of removed files still open, by inode (`d_delete` of a
    /// dentry in use unhashes it; its last close frees it).
    unlinked: HashMap<u64, Dentry>,
    nr_open: u64,
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
    /// Mounts a filesystem on `source` (`mount`): a RAM disk starts empty;
    /// a host directory's regular files are the files. Its dentry and
    /// inode lists use list_lru `design`; `swap` reports the swap space
    /// (for refault distances).
    pub fn mount(
        tree: &CgroupTree,
        source: FsSource,
        design: LruDesign,
        swap: Arc<dyn Fn() -> SwapSpace + Send + Sync>,
    ) -> Result<Arc<Self>, FsError> {
        let mut ns = Namespace::default();
        let disk = match source {
            FsSource::Ram { size_bytes } => Disk::Ram(RamDisk::new(tree, size_bytes)),
            FsSource::Dir(dir) => {
                scan_host_dir(&dir, &mut ns)?;
                Disk::Dir(dir)
            }
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
        let names: Vec<String> = ns.dcache.keys().cloned().collect();
        for name in names {
            self.kill_dentry(&mut ns, &name);
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
            nr_files: ns.files.len() as u64,
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

    /// The files and their sizes, by name (`ls`).
    pub fn list(&self) -> Vec<(String, u64)> {
        lock(&self.ns)
            .files
            .iter()
            .map(|(name, meta)| (name.clone(), meta.size_bytes))
            .collect()
    }

    /// The disk's size and the pages its files take (`statfs`): `None`
    /// for the size of a host directory (as much as the host has).
    pub fn space_pages(&self) -> (Option<u64>, u64) {
        let pages = |bytes: u64| bytes.div_ceil(crate::mm_types::PAGE_SIZE);
        let used = lock(&self.ns)
            .files
            .values()
            .map(|m| pages(m.size_bytes))
            .sum();
        (self.disk.capacity_pages(), used)
    }

    /// A file's size.
    pub fn size_of(&self, name: &str) -> Result<u64, FsError> {
        lock(&self.ns)
            .files
            .get(name)
            .map(|m| m.size_bytes)
            .ok_or_else(|| FsError::NotFound {
                name: name.to_owned(),
            })
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
            let old_size = self.size_of(&file.name).unwrap_or(0);
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
            if let Some(meta) = lock(&self.ns).files.get_mut(&file.name) {
                meta.size_bytes = size_bytes;
            }
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
        let pages = |bytes: u64| bytes.div_ceil(crate::mm_types::PAGE_SIZE);
        let used: u64 = lock(&self.ns)
            .files
            .values()
            .map(|m| pages(m.size_bytes))
            .sum();
        if used.saturating_sub(pages(old_size)) + pages(new_size) > capacity {
            return Err(BackingError::NoSpace.into());
        }
        Ok(())
    }

    /// Extends `name` to `size_bytes` (`ftruncate` growing a file): the new
    /// part is a hole, read as zeros. Shrinking is not supported
    /// (`EINVAL`).
    pub fn extend(&self, name: &str, size_bytes: u64) -> Result<(), FsError> {
        let mut ns = lock(&self.ns);
        let meta = ns.files.get_mut(name).ok_or_else(|| FsError::NotFound {
            name: name.to_owned(),
        })?;
        if size_bytes < meta.size_bytes {
            return Err(FsError::Shrink {
                name: name.to_owned(),
            });
        }
        meta.size_bytes = size_bytes;
        Ok(())
    }

    /// Removes `name` (`unlink`): its data on the disk goes at once; its
    /// dentry and inode, with their pages, as soon as no one uses them.
    pub fn unlink(&self, name: &str) -> Result<(), FsError> {
        let mut ns = lock(&self.ns);
        let meta = ns.files.remove(name).ok_or_else(|| FsError::NotFound {
            name: name.to_owned(),
        })?;
        if ns.dcache.get(name).is_some_and(|d| d.count == 0) {
            self.kill_dentry(&mut ns, name);
        } else if let Some(mut dentry) = ns.dcache.remove(name) {
            if dentry.on_lru {
                dentry.on_lru = false;
                let _ = self.dentry_lru.del(dentry.item, 0, &dentry.objcg.memcg());
            }
            ns.dentry_of_item.remove(&dentry.item);
            ns.unlinked.insert(meta.ino, dentry);
        } else if ns.icache.get(&meta.ino).is_some_and(|i| i.count == 0) {
            // No dentry (the shrinker took it) but the inode is cached,
            // kept by its page cache: the VFS would look the name up,
            // instantiating a dentry, and its final iput would evict the
            // inode now that the file is gone. Without this its pages,
            // dirty ones included, stayed charged forever.
            self.evict_inode(&mut ns, meta.ino);
        }
        drop(ns);
        self.disk.remove(meta.ino, name)?;
        Ok(())
    }

    /// Writes every dirty page back and waits for it (`syncfs(2)`, and
    /// this filesystem's part of `sync(2)`: `sync_inodes_sb` through its
    /// flusher); returns the pages written, or the first error of this
    /// writeback or of an earlier one not yet reported.
    pub fn sync(&self) -> Result<u64, FsError> {
        let written = self.bdi.sync(None)?;
        let sizes: Vec<(String, u64)> = {
            let ns = lock(&self.ns);
            ns.icache
                .values()
                .filter_map(|i| Some((i.name.clone(), ns.files.get(&i.name)?.size_bytes)))
                .collect()
        };
        for (name, size) in sizes {
            self.disk.set_size(&name, size)?;
        }
        Ok(written)
    }

    /// Writes back the dirty pages of `name` only and waits for them
    /// (`fsync(2)`: the other files' dirty pages stay dirty); returns the
    /// pages written. A file whose inode is not cached has nothing dirty.
    pub fn fsync(&self, name: &str) -> Result<u64, FsError> {
        let (mapping, size) = {
            let ns = lock(&self.ns);
            let meta = ns.files.get(name).ok_or_else(|| FsError::NotFound {
                name: name.to_owned(),
            })?;
            let Some(inode) = ns.icache.get(&meta.ino) else {
                return Ok(0);
            };
            (Arc::downgrade(&inode.mapping), meta.size_bytes)
        };
        let written = self.bdi.sync(Some(mapping))?;
        self.disk.set_size(name, size)?;
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
        let ino = ns.files.get(name)?.ino;
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
}

/// The regular files directly in a host directory, as the directory.
fn scan_host_dir(dir: &Path, ns: &mut Namespace) -> Result<(), FsError> {
    let io = |e: std::io::Error| FsError::from(BackingError::Io(e.kind()));
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let entry = entry.map_err(io)?;
        let meta = entry.metadata().map_err(io)?;
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        if meta.is_file() && check_name(&name).is_ok() {
            let ino = ns.next_ino;
            ns.next_ino += 1;
            ns.files.insert(
                name,
                FileMeta {
                    ino,
                    size_bytes: meta.len(),
                },
            );
        }
    }
    Ok(())
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
