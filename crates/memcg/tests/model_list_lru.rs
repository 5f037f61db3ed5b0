//! Model-based test of list_lru and the cgroup lifecycle: random mkdir,
//! rmdir, add, del, walk_one and walk_node (every callback status) against a
//! reference of one `Vec` per (cgroup, node), for both designs. After every
//! step every live list, count, node total and shrinker bit must match.
#![cfg(not(loom))]

mod common;

use std::collections::{HashMap, HashSet};

use memcg::list_lru::{ItemId, ListLru, ListLruConfig, LruDesign, Walked};
use memcg::memcontrol::{CgroupTree, MemCgroup};
use proptest::prelude::*;
use std::sync::Arc;

const NODES: usize = 2;
const ITEMS: u32 = 24;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Removed,
    RemovedRetry,
    Rotate,
    Skip,
    Retry,
    Stop,
}

#[derive(Debug, Clone)]
enum Op {
    Mkdir {
        parent: usize,
    },
    Rmdir {
        cg: usize,
    },
    Add {
        item: ItemId,
        nid: usize,
        cg: usize,
    },
    Del {
        item: ItemId,
    },
    WalkOne {
        nid: usize,
        cg: usize,
        budget: usize,
        pattern: Vec<Status>,
    },
    WalkNode {
        nid: usize,
        budget: usize,
        pattern: Vec<Status>,
    },
}

fn status() -> impl Strategy<Value = Status> + Clone {
    prop_oneof![
        3 => Just(Status::Removed),
        1 => Just(Status::RemovedRetry),
        2 => Just(Status::Rotate),
        3 => Just(Status::Skip),
        1 => Just(Status::Retry),
        1 => Just(Status::Stop),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let pattern = || prop::collection::vec(status(), 1..6);
    prop_oneof![
        3 => (0usize..64).prop_map(|parent| Op::Mkdir { parent }),
        2 => (0usize..64).prop_map(|cg| Op::Rmdir { cg }),
        8 => (0..ITEMS, 0..NODES, 0usize..64).prop_map(|(item, nid, cg)| Op::Add { item, nid, cg }),
        4 => (0..ITEMS).prop_map(|item| Op::Del { item }),
        2 => (0..NODES, 0usize..64, 0usize..12, pattern())
            .prop_map(|(nid, cg, budget, pattern)| Op::WalkOne { nid, cg, budget, pattern }),
        1 => (0..NODES, 0usize..20, pattern()).prop_map(|(nid, budget, pattern)| Op::WalkNode { nid, budget, pattern }),
    ]
}

/// One cgroup in the reference.
struct RefCg {
    real: Arc<MemCgroup>,
    parent: Option<usize>,
    alive: bool,
    children: usize,
}

/// The reference model.
struct Model {
    cgs: Vec<RefCg>,
    /// Lists of live cgroups (and the root), oldest first.
    lists: HashMap<(usize, usize), Vec<ItemId>>,
    /// Item -> (cgroup it was added with, node).
    homes: HashMap<ItemId, (usize, usize)>,
    bits: HashSet<(usize, usize)>,
    totals: [usize; NODES],
}

impl Model {
    fn new(tree: &CgroupTree) -> Self {
        let mut lists = HashMap::new();
        for nid in 0..NODES {
            lists.insert((0, nid), Vec::new());
        }
        Self {
            cgs: vec![RefCg {
                real: Arc::clone(tree.root()),
                parent: None,
                alive: true,
                children: 0,
            }],
            lists,
            homes: HashMap::new(),
            bits: HashSet::new(),
            totals: [0; NODES],
        }
    }

    /// The nearest live ancestor-or-self (whose list receives the item).
    fn resolve(&self, mut cg: usize) -> usize {
        while !self.cgs[cg].alive {
            cg = self.cgs[cg].parent.expect("root is alive");
        }
        cg
    }

    fn live(&self) -> Vec<usize> {
        (0..self.cgs.len()).filter(|&i| self.cgs[i].alive).collect()
    }

    /// Replays the walker on one list; returns (isolated, restart-needed?)
    /// handling per the kernel's `__list_lru_walk_one`.
    fn walk_one(
        &mut self,
        nid: usize,
        cg: usize,
        budget: &mut usize,
        pattern: &[Status],
        calls: &mut usize,
    ) -> usize {
        let mut isolated = 0;
        'restart: loop {
            let mut cur = self.lists[&(cg, nid)].first().copied();
            while let Some(item) = cur {
                if *budget == 0 {
                    return isolated;
                }
                *budget -= 1;
                let list = self.lists.get_mut(&(cg, nid)).unwrap();
                let pos = list.iter().position(|&i| i == item).unwrap();
                let next = list.get(pos + 1).copied();
                let status = pattern[*calls % pattern.len()];
                *calls += 1;
                match status {
                    Status::Removed | Status::RemovedRetry => {
                        list.remove(pos);
                        self.homes.remove(&item);
                        self.totals[nid] -= 1;
                        isolated += 1;
                        if status == Status::RemovedRetry {
                            continue 'restart;
                        }
                    }
                    Status::Rotate => {
                        let it = list.remove(pos);
                        list.push(it);
                    }
                    Status::Skip => {}
                    Status::Retry => continue 'restart,
                    Status::Stop => return isolated,
                }
                cur = next;
            }
            return isolated;
        }
    }
}

