//! inotify on the machine's events files, as a kernel's cgroupfs raises it
//! (`cgroup_file_notify`): a program watching `memory.events`,
//! `memory.events.local`, `memory.swap.events` or `cgroup.events` with
//! `IN_MODIFY` (the selftests' `cg_wait_for`, oomd) is woken when the
//! simulator changes it. A FUSE server cannot raise an inotify event
//! itself; a change it makes through the mount can: every
//! [`NOTIFY_CHECK_EVERY`] a thread compares each cgroup's events files
//! with what it saw, and truncates a changed one through the bind at
//! `/sys/fs/cgroup` (the server accepts and ignores the truncate, as
//! cgroupfs does `>`; the kernel's `notify_change` raises `IN_MODIFY`).
//! Within that period of the change, not at once as the kernel's.

use std::collections::HashMap;
use std::ffi::CString;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use memcg_sim::Sim;

/// How often the events files are compared.
const NOTIFY_CHECK_EVERY: Duration = Duration::from_millis(20);

/// The files a kernel notifies on change.
const EVENTS_FILES: [&str; 4] = [
    "cgroup.events",
    "memory.events",
    "memory.events.local",
    "memory.swap.events",
];

/// The thread; stopped and joined on drop.
pub(super) struct EventsNotifier {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl EventsNotifier {
    /// Starts watching `sim`'s events files, raising inotify events
    /// through the cgroupfs bound at `mount` (`/sys/fs/cgroup`).
    pub(super) fn start(sim: Arc<Sim>, mount: &'static str) -> std::io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = Arc::clone(&stop);
            std::thread::Builder::new()
                .name("memcg-notify".into())
                .spawn(move || watch(&sim, mount, &stop))?
        };
        Ok(Self {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for EventsNotifier {
    fn drop(&mut self) {
        // Relaxed: a flag the thread looks at each round.
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn watch(sim: &Sim, mount: &str, stop: &AtomicBool) {
    // By cgroup serial and file: a cgroup removed and made again under
    // the same name is another cgroup, whose files never changed.
    let mut seen: HashMap<(u64, &str), String> = HashMap::new();
    while !stop.load(Ordering::Relaxed) {
        let root = Arc::clone(sim.fs().tree().root_cgroup());
        let mut now = HashMap::with_capacity(seen.len());
        // The root has no events files (cgroupfs shows none there).
        for cg in root.descendants_pre().skip(1) {
            for file in EVENTS_FILES {
                let path = format!("{}/{file}", cg.path());
                let Ok(text) = sim.fs().read(&path) else {
                    continue;
                };
                let key = (cg.serial(), file);
                if seen.get(&key).is_some_and(|old| *old != text) {
                    raise_modify(&format!("{mount}{path}"));
                }
                now.insert(key, text);
            }
        }
        seen = now;
        std::thread::sleep(NOTIFY_CHECK_EVERY);
    }
}

/// `IN_MODIFY` for the file at `path`: a truncate through the mount.
fn raise_modify(path: &str) {
    let Ok(path) = CString::new(path) else {
        return;
    };
    // SAFETY: a NUL-terminated path; truncate takes it by pointer only
    // for the call. A cgroup removed meanwhile is no error.
    unsafe { libc::truncate(path.as_ptr(), 0) };
}
