//! Criterion micro-benchmarks of the swap_cgroup designs on one thread:
//! the cost of one record + lookup + clear of a 4 KiB and a 64 KiB folio,
//! and of one lookup. `memcg bench swap-cgroup` is the multi-threaded,
//! tabulated comparison; this is the statistically careful single-thread
//! view (`cargo bench -p memcg --bench swap_cgroup`).

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use memcg::mm_types::SWAPFILE_CLUSTER;
use memcg::swap_cgroup::{Design, SwapCgroupMap};

const SLOTS: u64 = 256 * SWAPFILE_CLUSTER as u64;

/// Slots at the end of every cluster kept recorded (a device in use), so
/// lazily allocating designs are measured in steady state, as in
/// `memcg bench swap-cgroup`.
const BACKGROUND: u64 = 16;

/// Offsets spread over the device by a fixed odd stride (no RNG needed for
/// a fixed, cache-unfriendly sequence), avoiding the background folios.
fn offsets(align: u64) -> Vec<u64> {
    let cluster = SWAPFILE_CLUSTER as u64;
    (0..8192u64)
        .map(|i| (i * 7919 * align) % SLOTS)
        .filter(|o| o % cluster < cluster - BACKGROUND)
        .collect()
}

fn device_in_use(design: Design) -> SwapCgroupMap {
    let map = SwapCgroupMap::new(design, SLOTS).unwrap();
    let cluster = SWAPFILE_CLUSTER as u64;
    for c in 0..SLOTS / cluster {
        map.record((c + 1) * cluster - BACKGROUND, 1, BACKGROUND as u32)
            .unwrap();
    }
    map
}

fn folio_cycle(c: &mut Criterion) {
    let mut group = c.benchmark_group("swap_cgroup/record+lookup+clear");
    for nr in [1u32, 16] {
        let offsets = offsets(u64::from(nr));
        for design in Design::ALL {
            let map = device_in_use(design);
            let mut at = 0;
            group.bench_with_input(
                BenchmarkId::new(design.name(), format!("nr={nr}")),
                &nr,
                |b, &nr| {
                    b.iter(|| {
                        let offset = offsets[at];
                        at = (at + 1) % offsets.len();
                        let old = map.record(offset, 7, nr).unwrap();
                        let seen = map.lookup(offset).unwrap();
                        let cleared = map.clear(offset, nr).unwrap();
                        black_box((old, seen, cleared))
                    })
                },
            );
        }
    }
    group.finish();
}

fn lookup(c: &mut Criterion) {
    let mut group = c.benchmark_group("swap_cgroup/lookup");
    let offsets = offsets(1);
    for design in Design::ALL {
        let map = SwapCgroupMap::new(design, SLOTS).unwrap();
        for offset in (0..SLOTS).step_by(16) {
            map.record(offset, 3, 16).unwrap();
        }
        let mut at = 0;
        group.bench_function(design.name(), |b| {
            b.iter(|| {
                let offset = offsets[at];
                at = (at + 1) % offsets.len();
                black_box(map.lookup(offset).unwrap())
            })
        });
    }
    group.finish();
}

criterion_group!(benches, folio_cycle, lookup);
criterion_main!(benches);
