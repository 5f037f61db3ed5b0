//! A per-tenant cache on the memcg library: every tenant is a memory
//! cgroup, every cache entry is charged to its tenant and sits on its
//! tenant's list of a memcg-aware list_lru, and a shrinker registered with
//! the tree frees a tenant's oldest entries when a charge of that tenant
//! hits its limit. Deleting a tenant moves its entries and their charge to
//! the parent, as the kernel does with a removed cgroup's dentries.
//!
//! The same design as the kernel's dentry cache (and this crate's zswap):
//! objects are charged in bytes through the tenant's object cgroup
//! (`ObjCgroup`), which follows the tenant to its parent when the tenant
//! is removed, so a removed tenant is released at once instead of being
//! kept alive by its entries.
//!
//! `cargo run -p memcg --example tenant_cache` runs it; `cargo test -p
//! memcg --example tenant_cache` (and `cargo test --workspace`) runs it as
//! a test. Every claim it prints is asserted: a wrong result fails it.

use std::collections::HashMap;
use std::error::Error;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use memcg::list_lru::{ItemId, ListLru, ListLruConfig, Walked};
use memcg::machine::Machine;
use memcg::memcontrol::Gfp;
use memcg::memcontrol::{
    CgroupTree, ChargeError, MemCgroup, MemcgEvent, MemcgStat, ObjCgroup, SlabKind,
};
use memcg::shrinker::{
    ShrinkControl, ShrinkCount, ShrinkScan, Shrinker, ShrinkerHandle, register_shrinker,
};

/// Bytes of each entry's value, charged to its tenant.
const VALUE_BYTES: usize = 1024;

/// Entries the cache holds at most: the size of its table, which list_lru
/// item ids index (`ListLruConfig::max_items`).
const CAPACITY: u32 = 4096;

/// The node every entry is on (the tree has one).
const NID: usize = 0;

/// Why an insert failed.
#[derive(Debug, thiserror::Error)]
enum InsertError {
    /// The tenant (or an ancestor) is at its limit and reclaim could not
    /// make room.
    #[error("no memory for the entry: {0}")]
    Charge(#[from] ChargeError),
    /// Every slot of the table is taken.
    #[error("the cache is full ({CAPACITY} entries)")]
    Full,
}

/// One cached value.
struct Entry {
    key: u64,
    value: Box<[u8]>,
    /// What the value is charged to: its tenant's object cgroup, which
    /// points at the tenant's parent once the tenant is removed.
    objcg: Arc<ObjCgroup>,
}

/// The entries, by list_lru item id, and the key index.
#[derive(Default)]
struct Table {
    slots: Vec<Option<Entry>>,
    free: Vec<ItemId>,
    index: HashMap<u64, ItemId>,
}

/// The cache. Lock order: the table, then a list_lru list (`insert` and
/// `remove` add and delete items under the table lock); the shrinker's walk
/// takes only the list, and the table after the walk.
struct Cache {
    tree: CgroupTree,
    lru: ListLru,
    table: Mutex<Table>,
    /// Set by `get`, cleared by the shrinker's first look: a second chance
    /// (atomics, so the walk reads them without the table lock).
    referenced: Box<[AtomicBool]>,
    shrinker_calls: AtomicU64,
    freed_by_shrinker: AtomicU64,
    rotated: AtomicU64,
    /// Keeps the shrinker registered while the cache lives.
    _shrinker: ShrinkerHandle,
}

/// The cache's shrinker. It holds the cache weakly: the tree holds the
/// shrinker, and the cache holds the tree.
struct CacheShrinker(Weak<Cache>);

impl Cache {
    fn new(tree: &CgroupTree) -> Result<Arc<Self>, Box<dyn Error>> {
        let config = ListLruConfig {
            max_items: CAPACITY,
            ..ListLruConfig::default()
        };
        let lru = ListLru::new(tree, config)?;
        // Memcg-aware: reclaim calls the shrinker for the memory cgroups
        // whose lists have items (the list_lru sets their shrinker bit).
        let shrinker_id = lru.shrinker_id();
        Ok(Arc::new_cyclic(|cache| Cache {
            tree: tree.clone(),
            lru,
            table: Mutex::default(),
            referenced: (0..CAPACITY).map(|_| AtomicBool::new(false)).collect(),
            shrinker_calls: AtomicU64::new(0),
            freed_by_shrinker: AtomicU64::new(0),
            rotated: AtomicU64::new(0),
            _shrinker: register_shrinker(tree, Arc::new(CacheShrinker(cache.clone())), shrinker_id),
        }))
    }

