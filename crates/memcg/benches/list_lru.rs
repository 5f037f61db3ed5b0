//! Criterion micro-benchmarks of list_lru on one thread, both designs:
//! an add + del pair on a live cgroup, the same through a removed cgroup
//! (fallback to the parent), and a lockless `count_one`
//! (`cargo bench -p memcg --bench list_lru`).

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use memcg::list_lru::{ListLru, ListLruConfig, LruDesign};
use memcg::memcontrol::{CgroupTree, TreeConfig};

fn setup(design: LruDesign) -> (CgroupTree, ListLru) {
    let tree = CgroupTree::new(TreeConfig {
        nr_nodes: 1,
        max_ids: 4096,
        ..TreeConfig::default()
    });
    let lru = ListLru::new(
        &tree,
        ListLruConfig {
            memcg_aware: true,
            max_items: 1 << 16,
            design,
        },
    )
    .unwrap();
    for i in 0..1000 {
        tree.mkdir(&format!("/c{i}")).unwrap().memcg().unwrap();
    }
    (tree, lru)
}

fn add_del(c: &mut Criterion) {
    let mut group = c.benchmark_group("list_lru");
    for design in LruDesign::ALL {
        let (tree, lru) = setup(design);
        let live = tree.find("/c500").unwrap();
        group.bench_function(format!("{design}/add+del"), |b| {
            b.iter(|| {
                lru.add(7, 0, &live).unwrap();
                black_box(lru.del(7, 0, &live).unwrap())
            })
        });
        let dead = tree.mkdir("/c500/gone").unwrap().memcg().unwrap();
        tree.rmdir("/c500/gone").unwrap();
        group.bench_function(format!("{design}/add+del via removed cgroup"), |b| {
            b.iter(|| {
                lru.add(8, 0, &dead).unwrap();
                black_box(lru.del(8, 0, &dead).unwrap())
            })
        });
        group.bench_function(format!("{design}/count_one"), |b| {
            b.iter(|| black_box(lru.count_one(0, &live).unwrap()))
        });
    }
    group.finish();
}

criterion_group!(benches, add_del);
criterion_main!(benches);
