//! The dentry cache: looking a file up (`open`, `lookup`, `d_alloc` and
//! `d_instantiate`), charging the dentry and inode it caches to the
//! looking task's object cgroup, and letting go (`dput`, `__dentry_kill`).
//! See the module docs of `fs` for the LRU rules.

use super::{
    DENTRY_BYTES, Dentry, FILE_BYTES, FileMeta, FsError, INODE_BYTES, Inode, InodeHost, NAME_MAX,
    Namespace, Superblock,
};
use crate::filemap::{AddressSpace, MappingHost};
use crate::memcontrol::Gfp;
use crate::memcontrol::{MemCgroup, ObjCgroup, SlabKind};
use crate::readahead::FileRaState;
use crate::sync::{Arc, Mutex, lock};

/// An open file (`struct file`).
pub(super) struct OpenFile {
    pub(super) name: String,
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
    /// `open`: looks `name` up (`create`: made if missing), caching its
    /// dentry and inode charged to `memcg`, and charges an open file.
    pub(super) fn open(
        &self,
        memcg: &Arc<MemCgroup>,
        name: &str,
        create: bool,
    ) -> Result<OpenFile, FsError> {
        check_name(name)?;
        let objcg = memcg.obj_cgroup();
        self.tree
            .charge_slab(&objcg, FILE_BYTES, SlabKind::Unreclaimable, Gfp::Kernel)?;
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
                .charge_slab(&new_objcg, bytes, SlabKind::Reclaimable, Gfp::Kernel)?;
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
            ra: Mutex::new(FileRaState::new(self.ra_pages())),
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
            let mapping = AddressSpace::with_bdi(
                &self.tree,
                backing,
                Arc::clone(&self.swap),
                Arc::clone(&self.bdi),
            );
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
    pub(super) fn close(&self, file: OpenFile) {
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
    pub(super) fn kill_dentry(&self, ns: &mut Namespace, name: &str) {
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
}

/// A name a file directly in the mount may have.
pub(super) fn check_name(name: &str) -> Result<(), FsError> {
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
