//! The nodes of a page cache's radix tree (lib/xarray.c, v6.14): which
//! exist for the indices a mapping holds, and what each is charged to.
//!
//! # What it models
//!
//! A mapping's entries (folios and shadows) sit in a tree of 64-slot
//! nodes. A leaf node covers 64 consecutive indices; a node one level up
//! covers 64 leaves, and so on; the tree is as tall as its largest index
//! needs, and a mapping whose only entry is at index 0 keeps it in the
//! tree's head with no node at all. The kernel grows the tree on insertion
//! (`xas_expand`, `xas_create`) and, on deletion, frees nodes that empty
//! and shrinks the tree from the top while its root holds only slot 0
//! (`xas_delete_node`, `xas_shrink`). For a set of indices `S` the nodes
//! are therefore exactly: none if `S` is empty or `{0}`, else, for each
//! level below the height `h` (the least with `max(S) < 64^h`), one node
//! per 64^(level+1)-index range holding an index of `S`. [`XaNodes`] keeps
//! that set, each node with the object cgroup it was charged to (a node is
//! a 576-byte `radix_tree_node` slab object, allocated with
//! `__GFP_ACCOUNT` by whoever inserted the entry that needed it) and, for
//! a leaf, the shadow-node list item it is on while it holds only shadows
//! (`workingset_update_node`, `workingset.rs`).
//!
//! # Invariants
//!
//! - After each [`XaNodes::insert`] or [`XaNodes::remove`] the nodes are
//!   exactly those of the mapping's index set, as above.
//! - Each node holds one charge of [`XA_NODE_BYTES`] on its object cgroup
//!   until it is returned from [`XaNodes::remove`] or [`XaNodes::take_all`]
//!   (the caller uncharges it).
//!
//! # Locking
//!
//! None of its own: it lives under its mapping's lock.

use std::collections::{BTreeMap, BTreeSet};

use crate::list_lru::ItemId;
use crate::memcontrol::ObjCgroup;
use crate::sync::Arc;

/// Bytes of one node (`sizeof(struct xa_node)` on x86-64).
pub const XA_NODE_BYTES: u64 = 576;

/// Slots per node, as a shift (`XA_CHUNK_SHIFT`).
const CHUNK_SHIFT: u32 = 6;

/// A node: its level (0 for a leaf) and which range of that level it
/// covers (`index >> (6 * (level + 1))`).
pub(crate) type NodeKey = (u32, u64);

/// One node of the tree.
#[derive(Debug)]
pub(crate) struct XaNode {
    /// Where its 576 bytes are charged.
    pub(crate) objcg: Arc<ObjCgroup>,
    /// A leaf holding only shadows: its item on the shadow-node list_lru.
    pub(crate) shadow_item: Option<ItemId>,
}

/// The nodes of one mapping's tree.
#[derive(Debug, Default)]
pub(crate) struct XaNodes {
    nodes: BTreeMap<NodeKey, XaNode>,
    /// Levels of nodes (0: no node).
    height: u32,
}

/// The node of `level` above `index`.
pub(crate) fn node_key(index: u64, level: u32) -> NodeKey {
    let shift = CHUNK_SHIFT * (level + 1);
    (level, index.checked_shr(shift).unwrap_or(0))
}

/// The leaf holding `index`.
pub(crate) fn leaf_of(index: u64) -> u64 {
    node_key(index, 0).1
}

/// The indices node `key` covers.
pub(crate) fn node_range((level, key): NodeKey) -> std::ops::RangeInclusive<u64> {
    let shift = CHUNK_SHIFT * (level + 1);
    let start = key.checked_shl(shift).unwrap_or(0);
    let span_minus_one = 1u64.checked_shl(shift).map_or(u64::MAX, |s| s - 1);
    start..=start.saturating_add(span_minus_one)
}

/// The tree's height for a set of indices whose largest is `max`, or 0
/// when the set is empty or only `{0}` (the entry sits in the head).
fn height_for(len: usize, max: Option<u64>) -> u32 {
    match max {
        None | Some(0) if len <= 1 => 0,
        _ => {
            let max = max.unwrap_or(0);
            let mut h = 1;
            while max
                .checked_shr(CHUNK_SHIFT * h)
                .is_some_and(|rest| rest != 0)
            {
                h += 1;
            }
            h
        }
    }
}

impl XaNodes {
    /// Nodes in the tree.
    pub(crate) fn len(&self) -> usize {
        self.nodes.len()
    }

    /// The leaf `leaf` (as [`leaf_of`] names it), if it exists.
    pub(crate) fn leaf_mut(&mut self, leaf: u64) -> Option<&mut XaNode> {
        self.nodes.get_mut(&(0, leaf))
    }

    /// The nodes an insertion of `index` into `entries` (which does not
    /// hold it) would create.
    pub(crate) fn needed<V>(&self, entries: &BTreeMap<u64, V>, index: u64) -> Vec<NodeKey> {
        let max = entries
            .last_key_value()
            .map_or(index, |(&m, _)| m.max(index));
        let height = height_for(entries.len() + 1, Some(max));
        self.missing(index, height, !entries.is_empty())
    }

    /// The nodes a tree of `height` holding `index` has that this one
    /// lacks: those above `index`, and, if it held other entries (`had`)
    /// and grows taller, those above its old root or head entry, which
    /// moves to slot 0 of each new level (`xas_expand`).
    fn missing(&self, index: u64, height: u32, had: bool) -> Vec<NodeKey> {
        let above_index = (0..height).map(|level| node_key(index, level));
        let grown = if had { self.height..height } else { 0..0 };
        let above_root = grown.map(|level| (level, 0));
        let keys: BTreeSet<NodeKey> = above_index.chain(above_root).collect();
        keys.into_iter()
            .filter(|key| !self.nodes.contains_key(key))
            .collect()
    }

