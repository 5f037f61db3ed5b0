//! Kernel profiles: which kernel's behaviour the machinery follows where
//! kernels differ in what a user can see.
//!
//! The project's semantics are Linux v6.14's; a [`KernelVersion`] names one
//! of the kernels the project is measured against (Debian's 6.12 and 7.3,
//! booted by `memcg testbed`) or v6.14 itself, and
//! [`KernelVersion::behaviour`] gives the [`Behaviour`] switches the
//! interface files and the mechanisms below them read: how sizes parse,
//! what `memory.reclaim` accepts, which keys `memory.stat` and
//! `memory.events` print, whether zswap keeps incompressible pages.
//! The designs a kernel uses for its data structures (the swap_cgroup
//! map, list_lru, what rmdir does with LRU folios) are chosen higher up,
//! where those types are known: `MachineConfig::for_kernel` in
//! [`crate::machine`] bundles them with these switches.
//!
//! `docs/kernel-profiles.md` tables every switch with the function in each
//! kernel's source that decides it.
//!
//! ```
//! use memcg::profile::KernelVersion;
//!
//! let v: KernelVersion = "7.3".parse().unwrap();
//! assert!(v.behaviour().memparse_saturates);
//! assert!(!KernelVersion::default().behaviour().memparse_saturates);
//! assert_eq!(KernelVersion::default(), KernelVersion::V6_14);
//! ```

/// A kernel whose memory-cgroup behaviour the machinery can follow.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum KernelVersion {
    /// Linux 6.12 (Debian trixie's 6.12.117).
    V6_12,
    /// Linux v6.14, the project's reference and the seeds' kernel.
    #[default]
    V6_14,
    /// Linux 7.3 (Debian trixie-backports' 7.3.4).
    V7_3,
}

crate::named_enum!(KernelVersion {
    V6_12 => "6.12",
    V6_14 => "6.14",
    V7_3 => "7.3",
}, unknown: UnknownKernel = UnknownKernel);

/// A kernel version that is not one of [`KernelVersion::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown kernel {0:?} (expected 6.12, 6.14 or 7.3)")]
pub struct UnknownKernel(pub String);

/// Which kernel's list of `memory.stat` keys, and which reclaim counters
/// back them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum StatLayout {
    /// 6.12: no `pswpin`/`pswpout`; `pgscan_*`, `pgsteal_*` and
    /// `pgrefill` are vm events.
    V6_12,
    /// v6.14: `pswpin` and `pswpout` lead the vm events.
    #[default]
    V6_14,
    /// 7.3: `zswap_incomp` after `zswapped`; the reclaim counters
    /// (`pgdemote_*`, `pgsteal_*`, `pgscan_*`, each with a `_proactive`
    /// member, and `pgrefill`) are page states printed before
    /// `pgpromote_success`; `memory.reclaim` counts as proactive rather
    /// than direct reclaim.
    V7_3,
}

/// The switches a kernel version sets (see the module docs); each field
/// names the kernel behaviour it follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Behaviour {
    /// The version these switches came from (what a report names).
    pub version: KernelVersion,
    /// `memparse` saturates a size whose digits or suffix shift overflow
    /// at `u64::MAX` (`16E` and `18446744073709551616` read back `max`
    /// from `memory.max`: 7.3's `_parse_integer_limit`) and takes a
    /// suffix only after digits (`K` alone is refused), as 7.3's
    /// lib/cmdline.c does; before, the shift wraps (`16E` is 0) and a bare
    /// suffix is 0.
    pub memparse_saturates: bool,
    /// `memory.reclaim` accepts `swappiness=max` (reclaim anonymous memory
    /// only), as 7.3's `user_proactive_reclaim` does.
    pub reclaim_swappiness_max: bool,
    /// The `memory.stat` key list.
    pub stat_layout: StatLayout,
    /// `memory.events` ends with `sock_throttled` (7.3).
    pub sock_throttled_event: bool,
    /// zswap stores a page that does not compress below a page as is
    /// (counted in `zswap_incomp`) while the cgroup may write back,
    /// instead of refusing it (7.3's `zswap_compress`).
    pub zswap_store_incompressible: bool,
}

impl KernelVersion {
    /// The switches this kernel sets.
    pub const fn behaviour(self) -> Behaviour {
        let new = matches!(self, KernelVersion::V7_3);
        Behaviour {
            version: self,
            memparse_saturates: new,
            reclaim_swappiness_max: new,
            stat_layout: match self {
                KernelVersion::V6_12 => StatLayout::V6_12,
                KernelVersion::V6_14 => StatLayout::V6_14,
                KernelVersion::V7_3 => StatLayout::V7_3,
            },
            sock_throttled_event: new,
            zswap_store_incompressible: new,
        }
    }
}

impl Default for Behaviour {
    /// v6.14's.
    fn default() -> Self {
        KernelVersion::default().behaviour()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_print() {
        for v in KernelVersion::ALL {
            assert_eq!(v.name().parse(), Ok(v));
            assert_eq!(v.behaviour().version, v);
        }
        assert_eq!(
            "6.13".parse::<KernelVersion>(),
            Err(UnknownKernel("6.13".into()))
        );
    }

    #[test]
    fn only_7_3_has_the_new_interface() {
        for v in [KernelVersion::V6_12, KernelVersion::V6_14] {
            let b = v.behaviour();
            assert!(!b.memparse_saturates && !b.reclaim_swappiness_max);
            assert!(!b.sock_throttled_event && !b.zswap_store_incompressible);
        }
        let b = KernelVersion::V7_3.behaviour();
        assert!(b.memparse_saturates && b.reclaim_swappiness_max);
        assert_eq!(b.stat_layout, StatLayout::V7_3);
    }
}
