//! `/healthz` as upstream's `healthz` package answers it: the root lists every check
//! (`ok` alone unless `?verbose`; a failure answers 500 with each check's line and the
//! reasons withheld), and each check has its own path, `/healthz/<name>`. The kubelet
//! API's checks are `ping`, `log` and `syncloop` (upstream's `InstallDefaultHandlers`),
//! `syncloop` failing when the sync loop has not come round for a while.

use std::time::Duration;

/// A named check's result: `Err` carries why (logged, never served by the root).
pub type CheckResult = (&'static str, Result<(), String>);

/// The checks every `/healthz` has, always passing: the server answers, and logging
/// (rkubelet's logs are not buffered, so nothing to flush).
pub const ALWAYS_OK: [&str; 2] = ["ping", "log"];

/// The kubelet API's check of the sync loop.
pub const SYNC_LOOP_CHECK: &str = "syncloop";

/// `syncloop` fails when the loop's last entry is older than twice the resync period,
/// and never sooner than this (upstream's `syncLoopHealthCheck`).
pub const SYNC_LOOP_MINIMUM_GRACE: Duration = Duration::from_secs(5 * 60);

/// An answer: the status code and the plain-text body.
pub type Answer = (u16, String);

/// The root `/healthz` over `results` (after [`ALWAYS_OK`]); `verbose` lists the checks
/// of a passing answer too.
pub fn root_answer(results: &[CheckResult], verbose: bool) -> Answer {
    let mut lines: String = ALWAYS_OK.iter().map(|n| format!("[+]{n} ok\n")).collect();
    let mut failed = false;
    for (name, result) in results {
        match result {
            Ok(()) => lines.push_str(&format!("[+]{name} ok\n")),
            Err(_) => {
                failed = true;
                lines.push_str(&format!("[-]{name} failed: reason withheld\n"));
            }
        }
    }
    if failed {
        (500, format!("{lines}healthz check failed\n"))
    } else if verbose {
        (200, format!("{lines}healthz check passed\n"))
    } else {
        (200, "ok".to_owned())
    }
}

/// `/healthz/<name>` for a check that gave `result` (Go's `http.Error` on a failure).
pub fn check_answer(result: &Result<(), String>) -> Answer {
    match result {
        Ok(()) => (200, "ok".to_owned()),
        Err(reason) => (500, format!("internal server error: {reason}\n")),
    }
}

/// The check named by the path after `/healthz/` among `results` (after [`ALWAYS_OK`]);
/// `None` for a name no check has.
pub fn named_check(name: &str, results: &[CheckResult]) -> Option<Answer> {
    if ALWAYS_OK.contains(&name) {
        return Some(check_answer(&Ok(())));
    }
    results
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, result)| check_answer(result))
}

/// Whether a query string asks for the verbose answer (`verbose` given, any value).
pub fn is_verbose(query: &str) -> bool {
    query
        .split('&')
        .any(|pair| pair.split('=').next() == Some("verbose"))
}

/// Upstream's `syncLoopHealthCheck`: the loop last came round at `last_entry_nanos`
/// (monotonic; `None` before its first round, which passes, as upstream's zero time).
pub fn sync_loop_health(
    last_entry_nanos: Option<u64>,
    now_nanos: u64,
    resync_period: Duration,
) -> Result<(), String> {
    let grace = (resync_period * 2).max(SYNC_LOOP_MINIMUM_GRACE);
    let grace_nanos = u64::try_from(grace.as_nanos()).unwrap_or(u64::MAX);
    match last_entry_nanos {
        Some(last) if now_nanos.saturating_sub(last) > grace_nanos => {
            Err("sync Loop took longer than expected".to_owned())
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn the_root_says_ok_lists_when_verbose_and_withholds_reasons() {
        let passing: Vec<CheckResult> = vec![(SYNC_LOOP_CHECK, Ok(()))];
        assert_eq!(root_answer(&passing, false), (200, "ok".to_owned()));
        assert_eq!(
            root_answer(&passing, true),
            (
                200,
                "[+]ping ok\n[+]log ok\n[+]syncloop ok\nhealthz check passed\n".to_owned()
            )
        );
        let failing: Vec<CheckResult> = vec![(SYNC_LOOP_CHECK, Err("secret".into()))];
        let failed = (
            500,
            "[+]ping ok\n[+]log ok\n[-]syncloop failed: reason withheld\nhealthz check failed\n"
                .to_owned(),
        );
        assert_eq!(root_answer(&failing, false), failed);
        assert_eq!(root_answer(&failing, true), failed);
    }

    #[test]
    fn each_check_has_its_path() {
        let results: Vec<CheckResult> = vec![(SYNC_LOOP_CHECK, Err("late".into()))];
        assert_eq!(named_check("ping", &results), Some((200, "ok".into())));
        assert_eq!(named_check("log", &results), Some((200, "ok".into())));
        assert_eq!(
            named_check("syncloop", &results),
            Some((500, "internal server error: late\n".into()))
        );
        assert_eq!(named_check("pleg", &results), None);
        assert!(is_verbose("verbose"));
        assert!(is_verbose("a=b&verbose=1"));
        assert!(!is_verbose("verbosely"));
    }

    #[test]
    fn the_sync_loop_fails_after_twice_the_resync_period_at_least_five_minutes() {
        let minute = Duration::from_secs(60);
        assert_eq!(sync_loop_health(None, 3600 * S, minute), Ok(()));
        assert_eq!(sync_loop_health(Some(0), 300 * S, minute), Ok(()));
        assert_eq!(
            sync_loop_health(Some(0), 301 * S, minute),
            Err("sync Loop took longer than expected".into())
        );
        // A resync period of 10 minutes allows 20.
        assert_eq!(sync_loop_health(Some(0), 1200 * S, 10 * minute), Ok(()));
        assert!(sync_loop_health(Some(0), 1201 * S, 10 * minute).is_err());
    }
}
