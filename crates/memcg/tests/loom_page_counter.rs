//! Loom models of page_counter: charging racing a limit change, and two
//! charges racing at the limit. Each model asserts it saw every outcome.
#![cfg(loom)]

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;

use common::explore;
use loom::thread;
use memcg::page_counter::PageCounter;

/// `set_max(8)` races `try_charge(4)` on a counter at 5 pages: usage never
/// ends above a limit that `set_max` reported as set.
#[test]
fn try_charge_racing_set_max_never_ends_above_max() {
    let outcomes = explore(|| {
        let root = Arc::new(PageCounter::new(None, false));
        let c = Arc::new(PageCounter::new(Some(Arc::clone(&root)), false));
        c.charge(5);
        let setter = {
            let c = Arc::clone(&c);
            thread::spawn(move || c.set_max(8).is_ok())
        };
        let charged = c.try_charge(4).is_ok();
        let set = setter.join().unwrap();
        assert!(
            c.usage() <= c.max(),
            "usage {} above max {}",
            c.usage(),
            c.max()
        );
        assert_eq!(root.usage(), c.usage(), "levels agree");
        assert!(!(charged && set), "both a 9-page usage and an 8-page limit");
        (charged, set)
    });
    assert!(
        outcomes.contains(&(true, false)),
        "charge first: {outcomes:?}"
    );
    assert!(
        outcomes.contains(&(false, true)),
        "limit first: {outcomes:?}"
    );
}

/// Two 6-page charges race under a 10-page limit: exactly one wins.
#[test]
fn two_charges_racing_at_the_limit() {
    let outcomes = explore(|| {
        let c = Arc::new(PageCounter::new(None, false));
        c.set_max(10).unwrap();
        let other = {
            let c = Arc::clone(&c);
            thread::spawn(move || c.try_charge(6).is_ok())
        };
        let mine = c.try_charge(6).is_ok();
        let theirs = other.join().unwrap();
        assert!(mine ^ theirs, "exactly one charge fits");
        assert_eq!(c.usage(), 6);
        assert_eq!(c.failcnt(), 1);
        mine
    });
    assert_eq!(
        outcomes,
        BTreeSet::from([false, true]),
        "either thread can win"
    );
}
