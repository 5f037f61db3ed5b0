//! A filesystem with real contents, its dentry and inode caches on
//! memcg-aware list_lrus, and the superblock shrinker that frees them
//! (fs/dcache.c, fs/inode.c, fs/super.c, fs/drop_caches.c, v6.14).
//!
//! # What it does
//!
//! A [`Superblock`] is one mounted filesystem: a flat directory of files
//! whose bytes live on a RAM disk or in a host directory (`disk.rs`), read
//! and written through each file's page cache ([`AddressSpace`]). Looking
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
//! - an inode in use is taken off the list; a referenced one gets another
//!   round; one with cached pages has its clean pages invalidated
//!   (`pginodesteal`) and is kept while pages remain (the kernel takes it
//!   off the list until its pages go); the rest are evicted with their
//!   shadows (`inode_lru_isolate`).
//!
//! [`drop_caches`] is `/proc/sys/vm/drop_caches`: 1 invalidates every
//! file's clean page cache, 2 runs every shrinker on every memory cgroup,
//! dying ones included, until little is freed (`drop_slab`), 3 both.
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

mod disk;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use crate::errno::Errno;
use crate::filemap::{AddressSpace, BackingError, FilemapError, MappingHost};
use crate::list_lru::{ItemId, ListLru, ListLruConfig, LruDesign, Walked};
use crate::memcontrol::{CgroupTree, ChargeError, MemCgroup, ObjCgroup, SlabKind};
use crate::shrinker::{
    ShrinkControl, ShrinkCount, ShrinkScan, Shrinker, ShrinkerHandle, register_shrinker,
};
use crate::sync::{Arc, Mutex, MutexGuard, lock};
use crate::vmscan::SwapSpace;
use disk::{Disk, RamDisk};

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
    swap: Arc<dyn Fn() -> SwapSpace + Send + Sync>,
    ns: Mutex<Namespace>,
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
            swap,
            ns: Mutex::new(ns),
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

    /// Unmounts (`umount`): refused while a file is open; writes dirty
    /// pages back, frees every dentry, inode and cached page, and stops
    /// the shrinker. The disk goes with the last reference.
    pub fn unmount(&self) -> Result<(), FsError> {
        self.sync()?;
        let mut ns = lock(&self.ns);
        if ns.nr_open > 0 {
            return Err(FsError::Busy {
                nr_open: ns.nr_open,
            });
        }
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
        mut sink: impl FnMut(&[u8]),
    ) -> Result<u64, FsError> {
        let file = self.open(memcg, name, false)?;
        let size = self.size_of(name).unwrap_or(0);
        let mut buf = vec![0; IO_CHUNK_BYTES.min(usize::try_from(size).unwrap_or(usize::MAX))];
        let mut offset = 0;
        let result = loop {
            let len = (size - offset).min(buf.len() as u64) as usize;
            if len == 0 {
                break Ok(size);
            }
            if let Err(e) = file.mapping.read(memcg, offset, &mut buf[..len]) {
                break Err(e.into());
            }
            sink(&buf[..len]);
            offset += len as u64;
        };
        self.close(file);
        result
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
        if used - pages(old_size) + pages(new_size) > capacity {
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
        }
        drop(ns);
        self.disk.remove(meta.ino, name)?;
        Ok(())
    }

    /// Writes every dirty page back (`sync`); returns the pages written.
    pub fn sync(&self) -> Result<u64, FsError> {
        let inodes: Vec<(String, Arc<AddressSpace>, u64)> = {
            let ns = lock(&self.ns);
            ns.icache
                .values()
                .filter_map(|i| {
                    let size = ns.files.get(&i.name)?.size_bytes;
                    Some((i.name.clone(), Arc::clone(&i.mapping), size))
                })
                .collect()
        };
        let mut written = 0;
        for (name, mapping, size) in inodes {
            written += mapping.writeback()?;
            self.disk.set_size(&name, size)?;
        }
        Ok(written)
    }

    /// Drops the clean page cache of every cached inode (`drop_caches` 1,
    /// `drop_pagecache_sb`); returns the pages dropped.
    pub fn drop_pagecache(&self) -> u64 {
        let mappings: Vec<Arc<AddressSpace>> = lock(&self.ns)
            .icache
            .values()
            .map(|i| Arc::clone(&i.mapping))
            .collect();
        mappings.iter().map(|m| m.invalidate()).sum()
    }
}

