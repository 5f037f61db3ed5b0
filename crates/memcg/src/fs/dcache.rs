//! The dentry cache: looking a file up (`open`, `lookup`, `d_alloc` and
//! `d_instantiate`), charging the dentry and inode it caches to the
//! looking task's object cgroup, and letting go (`dput`, `__dentry_kill`,
//! `d_delete` of a name removed while in use, `d_move` on rename). A
//! dentry is a name in a directory, `(directory inode, name)`; only
//! regular files' dentries are cached (directories and symbolic links are
//! resolved from the namespace alone). See the module docs of `fs` for the
//! LRU rules.

use super::namei::{DKey, Owner};
use super::{
    DENTRY_BYTES, Dentry, FILE_BYTES, FsError, INODE_BYTES, Inode, InodeHost, Namespace, Superblock,
};
use crate::filemap::{AddressSpace, MappingHost};
use crate::list_lru::ItemId;
use crate::memcontrol::Gfp;
use crate::memcontrol::{MemCgroup, ObjCgroup, SlabKind};
use crate::readahead::FileRaState;
use crate::sync::{Arc, Mutex, lock};

/// What an open does when the name is missing (`O_CREAT`) or present
/// (`O_EXCL`).
#[derive(Debug, Clone, Copy)]
pub(super) struct Create {
    pub(super) owner: Owner,
    pub(super) exclusive: bool,
}

/// An open file (`struct file`).
pub(super) struct OpenFile {
    /// Its dentry's list_lru item (the dentry's identity while it lives:
    /// a rename moves the dentry to another name).
    pub(super) item: ItemId,
    pub(super) ino: u64,
    pub(super) mapping: Arc<AddressSpace>,
    objcg: Arc<ObjCgroup>,
    /// Its readahead state (`f_ra`): locked only to copy it in and out
    /// around a read, so concurrent reads of one open file do not wait on
    /// each other (the last one to finish leaves its state, as racing
    /// readers of one `struct file` do in the kernel).
    pub(super) ra: Mutex<FileRaState>,
}

impl Superblock {
    /// `open` of `path` from the root (`create`: made if missing, owned by
    /// root, mode 0644).
    pub(super) fn open(
        &self,
        memcg: &Arc<MemCgroup>,
        path: &str,
        create: bool,
    ) -> Result<OpenFile, FsError> {
        let (parent, name) = lock(&self.ns).resolve_parent(path)?;
        let create = create.then_some(Create {
            owner: Owner::root(0o644),
            exclusive: false,
        });
        self.open_at(memcg, &(parent, name), create)
    }

    /// `open` of name `key`: looks it up (made if missing and `create`
    /// says so), caching its dentry and inode charged to `memcg`, and
    /// charges an open file.
    pub(super) fn open_at(
        &self,
        memcg: &Arc<MemCgroup>,
        key: &DKey,
        create: Option<Create>,
    ) -> Result<OpenFile, FsError> {
        let objcg = memcg.obj_cgroup();
        self.tree
            .charge_slab(&objcg, FILE_BYTES, SlabKind::Unreclaimable, Gfp::Kernel)?;
        match self.lookup(memcg, &objcg, key, create) {
            Ok(file) => Ok(file),
            Err(e) => {
                self.tree
                    .uncharge_slab(&objcg, FILE_BYTES, SlabKind::Unreclaimable);
                Err(e)
            }
        }
    }

    /// The node `key` names, made if missing and `create` allows; `EEXIST`
    /// for an exclusive create of an existing name, `EISDIR` for a
    /// directory (a symbolic link is followed by the caller, else it is
    /// `ELOOP`, as `O_NOFOLLOW` gives).
    fn resolve_for_open(
        &self,
        ns: &mut Namespace,
        key: &DKey,
        create: Option<Create>,
        created: &mut bool,
    ) -> Result<u64, FsError> {
        let ino = match ns.child(key.0, &key.1) {
            Ok(ino) => {
                if create.is_some_and(|c| c.exclusive) && !*created {
                    return Err(FsError::Exists {
                        name: key.1.clone(),
                    });
                }
                ino
            }
            Err(FsError::NotFound { .. }) if create.is_some() => {
                let owner = create.map(|c| c.owner).expect("checked");
                *created = true;
                self.mknod_locked(ns, key.0, &key.1, owner)?
            }
            Err(e) => return Err(e),
        };
        match ns.node(ino)?.kind() {
            super::FileKind::Regular => Ok(ino),
            super::FileKind::Directory => Err(FsError::IsDir {
                name: key.1.clone(),
            }),
            super::FileKind::Symlink => Err(FsError::Symlink {
                name: key.1.clone(),
            }),
        }
    }