    /// Caches `value` under `key` for `tenant`. The charge comes first,
    /// with no lock held: it may reclaim, and reclaim calls the shrinker.
    fn insert(&self, tenant: &MemCgroup, key: u64, value: &[u8]) -> Result<(), InsertError> {
        self.remove(key);
        let objcg = tenant.obj_cgroup();
        self.tree.charge_slab(
            &objcg,
            value.len() as u64,
            SlabKind::Reclaimable,
            Gfp::Kernel,
        )?;
        let mut table = self.table.lock().unwrap();
        let id = match table.free.pop() {
            Some(id) => id,
            None if table.slots.len() < CAPACITY as usize => {
                table.slots.push(None);
                (table.slots.len() - 1) as ItemId
            }
            None => {
                drop(table);
                let bytes = value.len() as u64;
                self.tree
                    .uncharge_slab(&objcg, bytes, SlabKind::Reclaimable);
                return Err(InsertError::Full);
            }
        };
        self.referenced[id as usize].store(false, Ordering::Relaxed);
        let added = self.lru.add(id, NID, tenant).expect("id below max_items");
        assert!(added, "a free id is on no list");
        table.index.insert(key, id);
        table.slots[id as usize] = Some(Entry {
            key,
            value: value.into(),
            objcg,
        });
        Ok(())
    }

    /// The value under `key`, marking it recently used.
    fn get(&self, key: u64) -> Option<Box<[u8]>> {
        let table = self.table.lock().unwrap();
        let id = *table.index.get(&key)?;
        self.referenced[id as usize].store(true, Ordering::Relaxed);
        table.slots[id as usize].as_ref().map(|e| e.value.clone())
    }

    /// Drops the entry under `key`; false if there was none.
    fn remove(&self, key: u64) -> bool {
        let mut table = self.table.lock().unwrap();
        let Some(id) = table.index.remove(&key) else {
            return false;
        };
        let entry = table.slots[id as usize].as_ref().expect("indexed");
        // The item is on its tenant's list, or, once the tenant was
        // removed, on the list of the ancestor it moved to: where the
        // object cgroup points now.
        if !self.lru.del(id, NID, &entry.objcg.memcg()).unwrap() {
            // A shrinker's walk isolated it: the walker frees it.
            return true;
        }
        let entry = table.slots[id as usize].take().expect("indexed");
        table.free.push(id);
        drop(table);
        self.free(entry);
        true
    }

    /// Entries on `tenant`'s own list.
    fn len_of(&self, tenant: &MemCgroup) -> usize {
        self.lru.count_one(NID, tenant).unwrap()
    }

    /// Gives an entry's charge back.
    fn free(&self, entry: Entry) {
        let bytes = entry.value.len() as u64;
        self.tree
            .uncharge_slab(&entry.objcg, bytes, SlabKind::Reclaimable);
    }

    /// Frees the entries a walk isolated.
    fn dispose(&self, ids: Vec<ItemId>) {
        let mut table = self.table.lock().unwrap();
        let entries: Vec<Entry> = ids
            .into_iter()
            .map(|id| {
                let entry = table.slots[id as usize].take().expect("isolated");
                // Unless `remove` unindexed it meanwhile.
                if table.index.get(&entry.key) == Some(&id) {
                    table.index.remove(&entry.key);
                }
                table.free.push(id);
                entry
            })
            .collect();
        drop(table);
        for entry in entries {
            self.free(entry);
        }
    }
}

impl Drop for Cache {
    fn drop(&mut self) {
        let table = std::mem::take(self.table.get_mut().unwrap());
        for entry in table.slots.into_iter().flatten() {
            self.free(entry);
        }
    }
}

impl Shrinker for CacheShrinker {
    fn count_objects(&self, sc: &ShrinkControl) -> ShrinkCount {
        let Some(cache) = self.0.upgrade() else {
            return ShrinkCount::Empty;
        };
        match cache.lru.count_one(sc.nid, &sc.memcg).unwrap() {
            0 => ShrinkCount::Empty,
            n => ShrinkCount::Objects(n as u64),
        }
    }

