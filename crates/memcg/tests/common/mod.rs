//! Helpers shared by the integration tests.

/// The seed for a randomised stress test: `MEMCG_STRESS_SEED` if set, else
/// derived from the clock. Printed so a failing run can be replayed (the
/// test harness shows captured output of failing tests).
pub fn stress_seed(test: &str) -> u64 {
    let seed = std::env::var("MEMCG_STRESS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0)
        });
    eprintln!("{test}: seed {seed} (replay with MEMCG_STRESS_SEED={seed})");
    seed
}
