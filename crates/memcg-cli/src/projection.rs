//! Projecting the kernel build past this machine's cores: a stated
//! queueing model of the swap_cgroup lock.
//!
//! # The model
//!
//! Each of `J` jobs alternates between work of its own (mean `Z` seconds
//! of CPU, no shared resource) and one swap_cgroup operation. A design
//! with one lock per device (`locked`) serialises every operation on that
//! lock for `S` seconds (the critical section: the stores of a folio's
//! slots under the lock); the lock-free designs (`packed`, `atomic-u16`,
//! `memcg`) and `cluster` (a lock per 512-slot cluster, which `J` jobs
//! allocating from their own per-CPU clusters rarely share) serialise
//! nothing, so `S = 0` for them. That is the closed single-server queue
//! (the "machine repairman"): `J` customers, think time `Z`, service `S`,
//! solved exactly by mean value analysis:
//!
//! `R(n) = S · (1 + Q(n−1))`, `X(n) = n / (Z + R(n))`, `Q(n) = X(n) · R(n)`.
//!
//! `R(J) − S` is the time an operation waits for the lock. The kernel's
//! lock is a spinlock with interrupts off, so the wait is CPU time: the
//! projected CPU per operation is `Z + R(J)`, against `Z + S` uncontended.
//!
//! # Assumptions, stated
//!
//! - Exponential think and service times (MVA's), operations independent.
//! - `Z` and `S` do not change with `J` (no cache-line bouncing of the
//!   lock word or of the map itself is modelled: the lock-free designs'
//!   own contention is taken as zero).
//! - One swap device (one lock), as the seeds' brd.
//! - `S` is measured single-threaded and uncontended (the lock taken and
//!   released, the slots stored); `Z` is the build's CPU time per job
//!   divided by its swap_cgroup operations, measured at this machine's job
//!   counts.

use serde::Serialize;

/// Mean value analysis of the closed single-server queue with `jobs`
/// customers: the response time of one operation (wait + service).
pub fn response_secs(jobs: usize, service_secs: f64, think_secs: f64) -> f64 {
    let mut queue = 0.0;
    let mut response = service_secs;
    for n in 1..=jobs {
        response = service_secs * (1.0 + queue);
        let throughput = n as f64 / (think_secs + response);
        queue = throughput * response;
    }
    response
}

/// One projected point.
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    /// Jobs (CPUs).
    pub jobs: usize,
    /// The lock's utilisation.
    pub utilisation: f64,
    /// Mean wait for the lock per operation, µs.
    pub wait_us: f64,
    /// CPU time over the uncontended CPU time (1.0: no contention).
    pub cpu_ratio: f64,
}

/// The projection of one design at `jobs` job counts.
pub fn project(service_secs: f64, think_secs: f64, jobs: &[usize]) -> Vec<Point> {
    jobs.iter()
        .map(|&j| {
            let response = response_secs(j, service_secs, think_secs);
            let throughput = j as f64 / (think_secs + response);
            Point {
                jobs: j,
                utilisation: (throughput * service_secs).min(1.0),
                wait_us: (response - service_secs) * 1e6,
                cpu_ratio: (think_secs + response) / (think_secs + service_secs),
            }
        })
        .collect()
}

/// The service time at which `jobs` jobs with think time `think_secs`
/// would spend `cpu_ratio` times their uncontended CPU (bisection; the
/// ratio grows with the service time).
pub fn service_for_cpu_ratio(jobs: usize, think_secs: f64, cpu_ratio: f64) -> f64 {
    let ratio = |s: f64| project(s, think_secs, &[jobs])[0].cpu_ratio;
    let (mut lo, mut hi) = (0.0, think_secs.max(1e-9));
    while ratio(hi) < cpu_ratio {
        hi *= 2.0;
    }
    for _ in 0..100 {
        let mid = (lo + hi) / 2.0;
        if ratio(mid) < cpu_ratio {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    hi
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mva_matches_the_textbook_limits() {
        // No service: no wait.
        assert_eq!(response_secs(96, 0.0, 1.0), 0.0);
        // One customer never waits.
        assert!((response_secs(1, 0.1, 1.0) - 0.1).abs() < 1e-12);
        // Saturated: throughput 1/S, so R = J·S − Z for J ≫ 1 + Z/S.
        let (s, z) = (0.01, 0.09);
        let r = response_secs(1000, s, z);
        assert!((r - (1000.0 * s - z)).abs() < 1e-6, "{r}");
        // Light load: the wait grows with the utilisation.
        let p = project(1e-6, 1e-3, &[1, 2, 96]);
        assert_eq!(p[0].wait_us, 0.0);
        assert!(p[1].wait_us > 0.0 && p[2].wait_us > p[1].wait_us);
        assert!(p[2].cpu_ratio > 1.0 && p[2].utilisation < 1.0);
        // The inverse finds the service time back.
        let s = service_for_cpu_ratio(96, 1e-5, 1.12);
        let back = project(s, 1e-5, &[96])[0].cpu_ratio;
        assert!((back - 1.12).abs() < 1e-6, "{back}");
    }
}