/// A file open for one read or write.
struct OpenFile {
    name: String,
    ino: u64,
    mapping: Arc<AddressSpace>,
    objcg: Arc<ObjCgroup>,
}

impl Superblock {
    /// `open`: looks `name` up (`create`: made if missing), caching its
    /// dentry and inode charged to `memcg`, and charges an open file.
    fn open(&self, memcg: &Arc<MemCgroup>, name: &str, create: bool) -> Result<OpenFile, FsError> {
        check_name(name)?;
        let objcg = memcg.obj_cgroup();
        self.tree
            .charge_slab(&objcg, FILE_BYTES, SlabKind::Unreclaimable)?;
        match self.lookup(memcg, &objcg, name, create) {
            Ok(file) => Ok(file),
            Err(e) => {
                self.tree
                    .uncharge_slab(&objcg, FILE_BYTES, SlabKind::Unreclaimable);
                Err(e)
            }
        }
    }

    /// The dentry and inode of `name`, referenced, made if not cached.
    fn lookup(
        &self,
        memcg: &Arc<MemCgroup>,
        objcg: &Arc<ObjCgroup>,
        name: &str,
        create: bool,
    ) -> Result<OpenFile, FsError> {
        loop {
            {
                let mut ns = lock(&self.ns);
                if !ns.files.contains_key(name) {
                    if !create {
                        return Err(FsError::NotFound {
                            name: name.to_owned(),
                        });
                    }
                    let ino = ns.next_ino;
                    ns.next_ino += 1;
                    ns.files
                        .insert(name.to_owned(), FileMeta { ino, size_bytes: 0 });
                }
                if let Some(file) = self.get_cached(&mut ns, name, objcg) {
                    return Ok(file);
                }
            }
            // Not cached: charge a dentry and an inode first (a charge may
            // reclaim, which runs our own shrinker), then build them.
            let new_objcg = memcg.obj_cgroup();
            let bytes = DENTRY_BYTES + INODE_BYTES;
            self.tree
                .charge_slab(&new_objcg, bytes, SlabKind::Reclaimable)?;
            let mut ns = lock(&self.ns);
            let made = self.instantiate(&mut ns, name, &new_objcg);
            drop(ns);
            match made {
                Ok(unused_bytes) if unused_bytes > 0 => {
                    self.tree
                        .uncharge_slab(&new_objcg, unused_bytes, SlabKind::Reclaimable);
                }
                Ok(_) => {}
                Err(e) => {
                    self.tree
                        .uncharge_slab(&new_objcg, bytes, SlabKind::Reclaimable);
                    return Err(e);
                }
            }
        }
    }

    /// The cached dentry of `name`, referenced (`dget`), as an open file.
    fn get_cached(
        &self,
        ns: &mut Namespace,
        name: &str,
        objcg: &Arc<ObjCgroup>,
    ) -> Option<OpenFile> {
        let dentry = ns.dcache.get_mut(name)?;
        dentry.count += 1;
        let ino = dentry.ino;
        let inode = ns
            .icache
            .get(&ino)
            .expect("a cached dentry's inode is cached");
        let mapping = Arc::clone(&inode.mapping);
        ns.nr_open += 1;
        Some(OpenFile {
            name: name.to_owned(),
            ino,
            mapping,
            objcg: Arc::clone(objcg),
        })
    }

    /// Makes the missing dentry (and inode) of `name` from a charge of
    /// both; returns the bytes of that charge left unused (another task
    /// cached them meanwhile, or the inode was cached).
    fn instantiate(
        &self,
        ns: &mut Namespace,
        name: &str,
        objcg: &Arc<ObjCgroup>,
    ) -> Result<u64, FsError> {
        let Some(meta) = ns.files.get(name).copied() else {
            // Removed meanwhile: the retry reports it.
            return Ok(DENTRY_BYTES + INODE_BYTES);
        };
        if ns.dcache.contains_key(name) {
            return Ok(DENTRY_BYTES + INODE_BYTES);
        }
        let mut unused = 0;
        if let Some(inode) = ns.icache.get_mut(&meta.ino) {
            inode.count += 1;
            inode.referenced = true;
            unused += INODE_BYTES;
        } else {
            let backing = self.disk.backing(meta.ino, name)?;
            let item = ns.inode_items.alloc()?;
            ns.inode_of_item.insert(item, meta.ino);
            let mapping = AddressSpace::new(&self.tree, backing, Arc::clone(&self.swap));
            let host: Arc<dyn MappingHost> = Arc::new(InodeHost {
                sb: self.me.clone(),
                ino: meta.ino,
            });
            mapping.set_host(host);
            ns.icache.insert(
                meta.ino,
                Inode {
                    name: name.to_owned(),
                    mapping,
                    objcg: Arc::clone(objcg),
                    item,
                    count: 1,
                    referenced: false,
                    on_lru: false,
                },
            );
        }
        let item = ns.dentry_items.alloc()?;
        ns.dentry_of_item.insert(item, name.to_owned());
        ns.dcache.insert(
            name.to_owned(),
            Dentry {
                ino: meta.ino,
                objcg: Arc::clone(objcg),
                item,
                count: 0,
                referenced: false,
                on_lru: false,
            },
        );
        Ok(unused)
    }