    /// The dentry and inode of `key`, referenced, made if not cached.
    fn lookup(
        &self,
        memcg: &Arc<MemCgroup>,
        objcg: &Arc<ObjCgroup>,
        key: &DKey,
        create: Option<Create>,
    ) -> Result<OpenFile, FsError> {
        let mut created = false;
        loop {
            {
                let mut ns = lock(&self.ns);
                self.resolve_for_open(&mut ns, key, create, &mut created)?;
                if let Some(file) = self.get_cached(&mut ns, key, objcg) {
                    return Ok(file);
                }
            }
            // Not cached: charge a dentry and an inode first (a charge may
            // reclaim, which runs our own shrinker), then build them.
            let new_objcg = memcg.obj_cgroup();
            let bytes = DENTRY_BYTES + INODE_BYTES;
            self.tree
                .charge_slab(&new_objcg, bytes, SlabKind::Reclaimable, Gfp::Kernel)?;
            let mut ns = lock(&self.ns);
            let made = self.instantiate(&mut ns, key, &new_objcg);
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

    /// The cached dentry of `key`, referenced (`dget`), as an open file.
    fn get_cached(
        &self,
        ns: &mut Namespace,
        key: &DKey,
        objcg: &Arc<ObjCgroup>,
    ) -> Option<OpenFile> {
        let dentry = ns.dcache.get_mut(key)?;
        dentry.count += 1;
        let (ino, item) = (dentry.ino, dentry.item);
        let inode = ns
            .icache
            .get(&ino)
            .expect("a cached dentry's inode is cached");
        let mapping = Arc::clone(&inode.mapping);
        ns.nr_open += 1;
        if let Some(meta) = ns.nodes.get_mut(&ino) {
            meta.nr_open += 1;
        }
        Some(OpenFile {
            item,
            ino,
            mapping,
            objcg: Arc::clone(objcg),
            ra: Mutex::new(FileRaState::new(self.ra_pages())),
        })
    }

    /// Makes the missing dentry (and inode) of `key` from a charge of
    /// both; returns the bytes of that charge left unused (another task
    /// cached them meanwhile, or the inode was cached).
    fn instantiate(
        &self,
        ns: &mut Namespace,
        key: &DKey,
        objcg: &Arc<ObjCgroup>,
    ) -> Result<u64, FsError> {
        let Ok(ino) = ns.child(key.0, &key.1) else {
            // Removed meanwhile: the retry reports it.
            return Ok(DENTRY_BYTES + INODE_BYTES);
        };
        if ns.dcache.contains_key(key) {
            return Ok(DENTRY_BYTES + INODE_BYTES);
        }
        let mut unused = 0;
        if let Some(inode) = ns.icache.get_mut(&ino) {
            inode.count += 1;
            inode.referenced = true;
            unused += INODE_BYTES;
        } else {
            self.instantiate_inode(ns, ino, objcg)?;
        }
        let item = ns.dentry_items.alloc()?;
        ns.dentry_of_item.insert(item, key.clone());
        ns.dcache.insert(
            key.clone(),
            Dentry {
                ino,
                objcg: Arc::clone(objcg),
                item,
                count: 0,
                referenced: false,
                on_lru: false,
            },
        );
        Ok(unused)
    }

    /// Caches the inode of node `ino`, with one reference.
    fn instantiate_inode(
        &self,
        ns: &mut Namespace,
        ino: u64,
        objcg: &Arc<ObjCgroup>,
    ) -> Result<(), FsError> {
        let path = ns.path_of(ino);
        let backing = self.disk.backing(ino, path.as_deref())?;
        let item = ns.inode_items.alloc()?;
        ns.inode_of_item.insert(item, ino);
        let mapping = AddressSpace::with_bdi(
            &self.tree,
            Arc::clone(&backing),
            Arc::clone(&self.swap),
            Arc::clone(&self.bdi),
        );
        let host: Arc<dyn MappingHost> = Arc::new(InodeHost {
            sb: self.me.clone(),
            ino,
        });
        mapping.set_host(host);
        ns.icache.insert(
            ino,
            Inode {
                mapping,
                backing,
                objcg: Arc::clone(objcg),
                item,
                count: 1,
                referenced: false,
                on_lru: false,
            },
        );
        Ok(())
    }

    /// `fput` + `dput`: the open file's charge goes; an unused dentry goes
    /// on the LRU, or is marked referenced if it is there already
    /// (`retain_dentry`); a removed one is freed, and a node without names
    /// goes with its last open file.
    pub(super) fn close(&self, file: OpenFile) {
        self.tree
            .uncharge_slab(&file.objcg, FILE_BYTES, SlabKind::Unreclaimable);
        let mut ns = lock(&self.ns);
        ns.nr_open -= 1;
        let gone = self.forget_open(&mut ns, file.ino);
        self.dput(&mut ns, file.item);
        if gone && ns.icache.get(&file.ino).is_some_and(|i| i.count == 0) {
            self.evict_inode(&mut ns, file.ino);
        }
        drop(ns);
        self.discard(gone.then_some(file.ino));
    }

    /// One open file fewer on node `ino`: true if that removed it (no name
    /// left).
    fn forget_open(&self, ns: &mut Namespace, ino: u64) -> bool {
        let Some(meta) = ns.nodes.get_mut(&ino) else {
            return false;
        };
        meta.nr_open -= 1;
        if meta.nlink > 0 || meta.nr_open > 0 {
            return false;
        }
        ns.set_size(ino, 0);
        ns.nodes.remove(&ino);
        true
    }

    /// Drops a reference to dentry `item` (`dput`).
    fn dput(&self, ns: &mut Namespace, item: ItemId) {
        let Some(key) = ns.dentry_of_item.get(&item).cloned() else {
            // Its name was removed while open.
            if let Some(dentry) = ns.unlinked.get_mut(&item) {
                dentry.count -= 1;
                if dentry.count == 0
                    && let Some(dentry) = ns.unlinked.remove(&item)
                {
                    self.free_dentry(ns, dentry);
                }
            }
            return;
        };
        let Some(dentry) = ns.dcache.get_mut(&key) else {
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

    /// Name `key` of node `ino` is gone (unlink, or a rename over it): its
    /// dentry is freed, or unhashed if in use (`d_delete`); the node goes
    /// if that was its last name and no file is open on it, and its
    /// number is returned for its disk space to be freed.
    pub(super) fn drop_name(&self, ns: &mut Namespace, key: DKey, ino: u64) -> Option<u64> {
        let gone = ns
            .nodes
            .get(&ino)
            .is_some_and(|m| m.nlink == 0 && m.nr_open == 0);
        if gone {
            ns.set_size(ino, 0);
            ns.nodes.remove(&ino);
        }
        if ns.dcache.get(&key).is_some_and(|d| d.count == 0) {
            self.kill_dentry(ns, &key);
        } else if let Some(mut dentry) = ns.dcache.remove(&key) {
            if dentry.on_lru {
                dentry.on_lru = false;
                let _ = self.dentry_lru.del(dentry.item, 0, &dentry.objcg.memcg());
            }
            ns.dentry_of_item.remove(&dentry.item);
            ns.unlinked.insert(dentry.item, dentry);
        }
        if gone && ns.icache.get(&ino).is_some_and(|i| i.count == 0) {
            // No dentry (the shrinker took it) but the inode is cached,
            // kept by its page cache: its final iput evicts it now that
            // the file is gone; without this its pages, dirty ones
            // included, stayed charged forever.
            self.evict_inode(ns, ino);
        }
        gone.then_some(ino)
    }

    /// A rename moved name `from` to `to` (`d_move`); `swap`: and `to` to
    /// `from` (`RENAME_EXCHANGE`).
    pub(super) fn move_dentry(&self, ns: &mut Namespace, from: DKey, to: DKey, swap: bool) {
        let moved = ns.dcache.remove(&from);
        let swapped = if swap { ns.dcache.remove(&to) } else { None };
        if let Some(dentry) = moved {
            ns.dentry_of_item.insert(dentry.item, to.clone());
            ns.dcache.insert(to, dentry);
        }
        if let Some(dentry) = swapped {
            ns.dentry_of_item.insert(dentry.item, from.clone());
            ns.dcache.insert(from, dentry);
        }
    }

    /// Frees a dentry (`__dentry_kill`): off the LRU, uncharged, and its
    /// inode loses the reference (`iput`).
    pub(super) fn kill_dentry(&self, ns: &mut Namespace, key: &DKey) {
        if let Some(dentry) = ns.dcache.remove(key) {
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
}