/// A walk callback answering from `pattern`, cycling.
fn callback<'p>(
    pattern: &'p [Status],
    calls: &'p mut usize,
) -> impl for<'g> FnMut(ItemId, memcg::list_lru::ItemGuard<'g>) -> Walked<'g> + 'p {
    move |_, guard| {
        let status = pattern[*calls % pattern.len()];
        *calls += 1;
        match status {
            Status::Removed => {
                let (list, token) = guard.isolate();
                Walked::Removed(list, token)
            }
            Status::RemovedRetry => {
                let (list, token) = guard.isolate();
                drop(list);
                Walked::RemovedRetry(token)
            }
            Status::Rotate => Walked::Rotate(guard),
            Status::Skip => Walked::Skip(guard),
            Status::Retry => {
                drop(guard);
                Walked::Retry
            }
            Status::Stop => {
                drop(guard);
                Walked::Stop
            }
        }
    }
}

fn check(
    tree: &CgroupTree,
    lru: &ListLru,
    model: &Model,
    design: LruDesign,
    step: usize,
) -> Result<(), TestCaseError> {
    let shrinker = lru.shrinker_id().unwrap();
    for cg in model.live() {
        let real = &model.cgs[cg].real;
        for nid in 0..NODES {
            let want = &model.lists[&(cg, nid)];
            prop_assert_eq!(
                &lru.items(nid, real).unwrap(),
                want,
                "{} step {}: list of {} node {}",
                design,
                step,
                real.path(),
                nid
            );
            prop_assert_eq!(lru.count_one(nid, real).unwrap(), want.len());
            if cg != 0 {
                prop_assert_eq!(
                    real.shrinker_bit(nid, shrinker),
                    model.bits.contains(&(cg, nid)),
                    "{} step {}: bit of {} node {}",
                    design,
                    step,
                    real.path(),
                    nid
                );
            }
        }
    }
    for nid in 0..NODES {
        prop_assert_eq!(
            lru.count_node(nid).unwrap(),
            model.totals[nid],
            "{} step {}: node {} total",
            design,
            step,
            nid
        );
    }
    prop_assert_eq!(tree.ids_in_use(), model.live().len());
    Ok(())
}

