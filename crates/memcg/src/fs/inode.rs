//! The inode cache: references (`iput`), the inode LRU (`inode_add_lru`,
//! kept for inodes whose mapping is shrinkable: no folios, and no shadows
//! but a lone one at index 0) and eviction (`evict`). See the
//! module docs of `fs` for the LRU rules.

use super::{INODE_BYTES, Namespace, Superblock};
use crate::filemap::MappingHost;
use crate::memcontrol::SlabKind;
use crate::sync::lock;

impl Superblock {
    /// Drops a reference to an inode: the last one puts it on the LRU, or
    /// evicts it if its file is gone (`iput_final`).
    pub(super) fn iput(&self, ns: &mut Namespace, ino: u64) {
        if !ns.icache.contains_key(&ino) {
            return;
        }
        let file_exists = ns.nodes.contains_key(&ino);
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

    /// Puts an unused inode on the LRU (`inode_add_lru`), unless its
    /// mapping is not shrinkable (`mapping_shrinkable` on a 64-bit machine:
    /// it holds folios, or shadows other than a lone one at index 0): the
    /// mapping tells us when that changes ([`InodeHost`]), after its last
    /// folio or the shadow-node shrinker's last node goes.
    pub(super) fn inode_add_lru(&self, ns: &mut Namespace, ino: u64) {
        let Some(inode) = ns.icache.get_mut(&ino) else {
            return;
        };
        if inode.count > 0 || inode.on_lru || !inode.mapping.is_shrinkable() {
            return;
        }
        inode.on_lru = true;
        let (item, memcg) = (inode.item, inode.objcg.memcg());
        let _ = self.inode_lru.add(item, 0, &memcg);
    }

    /// Frees an inode and its page cache (`evict`).
    pub(super) fn evict_inode(&self, ns: &mut Namespace, ino: u64) {
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
}

/// An inode as its mapping's host: told when the mapping becomes
/// shrinkable, it puts the inode on the LRU if unused.
pub(super) struct InodeHost {
    pub(super) sb: std::sync::Weak<Superblock>,
    pub(super) ino: u64,
}

impl MappingHost for InodeHost {
    fn mapping_shrinkable(&self) {
        if let Some(sb) = self.sb.upgrade() {
            let mut ns = lock(&sb.ns);
            sb.inode_add_lru(&mut ns, self.ino);
        }
    }
}
