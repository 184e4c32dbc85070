//! Gives back the executable's pages start-up ran, then now and then what later work left
//! resident (see `domain::code_pages` for why).

use std::sync::Arc;

use tokio::sync::watch;
use tracing::{debug, warn};

use crate::domain::code_pages::next_release;
use crate::ports::error::Chain;
use crate::ports::host::Host;

/// Releases on `domain::code_pages`'s schedule until `shutdown` turns true. A refusal
/// stops the releases: nothing depends on them, and the next would fail alike.
pub async fn release_code_pages(host: Arc<dyn Host>, mut shutdown: watch::Receiver<bool>) {
    let started = tokio::time::Instant::now();
    let mut last = None;
    loop {
        let due = next_release(last);
        tokio::select! {
            () = tokio::time::sleep_until(started + due) => {}
            _ = shutdown.wait_for(|stop| *stop) => return,
        }
        // A read of the process's own smaps and a few madvise calls: about a millisecond.
        match host.release_code_pages() {
            Ok(kib) => debug!(
                resident_kib = kib,
                "released the executable's resident pages"
            ),
            Err(e) => {
                warn!(error = %Chain(&e), "failed to release the executable's resident pages; not trying again");
                return;
            }
        }
        last = Some(due);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::adapters::fake::FakeHost;
    use crate::domain::code_pages::{FIRST_RELEASE_AFTER, RELEASE_PERIOD};

    async fn settle() {
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn pages_are_released_after_start_up_then_each_period_until_shutdown() {
        let host = Arc::new(FakeHost::new());
        let (stop, shutdown) = watch::channel(false);
        let task = tokio::spawn(release_code_pages(host.clone(), shutdown));
        settle().await;
        tokio::time::advance(FIRST_RELEASE_AFTER - Duration::from_secs(1)).await;
        settle().await;
        assert_eq!(host.code_page_releases(), 0, "not during start-up");
        tokio::time::advance(Duration::from_secs(1)).await;
        settle().await;
        assert_eq!(host.code_page_releases(), 1);
        // The next at twice the first's time, and so on.
        tokio::time::advance(FIRST_RELEASE_AFTER).await;
        settle().await;
        assert_eq!(host.code_page_releases(), 2);
        tokio::time::advance(RELEASE_PERIOD * 2).await;
        settle().await;
        assert!(host.code_page_releases() > 3);
        let _ = stop.send(true);
        settle().await;
        assert!(task.is_finished());
    }
}