    fn scan_objects(&self, sc: &mut ShrinkControl) -> ShrinkScan {
        let Some(cache) = self.0.upgrade() else {
            return ShrinkScan::Stop;
        };
        cache.shrinker_calls.fetch_add(1, Ordering::Relaxed);
        let mut dispose = Vec::new();
        let mut nr_to_walk = sc.nr_to_scan as usize;
        // Oldest first: a recently used entry gets another round at the
        // tail, the others are taken off to be freed.
        cache
            .lru
            .walk_one(sc.nid, &sc.memcg, &mut nr_to_walk, |id, guard| {
                if cache.referenced[id as usize].swap(false, Ordering::Relaxed) {
                    cache.rotated.fetch_add(1, Ordering::Relaxed);
                    return Walked::Rotate(guard);
                }
                let (list, isolated) = guard.isolate_move(&mut dispose);
                Walked::Removed(list, isolated)
            })
            .unwrap();
        let freed = dispose.len() as u64;
        cache.dispose(dispose);
        cache.freed_by_shrinker.fetch_add(freed, Ordering::Relaxed);
        ShrinkScan::Freed(freed)
    }
}

fn value(key: u64) -> Vec<u8> {
    key.to_le_bytes()
        .iter()
        .copied()
        .cycle()
        .take(VALUE_BYTES)
        .collect()
}

fn main() -> Result<(), Box<dyn Error>> {
    // A machine around the tree: its reclaim runs the shrinker below when
    // a tenant hits its limit (a bare tree reclaims nothing).
    let machine = Machine::with_tree(CgroupTree::default());
    let tree = machine.tree().clone();
    // Exact figures for the assertions: no per-thread charge stock (on
    // by default, it keeps up to 64 pages charged ahead per thread) and
    // no metadata charged to a parent for each new memory cgroup.
    tree.set_charge_stock(false);
    tree.set_memcg_metadata_bytes(0);
    let tenants = tree.mkdir("/tenants")?.memcg().unwrap();
    let a = tree.mkdir("/tenants/a")?.memcg().unwrap();
    let b = tree.mkdir("/tenants/b")?.memcg().unwrap();
    let cache = Cache::new(&tree)?;

    // Per-tenant accounting: 100 entries of 1 KiB each are 25 pages.
    for key in 0..100 {
        cache.insert(&a, key, &value(key))?;
        cache.insert(&b, 1000 + key, &value(1000 + key))?;
    }
    assert_eq!((cache.len_of(&a), cache.len_of(&b)), (100, 100));
    assert_eq!((a.memory().usage(), b.memory().usage()), (25, 25)); // pages
    assert_eq!(a.stat(MemcgStat::SlabReclaimable), 100 * 1024); // bytes
    assert_eq!(tenants.memory().usage(), 50);
    println!("a and b: 100 entries each, 25 pages each; /tenants: 50 pages");

    // Memory pressure: a may have 32 pages (128 entries). Keep inserting
    // until a charge at the limit has reclaim call the shrinker, which
    // frees a's oldest entries; an entry used since it was cached gets a
    // second round.
    assert!(tree.set_memory_max(&a, 32));
    for key in 90..100 {
        assert!(cache.get(key).is_some());
    }
    let mut key = 100;
    while cache.shrinker_calls.load(Ordering::Relaxed) == 0 {
        assert!(key < 1000, "reclaim never called the shrinker");
        cache.insert(&a, key, &value(key))?;
        key += 1;
    }
    for more in key..key + 200 {
        cache.insert(&a, more, &value(more))?;
    }
    let freed = cache.freed_by_shrinker.load(Ordering::Relaxed);
    let newest = key + 199;
    assert!(freed > 0 && cache.rotated.load(Ordering::Relaxed) > 0);
    assert!(a.memory().usage() <= 32 && cache.len_of(&a) <= 128);
    assert!(a.event(MemcgEvent::Max) > 0, "charges hit a's memory.max");
    assert_eq!(cache.get(newest).as_deref(), Some(&value(newest)[..]));
    assert_eq!(cache.get(0), None, "the oldest went first");
    // b's entries and charge are untouched: reclaim of a stays in a.
    assert_eq!((cache.len_of(&b), b.memory().usage()), (100, 25));
    println!(
        "a at its 32-page limit: the shrinker freed {freed} of a's entries, a holds {} \
         ({} pages); b still holds 100",
        cache.len_of(&a),
        a.memory().usage()
    );

    // Deleting tenant b: its entries move to the parent's list and their
    // charge to the parent, so b itself is released at once.
    let a_pages = a.memory().usage();
    let b_weak = Arc::downgrade(&b);
    drop(b);
    tree.rmdir("/tenants/b")?;
    assert!(b_weak.upgrade().is_none(), "nothing keeps b alive");
    assert_eq!(tenants.cgroup().nr_dying_descendants(), 0);
    assert_eq!(cache.len_of(&tenants), 100);
    assert_eq!(tenants.memory().usage(), a_pages + 25);
    assert_eq!(cache.get(1042).as_deref(), Some(&value(1042)[..]));
    assert!(cache.remove(1042), "found on the parent's list");
    assert_eq!(cache.len_of(&tenants), 99);
    println!("b removed: its entries are /tenants' now, and b is gone");

    // Nothing left behind: dropping the cache gives every charge back.
    drop(cache);
    assert_eq!(tree.root().memory().usage(), 0);
    assert_eq!(tenants.stat(MemcgStat::SlabReclaimable), 0);
    tree.rmdir("/tenants/a")?;
    tree.rmdir("/tenants")?;
    println!("cache dropped: nothing charged");
    Ok(())
}

#[test]
fn tenant_cache() -> Result<(), Box<dyn Error>> {
    main()
}
