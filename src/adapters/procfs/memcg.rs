//! Kernel notifications of a cgroup's memory usage crossing a threshold (cgroup v1): an
//! eventfd registered in the cgroup's `cgroup.event_control` with its
//! `memory.usage_in_bytes` and the threshold, as upstream's `linuxCgroupNotifier`. The
//! eventfd is nix's safe wrapper; a thread of its own blocks reading it and forwards each
//! crossing, and disarming writes to the eventfd to wake that thread so it ends. (tokio's
//! `AsyncFd` would avoid the thread, but its safe constructor is deprecated and the other
//! is `unsafe`, which the crate forbids.) Cgroup v2 has no such file; there upstream's
//! notifier is disabled too.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use nix::sys::eventfd::{EfdFlags, EventFd};
use tokio::sync::mpsc;

use super::node_stats::{cgroup_dir, CgroupLayout};
use crate::domain::cgroup::{CgroupDriver, CgroupName};
use crate::ports::node_stats::{MemoryThresholdNotifier, StatsError, ThresholdCrossings};

/// Arms eventfd notifications in the v1 memory hierarchy.
#[derive(Debug, Clone)]
pub struct MemcgThresholdNotifier {
    /// The v1 memory hierarchy's mount; `None` on cgroup v2 (or without the controller).
    memory: Option<PathBuf>,
    driver: CgroupDriver,
}

impl MemcgThresholdNotifier {
    pub fn new(layout: Option<&CgroupLayout>, driver: CgroupDriver) -> Self {
        MemcgThresholdNotifier {
            memory: layout.and_then(|l| l.v1_memory()).map(Path::to_path_buf),
            driver,
        }
    }
}

fn step(path: &Path, step: &'static str) -> impl FnOnce(io::Error) -> StatsError {
    let path = path.to_path_buf();
    move |source| StatsError::Notification { path, step, source }
}

/// One registered threshold: a message each time the usage crosses it.
struct Crossings {
    events: mpsc::UnboundedReceiver<Result<(), StatsError>>,
    eventfd: Arc<EventFd>,
    stop: Arc<AtomicBool>,
}

impl Drop for Crossings {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the reading thread, which sees `stop` and ends (closing the eventfd,
        // which unregisters it).
        let _ = self.eventfd.write(1);
    }
}

#[async_trait]
impl ThresholdCrossings for Crossings {
    async fn crossed(&mut self) -> Result<(), StatsError> {
        match self.events.recv().await {
            Some(result) => result,
            None => Err(StatsError::Unsupported(
                "the notification thread ended".into(),
            )),
        }
    }
}

/// Reads `eventfd` until stopped, forwarding each crossing.
fn forward(
    eventfd: Arc<EventFd>,
    stop: Arc<AtomicBool>,
    path: PathBuf,
    events: mpsc::UnboundedSender<Result<(), StatsError>>,
) {
    loop {
        let read = eventfd.read();
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let event = read
            .map(|_| ())
            .map_err(|e| step(&path, "read the eventfd")(e.into()));
        let failed = event.is_err();
        if events.send(event).is_err() || failed {
            return;
        }
    }
}

#[async_trait]
impl MemoryThresholdNotifier for MemcgThresholdNotifier {
    async fn arm(
        &self,
        cgroup: &CgroupName,
        usage_bytes: u64,
    ) -> Result<Box<dyn ThresholdCrossings>, StatsError> {
        let Some(memory) = &self.memory else {
            return Err(StatsError::Unsupported(
                "no cgroup v1 memory hierarchy (cgroup v2 has no cgroup.event_control)".into(),
            ));
        };
        let dir = cgroup_dir(memory, cgroup, self.driver);
        let usage_path = dir.join("memory.usage_in_bytes");
        let usage = File::open(&usage_path).map_err(step(&usage_path, "open"))?;
        let control_path = dir.join("cgroup.event_control");
        let mut control = OpenOptions::new()
            .write(true)
            .open(&control_path)
            .map_err(step(&control_path, "open"))?;
        let eventfd = EventFd::from_value_and_flags(0, EfdFlags::EFD_CLOEXEC)
            .map_err(|e| step(&dir, "create an eventfd")(e.into()))?;
        // "<event fd> <fd of memory.usage_in_bytes> <threshold>": the kernel keeps its own
        // reference, so both files may close once registered.
        let registration = format!(
            "{} {} {}",
            eventfd.as_raw_fd(),
            usage.as_raw_fd(),
            usage_bytes
        );
        control
            .write_all(registration.as_bytes())
            .map_err(step(&control_path, "register the threshold"))?;
        let eventfd = Arc::new(eventfd);
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, events) = mpsc::unbounded_channel();
        // The kernel fires on a crossing only: a usage already past the threshold when it
        // is set (it rose while the stats were read) is a crossing now. The file registered
        // is still open and unread, so it is read from its start.
        let mut now = String::new();
        let past = (&usage)
            .read_to_string(&mut now)
            .ok()
            .and_then(|_| now.trim().parse::<u64>().ok())
            .is_some_and(|now| now >= usage_bytes);
        if past {
            let _ = tx.send(Ok(()));
        }
        let (fd, flag) = (Arc::clone(&eventfd), Arc::clone(&stop));
        std::thread::Builder::new()
            .name("memcg-notify".into())
            .spawn(move || forward(fd, flag, usage_path, tx))
            .map_err(step(&dir, "start the notification thread"))?;
        Ok(Box::new(Crossings {
            events,
            eventfd,
            stop,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn cgroup_v2_has_no_notifications() {
        let layout = CgroupLayout::V2 {
            root: PathBuf::from("/sys/fs/cgroup"),
        };
        let notifier = MemcgThresholdNotifier::new(Some(&layout), CgroupDriver::Cgroupfs);
        let result = notifier.arm(&CgroupName::root(), 1 << 30).await;
        assert!(matches!(result, Err(StatsError::Unsupported(_))));
    }

    #[tokio::test]
    async fn a_missing_cgroup_is_an_error_naming_the_file() {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let layout = CgroupLayout::V1 {
            memory: Some(tmp.path().to_path_buf()),
            pids: None,
            cpuacct: None,
            cpu: None,
            blkio: None,
        };
        let notifier = MemcgThresholdNotifier::new(Some(&layout), CgroupDriver::Cgroupfs);
        let err = notifier
            .arm(&CgroupName::root(), 1)
            .await
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            err,
            Some(format!(
                "memory threshold notification on {}: open",
                tmp.path().join("memory.usage_in_bytes").display()
            ))
        );
    }
}