    /// `fput` + `dput`: the open file's charge goes; an unused dentry goes
    /// on the LRU, or is marked referenced if it is there already
    /// (`retain_dentry`); an unlinked one is freed.
    fn close(&self, file: OpenFile) {
        self.tree
            .uncharge_slab(&file.objcg, FILE_BYTES, SlabKind::Unreclaimable);
        let mut ns = lock(&self.ns);
        ns.nr_open -= 1;
        if ns.dcache.get(&file.name).is_none_or(|d| d.ino != file.ino) {
            // Its file was removed while open.
            if let Some(dentry) = ns.unlinked.get_mut(&file.ino) {
                dentry.count -= 1;
                if dentry.count == 0
                    && let Some(dentry) = ns.unlinked.remove(&file.ino)
                {
                    self.free_dentry(&mut ns, dentry);
                }
            }
            return;
        }
        let Some(dentry) = ns.dcache.get_mut(&file.name) else {
            return;
        };
        dentry.count -= 1;
        if dentry.count > 0 {
            return;
        }
        if dentry.on_lru {
            dentry.referenced = true;
        } else {
            dentry.on_lru = true;
            let (item, memcg) = (dentry.item, dentry.objcg.memcg());
            let _ = self.dentry_lru.add(item, 0, &memcg);
        }
    }

    /// Frees a dentry (`__dentry_kill`): off the LRU, uncharged, and its
    /// inode loses the reference (`iput`).
    fn kill_dentry(&self, ns: &mut Namespace, name: &str) {
        if let Some(dentry) = ns.dcache.remove(name) {
            ns.dentry_of_item.remove(&dentry.item);
            self.free_dentry(ns, dentry);
        }
    }

    /// The second half of [`Superblock::kill_dentry`], for a dentry out of
    /// the cache already.
    fn free_dentry(&self, ns: &mut Namespace, dentry: Dentry) {
        if dentry.on_lru {
            let _ = self.dentry_lru.del(dentry.item, 0, &dentry.objcg.memcg());
        }
        ns.dentry_items.free.push(dentry.item);
        self.tree
            .uncharge_slab(&dentry.objcg, DENTRY_BYTES, SlabKind::Reclaimable);
        self.iput(ns, dentry.ino);
    }

    /// Drops a reference to an inode: the last one puts it on the LRU, or
    /// evicts it if its file is gone (`iput_final`).
    fn iput(&self, ns: &mut Namespace, ino: u64) {
        let Some(inode) = ns.icache.get(&ino) else {
            return;
        };
        let file_exists = ns.files.get(&inode.name).is_some_and(|m| m.ino == ino);
        let Some(inode) = ns.icache.get_mut(&ino) else {
            return;
        };
        inode.count -= 1;
        if inode.count > 0 {
            return;
        }
        if !file_exists {
            self.evict_inode(ns, ino);
            return;
        }
        self.inode_add_lru(ns, ino);
    }

    /// Puts an unused inode on the LRU (`inode_add_lru`), unless it holds
    /// page cache (`mapping_shrinkable` false on a 64-bit machine): its
    /// mapping tells us when its last folio goes ([`InodeHost`]).
    fn inode_add_lru(&self, ns: &mut Namespace, ino: u64) {
        let Some(inode) = ns.icache.get_mut(&ino) else {
            return;
        };
        if inode.count > 0 || inode.on_lru || inode.mapping.nr_folios() > 0 {
            return;
        }
        inode.on_lru = true;
        let (item, memcg) = (inode.item, inode.objcg.memcg());
        let _ = self.inode_lru.add(item, 0, &memcg);
    }

