//! Model-based test of page_counter against a sequential reference on a
//! small tree (root -> a -> b -> c, and a -> d): random charges, try
//! charges, uncharges and limit/protection changes; every level's usage,
//! limit, failcnt, peak and children's protected usage must match.
#![cfg(not(loom))]

use std::sync::Arc;

use memcg::page_counter::{PAGE_COUNTER_MAX, PageCounter};
use proptest::prelude::*;

/// Parent index of each level (root has none).
const PARENTS: [Option<usize>; 5] = [None, Some(0), Some(1), Some(2), Some(1)];

#[derive(Debug, Clone)]
enum Op {
    Charge(usize, u64),
    TryCharge(usize, u64),
    Uncharge(usize, u64),
    SetMax(usize, u64),
    SetMin(usize, u64),
    SetLow(usize, u64),
}

fn op() -> impl Strategy<Value = Op> {
    let lvl = 0usize..5;
    let n = 0u64..40;
    prop_oneof![
        2 => (lvl.clone(), n.clone()).prop_map(|(l, n)| Op::Charge(l, n)),
        5 => (lvl.clone(), n.clone()).prop_map(|(l, n)| Op::TryCharge(l, n)),
        4 => (lvl.clone(), n.clone()).prop_map(|(l, n)| Op::Uncharge(l, n)),
        2 => (lvl.clone(), prop_oneof![0u64..120, Just(PAGE_COUNTER_MAX)]).prop_map(|(l, n)| Op::SetMax(l, n)),
        1 => (lvl.clone(), 0u64..60).prop_map(|(l, n)| Op::SetMin(l, n)),
        1 => (lvl, 0u64..60).prop_map(|(l, n)| Op::SetLow(l, n)),
    ]
}

#[derive(Default, Clone)]
struct Level {
    own: u64,
    max: u64,
    min: u64,
    low: u64,
    failcnt: u64,
    peak: u64,
}

struct Model {
    levels: Vec<Level>,
}

impl Model {
    fn ancestors(l: usize) -> Vec<usize> {
        std::iter::successors(Some(l), |&x| PARENTS[x]).collect()
    }

    fn usage(&self, l: usize) -> u64 {
        (0..5)
            .filter(|&x| Self::ancestors(x).contains(&l))
            .map(|x| self.levels[x].own)
            .sum()
    }

    fn bump_peaks(&mut self, l: usize) {
        for a in Self::ancestors(l) {
            let u = self.usage(a);
            let p = &mut self.levels[a].peak;
            *p = (*p).max(u);
        }
    }

    fn children_protected(&self, l: usize, pick: fn(&Level) -> u64) -> u64 {
        (0..5)
            .filter(|&c| PARENTS[c] == Some(l))
            .map(|c| self.usage(c).min(pick(&self.levels[c])))
            .sum()
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn page_counter_matches_the_reference(ops in prop::collection::vec(op(), 1..80)) {
        let mut counters: Vec<Arc<PageCounter>> = Vec::new();
        for p in PARENTS {
            counters.push(Arc::new(PageCounter::new(p.map(|i| Arc::clone(&counters[i])), true)));
        }
        let mut m = Model { levels: vec![Level { max: PAGE_COUNTER_MAX, ..Default::default() }; 5] };
        for (step, op) in ops.iter().enumerate() {
            match *op {
                Op::Charge(l, n) => {
                    counters[l].charge(n);
                    m.levels[l].own += n;
                    m.bump_peaks(l);
                }
                Op::TryCharge(l, n) => {
                    let refusing = Model::ancestors(l).into_iter().find(|&a| m.usage(a) + n > m.levels[a].max);
                    let got = counters[l].try_charge(n).map_err(|c| counters.iter().position(|x| std::ptr::eq(&**x, c)).unwrap());
                    prop_assert_eq!(got, refusing.map_or(Ok(()), Err), "step {}", step);
                    match refusing {
                        Some(a) => {
                            // As in the kernel, levels below the refusing
                            // one were charged (and their peaks raised)
                            // before it refused.
                            for b in Model::ancestors(l).into_iter().take_while(|&b| b != a) {
                                let u = m.usage(b) + n;
                                m.levels[b].peak = m.levels[b].peak.max(u);
                            }
                            m.levels[a].failcnt += 1;
                        }
                        None => { m.levels[l].own += n; m.bump_peaks(l); }
                    }
                }
                Op::Uncharge(l, n) => {
                    let n = n.min(m.levels[l].own);
                    counters[l].uncharge(n);
                    m.levels[l].own -= n;
                }
                Op::SetMax(l, n) => {
                    let ok = counters[l].set_max(n).is_ok();
                    prop_assert_eq!(ok, m.usage(l) <= n, "step {}", step);
                    if ok { m.levels[l].max = n; }
                }
                Op::SetMin(l, n) => { counters[l].set_min(n); m.levels[l].min = n; }
                Op::SetLow(l, n) => { counters[l].set_low(n); m.levels[l].low = n; }
            }
            for (l, c) in counters.iter().enumerate() {
                prop_assert_eq!(c.usage(), m.usage(l), "step {} level {} usage", step, l);
                prop_assert_eq!(c.max(), m.levels[l].max);
                prop_assert_eq!(c.failcnt(), m.levels[l].failcnt, "step {} level {} failcnt", step, l);
                prop_assert_eq!(c.watermark(), m.levels[l].peak, "step {} level {} peak", step, l);
                prop_assert_eq!(c.children_min_usage(), m.children_protected(l, |x| x.min), "step {} level {} min", step, l);
                prop_assert_eq!(c.children_low_usage(), m.children_protected(l, |x| x.low), "step {} level {} low", step, l);
            }
        }
    }
}
