//! Model-based test: random sequences of swapon / swapoff / record / clear /
//! lookup against a `HashMap` reference, for every design. Results (ids and
//! errors) must match step by step, and every slot must match at the end.
#![cfg(not(loom))]

use std::collections::HashMap;
use std::collections::hash_map::Entry;

use memcg::mm_types::SWAPFILE_CLUSTER;
use memcg::swap_cgroup::{Design, SwapCgroup, SwapCgroupError};
use memcg::{MAX_SWAPFILES, SwapEntry};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Swapon {
        ty: u32,
        pages: u64,
    },
    Swapoff {
        ty: u32,
    },
    Record {
        ty: u32,
        offset: u64,
        nr: u32,
        id: u16,
    },
    Clear {
        ty: u32,
        offset: u64,
        nr: u32,
    },
    Lookup {
        ty: u32,
        offset: u64,
    },
}

const MAX_PAGES: u64 = 3 * SWAPFILE_CLUSTER as u64 + 5;

fn ty() -> impl Strategy<Value = u32> {
    prop_oneof![8 => 0u32..3, 1 => MAX_SWAPFILES..MAX_SWAPFILES + 3]
}

fn offset() -> impl Strategy<Value = u64> {
    prop_oneof![
        6 => 0..MAX_PAGES + 4,
        // Cluster edges, where the lazy designs split ranges.
        2 => (1u64..4).prop_map(|c| c * SWAPFILE_CLUSTER as u64 - 2),
    ]
}

fn nr() -> impl Strategy<Value = u32> {
    prop_oneof![4 => Just(1u32), 2 => Just(16), 2 => 0u32..40]
}

fn id() -> impl Strategy<Value = u16> {
    prop_oneof![1 => Just(0u16), 6 => 1u16..5, 2 => any::<u16>()]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        1 => (ty(), 0..MAX_PAGES + 1).prop_map(|(ty, pages)| Op::Swapon { ty, pages }),
        1 => ty().prop_map(|ty| Op::Swapoff { ty }),
        6 => (ty(), offset(), nr(), id()).prop_map(|(ty, offset, nr, id)| Op::Record { ty, offset, nr, id }),
        4 => (ty(), offset(), nr()).prop_map(|(ty, offset, nr)| Op::Clear { ty, offset, nr }),
        4 => (ty(), offset()).prop_map(|(ty, offset)| Op::Lookup { ty, offset }),
    ]
}

/// The reference: per switched-on type, its size and the non-zero ids.
#[derive(Default)]
struct Model {
    devices: HashMap<u32, (u64, HashMap<u64, u16>)>,
}

type Outcome = Result<u16, SwapCgroupError>;

impl Model {
    fn device(&self, ty: u32) -> Result<&(u64, HashMap<u64, u16>), SwapCgroupError> {
        if ty >= MAX_SWAPFILES {
            return Err(SwapCgroupError::InvalidType { ty });
        }
        self.devices
            .get(&ty)
            .ok_or(SwapCgroupError::DeviceOff { ty })
    }

    fn range(
        &self,
        ty: u32,
        offset: u64,
        nr: u32,
    ) -> Result<std::ops::Range<u64>, SwapCgroupError> {
        let &(max_pages, _) = self.device(ty)?;
        if nr == 0 {
            return Err(SwapCgroupError::EmptyRange);
        }
        match offset.checked_add(u64::from(nr)) {
            Some(end) if end <= max_pages => Ok(offset..end),
            _ => Err(SwapCgroupError::OutOfRange {
                offset,
                nr,
                max_pages,
            }),
        }
    }

    fn get(&self, ty: u32, offset: u64) -> u16 {
        self.devices[&ty].1.get(&offset).copied().unwrap_or(0)
    }

    fn set(&mut self, ty: u32, offset: u64, id: u16) {
        let ids = &mut self.devices.get_mut(&ty).unwrap().1;
        if id == 0 {
            ids.remove(&offset);
        } else {
            ids.insert(offset, id);
        }
    }

    /// The expected outcome, or `None` when the op breaks the caller
    /// contract (a debug assertion in the real map) and must be skipped.
    fn apply(&mut self, op: &Op) -> Option<Outcome> {
        Some(match *op {
            Op::Swapon { ty, pages } => {
                if ty >= MAX_SWAPFILES {
                    Err(SwapCgroupError::InvalidType { ty })
                } else {
                    match self.devices.entry(ty) {
                        Entry::Occupied(_) => Err(SwapCgroupError::AlreadyOn { ty }),
                        Entry::Vacant(_) if pages == 0 => {
                            Err(SwapCgroupError::InvalidSize { max_pages: 0 })
                        }
                        Entry::Vacant(slot) => {
                            slot.insert((pages, HashMap::new()));
                            Ok(0)
                        }
                    }
                }
            }
            Op::Swapoff { ty } => self.device(ty).map(|_| 0).inspect(|_| {
                self.devices.remove(&ty);
            }),
            Op::Record { ty, offset, nr, id } => match self.range(ty, offset, nr) {
                Err(e) => Err(e),
                Ok(range) => {
                    let old = self.get(ty, offset);
                    if range.clone().any(|o| self.get(ty, o) != old) {
                        return None;
                    }
                    range.for_each(|o| self.set(ty, o, id));
                    Ok(old)
                }
            },
            Op::Clear { ty, offset, nr } => match self.range(ty, offset, nr) {
                Err(e) => Err(e),
                Ok(range) => {
                    let ids: Vec<u16> = range.clone().map(|o| self.get(ty, o)).collect();
                    let first = ids.iter().position(|&i| i != 0);
                    let id = first.map_or(0, |i| ids[i]);
                    if first.is_some_and(|i| ids[i..].iter().any(|&x| x != id)) {
                        return None;
                    }
                    range.for_each(|o| self.set(ty, o, 0));
                    Ok(id)
                }
            },
            Op::Lookup { ty, offset } => self.range(ty, offset, 1).map(|_| self.get(ty, offset)),
        })
    }
}

fn entry(ty: u32, offset: u64) -> SwapEntry {
    SwapEntry::new(ty, offset).expect("strategies stay inside the entry layout")
}

fn run(sc: &SwapCgroup, op: &Op) -> Outcome {
    match *op {
        Op::Swapon { ty, pages } => sc.swapon(ty, pages).map(|()| 0),
        Op::Swapoff { ty } => sc.swapoff(ty).map(|()| 0),
        Op::Record { ty, offset, nr, id } => sc.record(entry(ty, offset), id, nr),
        Op::Clear { ty, offset, nr } => sc.clear(entry(ty, offset), nr),
        Op::Lookup { ty, offset } => sc.lookup(entry(ty, offset)),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn every_design_matches_the_reference(ops in prop::collection::vec(op(), 1..150)) {
        for design in Design::ALL {
            let sc = SwapCgroup::new(design);
            let mut model = Model::default();
            for (step, op) in ops.iter().enumerate() {
                let Some(expected) = model.apply(op) else { continue };
                let actual = run(&sc, op);
                prop_assert_eq!(&actual, &expected, "{} step {}: {:?}", design, step, op);
            }
            for (&ty, &(pages, _)) in &model.devices {
                let map = sc.device(ty).unwrap();
                prop_assert_eq!(map.max_pages(), pages);
                for offset in 0..pages {
                    prop_assert_eq!(map.lookup(offset).unwrap(), model.get(ty, offset),
                        "{} final state type {} slot {}", design, ty, offset);
                }
            }
        }
    }
}