fn run(design: LruDesign, ops: &[Op]) -> Result<(), TestCaseError> {
    let tree = common::small_tree(NODES, 64);
    let lru = ListLru::new(
        &tree,
        ListLruConfig {
            memcg_aware: true,
            max_items: ITEMS,
            design,
        },
    )
    .unwrap();
    let mut m = Model::new(&tree);
    for (step, op) in ops.iter().enumerate() {
        match op {
            Op::Mkdir { parent } => {
                let live = m.live();
                let p = live[parent % live.len()];
                let name = format!("c{}", m.cgs.len());
                let real = tree
                    .mkdir_in(m.cgs[p].real.cgroup(), &name)
                    .unwrap()
                    .memcg()
                    .unwrap();
                m.cgs[p].children += 1;
                m.cgs.push(RefCg {
                    real,
                    parent: Some(p),
                    alive: true,
                    children: 0,
                });
                let idx = m.cgs.len() - 1;
                for nid in 0..NODES {
                    m.lists.insert((idx, nid), Vec::new());
                }
            }
            Op::Rmdir { cg } => {
                let live = m.live();
                let c = live[cg % live.len()];
                let result = tree.rmdir_cgroup(&m.cgs[c].real);
                if c == 0 || m.cgs[c].children > 0 {
                    prop_assert!(result.is_err(), "{} step {}: rmdir must fail", design, step);
                    continue;
                }
                result.unwrap();
                let p = m.cgs[c].parent.unwrap();
                m.cgs[c].alive = false;
                m.cgs[p].children -= 1;
                for nid in 0..NODES {
                    let mut moved = m.lists.remove(&(c, nid)).unwrap();
                    if !moved.is_empty() && p != 0 {
                        m.bits.insert((p, nid));
                    }
                    let parent_list = m.lists.get_mut(&(p, nid)).unwrap();
                    moved.append(parent_list);
                    *parent_list = moved;
                }
            }
            Op::Add { item, nid, cg } => {
                let c = cg % m.cgs.len();
                let added = lru.add(*item, *nid, &m.cgs[c].real).unwrap();
                let expect = !m.homes.contains_key(item);
                prop_assert_eq!(added, expect, "{} step {}: add {}", design, step, item);
                if expect {
                    let owner = m.resolve(c);
                    let list = m.lists.get_mut(&(owner, *nid)).unwrap();
                    if list.is_empty() && owner != 0 {
                        m.bits.insert((owner, *nid));
                    }
                    list.push(*item);
                    m.homes.insert(*item, (c, *nid));
                    m.totals[*nid] += 1;
                }
            }
            Op::Del { item } => match m.homes.get(item).copied() {
                Some((c, nid)) => {
                    prop_assert!(
                        lru.del(*item, nid, &m.cgs[c].real).unwrap(),
                        "{} step {}: del {}",
                        design,
                        step,
                        item
                    );
                    let owner = m.resolve(c);
                    m.lists
                        .get_mut(&(owner, nid))
                        .unwrap()
                        .retain(|i| i != item);
                    m.homes.remove(item);
                    m.totals[nid] -= 1;
                }
                None => {
                    let root = Arc::clone(tree.root());
                    prop_assert!(!lru.del(*item, 0, &root).unwrap());
                }
            },
            Op::WalkOne {
                nid,
                cg,
                budget,
                pattern,
            } => {
                let live = m.live();
                let c = live[cg % live.len()];
                let (mut real_budget, mut model_budget) = (*budget, *budget);
                let (mut real_calls, mut model_calls) = (0, 0);
                let real = Arc::clone(&m.cgs[c].real);
                let got = lru
                    .walk_one(
                        *nid,
                        &real,
                        &mut real_budget,
                        callback(pattern, &mut real_calls),
                    )
                    .unwrap();
                let want = m.walk_one(*nid, c, &mut model_budget, pattern, &mut model_calls);
                prop_assert_eq!(
                    (got, real_budget, real_calls),
                    (want, model_budget, model_calls),
                    "{} step {}: walk_one",
                    design,
                    step
                );
            }
            Op::WalkNode {
                nid,
                budget,
                pattern,
            } => {
                let (mut real_budget, mut model_budget) = (*budget, *budget);
                let (mut real_calls, mut model_calls) = (0, 0);
                let got = lru
                    .walk_node(*nid, &mut real_budget, callback(pattern, &mut real_calls))
                    .unwrap();
                let mut order: Vec<usize> = m.live().into_iter().filter(|&c| c != 0).collect();
                order.sort_by_key(|&c| m.cgs[c].real.id());
                let mut want = m.walk_one(*nid, 0, &mut model_budget, pattern, &mut model_calls);
                for c in order {
                    if model_budget == 0 {
                        break;
                    }
                    want += m.walk_one(*nid, c, &mut model_budget, pattern, &mut model_calls);
                }
                prop_assert_eq!(
                    (got, real_budget, real_calls),
                    (want, model_budget, model_calls),
                    "{} step {}: walk_node",
                    design,
                    step
                );
            }
        }
        check(&tree, &lru, &m, design, step)?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(150))]

    #[test]
    fn both_designs_match_the_reference(ops in prop::collection::vec(op(), 1..120)) {
        for design in LruDesign::ALL {
            run(design, &ops)?;
        }
    }
}
