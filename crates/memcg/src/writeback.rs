//! The writeback state below the memory controller (the kernel's
//! include/linux/writeback.h, v6.14): the `vm.dirty_*` sysctls
//! ([`DirtySettings`]) and the registry of flushers the tree keeps
//! (`TreeWriteback`), so that the tree holds them without naming
//! `page_writeback.rs`, which computes the dirty limits, throttles writers
//! and wakes the flushers on top of the memory controller.
//!
//! Invariants: the settings hold what the sysctl handlers accepted (each
//! ratio/bytes pair has at most one of the two non-zero); a flusher stays
//! registered until its filesystem drops it (a dead `Weak` is pruned on
//! the next registration).
//!
//! Locking: one mutex for the settings and one for the flusher list,
//! leaves both; neither is held while a flusher runs.

use std::time::Duration;

use crate::mm_types::PAGE_SIZE;
use crate::sync::Mutex;

/// `vm.dirty_ratio` at boot.
pub(crate) const DEFAULT_DIRTY_RATIO: i32 = 20;
/// `vm.dirty_background_ratio` at boot.
pub(crate) const DEFAULT_DIRTY_BACKGROUND_RATIO: i32 = 10;
/// `vm.dirty_writeback_centisecs` at boot: the flusher wakes every 5 s.
pub(crate) const DEFAULT_DIRTY_WRITEBACK_CENTISECS: i32 = 500;
/// `vm.dirty_expire_centisecs` at boot: data dirty for 30 s is old.
pub(crate) const DEFAULT_DIRTY_EXPIRE_CENTISECS: i32 = 3000;
/// The smallest `vm.dirty_bytes` (`dirty_bytes_min`: two pages).
pub(crate) const DIRTY_BYTES_MIN: u64 = 2 * PAGE_SIZE;

/// The `vm.dirty_*` sysctls (`CgroupTree::dirty_settings`, `page_writeback.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DirtySettings {
    /// `vm.dirty_background_ratio`: background writeback starts above this
    /// percent of a domain's dirtyable memory (0 while
    /// `dirty_background_bytes` is in effect).
    pub dirty_background_ratio: i32,
    /// `vm.dirty_background_bytes` (0: the ratio is in effect).
    pub dirty_background_bytes: u64,
    /// `vm.dirty_ratio`: writers are throttled at this percent of a
    /// domain's dirtyable memory (0 while `dirty_bytes` is in effect).
    pub dirty_ratio: i32,
    /// `vm.dirty_bytes` (0: the ratio is in effect).
    pub dirty_bytes: u64,
    /// `vm.dirty_writeback_centisecs`: the flusher's period (0: no
    /// periodic writeback). Kept as written: a negative value, which
    /// `proc_dointvec` accepts, is a very long period.
    pub dirty_writeback_centisecs: i32,
    /// `vm.dirty_expire_centisecs`: the age at which the periodic
    /// writeback takes dirty data.
    pub dirty_expire_centisecs: i32,
}

impl Default for DirtySettings {
    fn default() -> Self {
        Self {
            dirty_background_ratio: DEFAULT_DIRTY_BACKGROUND_RATIO,
            dirty_background_bytes: 0,
            dirty_ratio: DEFAULT_DIRTY_RATIO,
            dirty_bytes: 0,
            dirty_writeback_centisecs: DEFAULT_DIRTY_WRITEBACK_CENTISECS,
            dirty_expire_centisecs: DEFAULT_DIRTY_EXPIRE_CENTISECS,
        }
    }
}

impl DirtySettings {
    /// The flusher's period (`dirty_writeback_interval`); `None` when
    /// periodic writeback is off.
    pub(crate) fn writeback_interval(&self) -> Option<Duration> {
        // The kernel keeps it in an unsigned int: a negative value wraps.
        let centisecs = self.dirty_writeback_centisecs as u32;
        (centisecs > 0).then(|| Duration::from_millis(u64::from(centisecs) * 10))
    }

    /// How long data stays dirty before the periodic writeback takes it
    /// (`dirty_expire_interval`).
    pub(crate) fn expire_interval(&self) -> Duration {
        Duration::from_millis(u64::from(self.dirty_expire_centisecs.max(0) as u32) * 10)
    }
}

/// A flusher reclaim and the simulated clock reach through the tree: one
/// filesystem's writeback (`filemap::writeback::Bdi`).
pub(crate) trait Flusher: Send + Sync {
    /// `__wakeup_flusher_threads_bdi`: every writeback of it that has
    /// dirty pages writes back all it has (`WB_start_all`).
    fn wakeup_all(&self);
    /// Runs the periodic work that came due by `now`.
    fn run_due(&self, now: Duration);
}

/// A tree's writeback state: the sysctls and the registered flushers.
#[derive(Default)]
pub(crate) struct TreeWriteback {
    pub(crate) settings: Mutex<DirtySettings>,
    pub(crate) flushers: Mutex<Vec<std::sync::Weak<dyn Flusher>>>,
}