    /// Records the insertion of `index` into `entries` (which now holds
    /// it): creates the nodes [`XaNodes::needed`] named, charged to the
    /// object cgroups taken from `charged` (one each). Returns the leaves
    /// it created.
    pub(crate) fn insert<V>(
        &mut self,
        entries: &BTreeMap<u64, V>,
        index: u64,
        charged: &mut Vec<Arc<ObjCgroup>>,
    ) -> Vec<u64> {
        let height = height_for(entries.len(), entries.last_key_value().map(|(&m, _)| m));
        let created = self.missing(index, height, entries.len() > 1);
        self.height = height;
        let mut leaves = Vec::new();
        for key in created {
            let objcg = charged
                .pop()
                .expect("a node charge for every node an insertion creates");
            if key.0 == 0 {
                leaves.push(key.1);
            }
            self.nodes.insert(
                key,
                XaNode {
                    objcg,
                    shadow_item: None,
                },
            );
        }
        leaves
    }

    /// Records the removal of `removed` (in any order) from `entries`
    /// (which no longer holds them): the nodes that emptied, and those
    /// above the new height, leave the tree and are returned for the
    /// caller to take off the shadow list and uncharge.
    pub(crate) fn remove<V>(
        &mut self,
        entries: &BTreeMap<u64, V>,
        removed: impl IntoIterator<Item = u64>,
    ) -> Vec<(NodeKey, XaNode)> {
        let height = height_for(entries.len(), entries.last_key_value().map(|(&m, _)| m));
        let mut candidates = BTreeSet::new();
        for index in removed {
            for level in 0..self.height {
                candidates.insert(node_key(index, level));
            }
        }
        for level in height..self.height {
            candidates.insert((level, 0));
        }
        self.height = height;
        let mut gone = Vec::new();
        for key in candidates {
            let kept = key.0 < height && entries.range(node_range(key)).next().is_some();
            if !kept && let Some(node) = self.nodes.remove(&key) {
                gone.push((key, node));
            }
        }
        gone
    }

    /// Every node, leaving none (the mapping emptied at once).
    pub(crate) fn take_all(&mut self) -> Vec<(NodeKey, XaNode)> {
        self.height = 0;
        std::mem::take(&mut self.nodes).into_iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::memcontrol::CgroupTree;

    /// The nodes of `set` by the definition in the module docs.
    fn expected(set: &BTreeMap<u64, ()>) -> BTreeSet<NodeKey> {
        let height = height_for(set.len(), set.last_key_value().map(|(&m, _)| m));
        set.keys()
            .flat_map(|&i| (0..height).map(move |level| node_key(i, level)))
            .collect()
    }

    fn keys(nodes: &XaNodes) -> BTreeSet<NodeKey> {
        nodes.nodes.keys().copied().collect()
    }

    /// Applies `ops` (insert when the index is absent, else remove),
    /// checking the nodes against the definition after each.
    fn replay(ops: &[u64]) {
        let tree = CgroupTree::default();
        let objcg = tree.root().obj_cgroup();
        let mut set = BTreeMap::new();
        let mut nodes = XaNodes::default();
        let mut live = 0usize;
        for &index in ops {
            if set.contains_key(&index) {
                set.remove(&index);
                live -= nodes.remove(&set, [index]).len();
            } else {
                let needed = nodes.needed(&set, index);
                let mut charged = vec![Arc::clone(&objcg); needed.len()];
                set.insert(index, ());
                nodes.insert(&set, index, &mut charged);
                assert!(charged.is_empty(), "every charge used");
                live += needed.len();
            }
            assert_eq!(keys(&nodes), expected(&set), "after {index}: {set:?}");
            assert_eq!(live, nodes.len(), "charges follow the nodes");
        }
    }

    #[test]
    fn a_lone_entry_at_zero_needs_no_node() {
        replay(&[0]);
        let mut set = BTreeMap::new();
        let nodes = XaNodes::default();
        assert!(nodes.needed(&set, 0).is_empty());
        set.insert(0, ());
        assert_eq!(nodes.needed(&set, 5), [(0, 0)]);
    }

    #[test]
    fn the_tree_grows_and_shrinks_with_its_largest_index() {
        // 0 in the head; 5 makes leaf 0; 70 a second leaf and a root;
        // 4101 a third level; removing it shrinks back to one leaf, and
        // removing 5 puts 0 back in the head.
        replay(&[0, 5, 70, 4101, 4101, 70, 5, 0]);
        let tree = CgroupTree::default();
        let objcg = tree.root().obj_cgroup();
        let mut set = BTreeMap::new();
        let mut nodes = XaNodes::default();
        for index in [0, 5, 70, 4101] {
            let mut charged = vec![Arc::clone(&objcg); nodes.needed(&set, index).len()];
            set.insert(index, ());
            nodes.insert(&set, index, &mut charged);
        }
        // Leaves 0, 1, 64; level 1: 0, 1; level 2: 0.
        assert_eq!(nodes.len(), 6);
        set.remove(&4101);
        let gone: BTreeSet<NodeKey> = nodes
            .remove(&set, [4101])
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        // 70 keeps the tree two levels tall: leaves 0 and 1 under (1, 0).
        assert_eq!(gone, BTreeSet::from([(0, 64), (1, 1), (2, 0)]));
        assert_eq!(nodes.len(), 3);
    }

    proptest! {
        #[test]
        fn nodes_match_the_index_set(ops in proptest::collection::vec(
            prop_oneof![0u64..8, 0u64..200, 0u64..300_000, Just(u64::MAX)], 1..60)) {
            replay(&ops);
        }
    }
}