    /// Frees an inode and its page cache (`evict`).
    fn evict_inode(&self, ns: &mut Namespace, ino: u64) {
        let Some(inode) = ns.icache.remove(&ino) else {
            return;
        };
        if inode.on_lru {
            let _ = self.inode_lru.del(inode.item, 0, &inode.objcg.memcg());
        }
        ns.inode_of_item.remove(&inode.item);
        ns.inode_items.free.push(inode.item);
        inode.mapping.truncate();
        self.tree
            .uncharge_slab(&inode.objcg, INODE_BYTES, SlabKind::Reclaimable);
    }

    /// `prune_dcache_sb` for one memory cgroup: walks up to `nr_to_scan`
    /// dentries of its list (`dentry_lru_isolate`): one in use again is
    /// taken off the list, a referenced one gets another round, the rest
    /// are freed.
    fn prune_dcache(&self, memcg: &MemCgroup, nr_to_scan: u64) -> Pruned {
        self.prune(
            &self.dentry_lru,
            memcg,
            nr_to_scan,
            |ns, item| {
                let name = ns.dentry_of_item.get(&item)?.clone();
                let dentry = ns.dcache.get_mut(&name)?;
                let verdict =
                    lru_verdict(&mut dentry.on_lru, &mut dentry.referenced, dentry.count > 0);
                Some((name, verdict))
            },
            |ns, item, name| {
                // The same dentry, still unused and unlisted (taken again
                // since: it stays, off the LRU until its next close).
                let free = ns
                    .dcache
                    .get(&name)
                    .is_some_and(|d| d.item == item && d.count == 0 && !d.on_lru);
                if free {
                    self.kill_dentry(ns, &name);
                }
                free.then_some(DENTRY_BYTES)
            },
        )
    }

    /// `prune_icache_sb` for one memory cgroup (`inode_lru_isolate`): one
    /// in use again or holding page cache again is taken off the list (an
    /// `iput`, or its last folio going, puts it back), a referenced one
    /// gets another round, the rest are evicted.
    fn prune_icache(&self, memcg: &MemCgroup, nr_to_scan: u64) -> Pruned {
        self.prune(
            &self.inode_lru,
            memcg,
            nr_to_scan,
            |ns, item| {
                let ino = *ns.inode_of_item.get(&item)?;
                let inode = ns.icache.get_mut(&ino)?;
                let busy = inode.count > 0 || inode.mapping.nr_folios() > 0;
                let verdict = lru_verdict(&mut inode.on_lru, &mut inode.referenced, busy);
                Some((ino, verdict))
            },
            |ns, item, ino| {
                // The same inode, still unused and unlisted.
                let free = ns
                    .icache
                    .get(&ino)
                    .is_some_and(|i| i.item == item && i.count == 0 && !i.on_lru);
                if free {
                    self.evict_inode(ns, ino);
                }
                free.then_some(INODE_BYTES)
            },
        )
    }

    /// Walks `memcg`'s list of `lru` (`list_lru_shrink_walk`) under the
    /// namespace lock, tried (a held lock skips the item): `isolate` names
    /// each item's object and says what to do with it; the objects to
    /// dispose of are then freed by `dispose` (which returns the bytes it
    /// freed, if it still could) under the lock taken again. Every item
    /// taken off the list counts as freed, as the kernel's walk result
    /// does.
    fn prune<K>(
        &self,
        lru: &ListLru,
        memcg: &MemCgroup,
        nr_to_scan: u64,
        mut isolate: impl FnMut(&mut Namespace, ItemId) -> Option<(K, LruVerdict)>,
        mut dispose: impl FnMut(&mut Namespace, ItemId, K) -> Option<u64>,
    ) -> Pruned {
        let mut doomed = Vec::new();
        let mut pruned = Pruned::default();
        let mut budget = usize::try_from(nr_to_scan).unwrap_or(usize::MAX);
        let _ = lru.walk_one(0, memcg, &mut budget, |item, guard| {
            let Some(mut ns) = try_lock(&self.ns) else {
                return Walked::Skip(guard);
            };
            let Some((key, verdict)) = isolate(&mut ns, item) else {
                return Walked::Skip(guard);
            };
            match verdict {
                LruVerdict::Rotate => Walked::Rotate(guard),
                LruVerdict::Remove | LruVerdict::Dispose => {
                    if matches!(verdict, LruVerdict::Dispose) {
                        doomed.push((item, key));
                    }
                    pruned.objects += 1;
                    let (list, token) = guard.isolate();
                    Walked::Removed(list, token)
                }
            }
        });
        let mut ns = lock(&self.ns);
        for (item, key) in doomed {
            pruned.bytes += dispose(&mut ns, item, key).unwrap_or(0);
        }
        pruned
    }
}

/// What a shrinker walk does with a listed dentry or inode.
enum LruVerdict {
    /// In use (or holding page cache): off the list, not freed.
    Remove,
    /// Referenced since the last look: another round.
    Rotate,
    /// Off the list and freed.
    Dispose,
}

/// The verdict on a listed object, updating its flags: `busy` ones leave
/// the list, referenced ones lose the mark and rotate, the rest go.
fn lru_verdict(on_lru: &mut bool, referenced: &mut bool, busy: bool) -> LruVerdict {
    if busy {
        *on_lru = false;
        return LruVerdict::Remove;
    }
    if std::mem::take(referenced) {
        return LruVerdict::Rotate;
    }
    *on_lru = false;
    LruVerdict::Dispose
}

/// An inode as its mapping's host: told when the mapping's last folio
/// goes, it puts the inode on the LRU if unused.
struct InodeHost {
    sb: std::sync::Weak<Superblock>,
    ino: u64,
}

impl MappingHost for InodeHost {
    fn mapping_shrinkable(&self) {
        if let Some(sb) = self.sb.upgrade() {
            let mut ns = lock(&sb.ns);
            sb.inode_add_lru(&mut ns, self.ino);
        }
    }
}

/// `spin_trylock` on the namespace.
fn try_lock(ns: &Mutex<Namespace>) -> Option<MutexGuard<'_, Namespace>> {
    match ns.try_lock() {
        Ok(guard) => Some(guard),
        Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
        Err(std::sync::TryLockError::WouldBlock) => None,
    }
}

/// A name a file directly in the mount may have.
fn check_name(name: &str) -> Result<(), FsError> {
    if name.is_empty()
        || name == "."
        || name == ".."
        || name.contains('/')
        || name.contains('\0')
        || name.len() > NAME_MAX
    {
        return Err(FsError::InvalidName {
            name: name.to_owned(),
        });
    }
    Ok(())
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

/// The superblock's shrinker (`super_cache_count`, `super_cache_scan`).
struct SbShrinker(std::sync::Weak<Superblock>);

impl Shrinker for SbShrinker {
    fn count_objects(&self, sc: &ShrinkControl) -> ShrinkCount {
        let Some(sb) = self.0.upgrade() else {
            return ShrinkCount::Empty;
        };
        let dentries = sb.dentry_lru.count_one(sc.nid, &sc.memcg).unwrap_or(0);
        let inodes = sb.inode_lru.count_one(sc.nid, &sc.memcg).unwrap_or(0);
        match (dentries + inodes) as u64 {
            0 => ShrinkCount::Empty,
            // vfs_cache_pressure 100: as counted.
            n => ShrinkCount::Objects(n),
        }
    }

    fn scan_objects(&self, sc: &mut ShrinkControl) -> ShrinkScan {
        let Some(sb) = self.0.upgrade() else {
            return ShrinkScan::Stop;
        };
        let dentries = sb.dentry_lru.count_one(sc.nid, &sc.memcg).unwrap_or(0) as u64;
        let inodes = sb.inode_lru.count_one(sc.nid, &sc.memcg).unwrap_or(0) as u64;
        let total = dentries + inodes + 1;
        // Proportional shares, each at least one (`mult_frac` + 1).
        let dentry_scan = sc.nr_to_scan * dentries / total + 1;
        let inode_scan = sc.nr_to_scan * inodes / total + 1;
        let d = sb.prune_dcache(&sc.memcg, dentry_scan);
        let i = sb.prune_icache(&sc.memcg, inode_scan);
        sc.reclaimed_pages += (d.bytes + i.bytes) / crate::mm_types::PAGE_SIZE;
        ShrinkScan::Freed(d.objects + i.objects)
    }

    fn batch(&self) -> u64 {
        SB_SHRINK_BATCH
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
