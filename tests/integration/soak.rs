//! The soak (issue 17): pods created and deleted in waves on a simulated node
//! (`--container-runtime-endpoint=fake://`), rkubelet's resident memory, file descriptors
//! and threads read after each wave, and what the node keeps (pod folders, `/pods`)
//! counted. The short form is the test here; the bench `soak` runs it long.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::faults::children;
use crate::common::node::{container, pod, NODE};
use crate::common::{http_get, start_daemon};

/// What a soak measured.
#[allow(dead_code)] // the bench `soak` prints them all
pub(crate) struct SoakFigures {
    pub waves: usize,
    pub pods_churned: usize,
    /// Resident KiB after each wave (every pod gone).
    pub rss_kib: Vec<u64>,
    /// Growth of the resident memory after the warm-up waves, KiB per pod churned
    /// (least squares).
    pub slope_kib_per_pod: f64,
    pub fds: (usize, usize),
    pub threads: (u64, u64),
    /// Pod folders left after the last wave.
    pub pod_dirs_left: usize,
    /// The slowest wave (every pod running, then every pod gone).
    pub slowest_wave: Duration,
}

/// `(running, listed)` pods in rkubelet's `/pods`.
fn pods_listed(port: u16) -> Option<(usize, usize)> {
    let (code, body) = http_get(port, "/pods")?;
    if code != 200 {
        return None;
    }
    let list: serde_json::Value = serde_json::from_str(&body).ok()?;
    let items = list["items"].as_array()?;
    let running = items
        .iter()
        .filter(|p| p["status"]["phase"] == "Running")
        .count();
    Some((running, items.len()))
}

fn wait_for(what: &str, within: Duration, mut probe: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !probe() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Least-squares slope of `ys` against `xs`.
fn slope(xs: &[f64], ys: &[f64]) -> f64 {
    let n = xs.len() as f64;
    if xs.len() < 2 {
        return 0.0;
    }
    let (mx, my) = (xs.iter().sum::<f64>() / n, ys.iter().sum::<f64>() / n);
    let num: f64 = xs.iter().zip(ys).map(|(x, y)| (x - mx) * (y - my)).sum();
    let den: f64 = xs.iter().map(|x| (x - mx).powi(2)).sum();
    if den == 0.0 {
        0.0
    } else {
        num / den
    }
}

/// Churns `pods` static pods in waves (all written, all running, all removed, all gone)
/// until `waves` waves or `length` have passed, whichever comes first; the first two
/// waves are the warm-up.
pub(crate) fn soak_simulated(pods: usize, waves: usize, length: Duration) -> SoakFigures {
    let dirs = tempfile::tempdir().expect("temp dir");
    let manifests = dirs.path().join("manifests");
    let root = dirs.path().join("root");
    std::fs::create_dir_all(&manifests).expect("manifest dir");
    let args = vec![
        "--container-runtime-endpoint=fake://".to_string(),
        format!("--pod-manifest-path={}", manifests.display()),
        format!("--root-dir={}", root.display()),
        format!("--hostname-override={NODE}"),
        "--file-check-frequency=1s".to_string(),
        // Node admission counts pods against allocatable as upstream's: room for a wave.
        format!("--max-pods={}", pods + 50),
    ];
    let mut daemon = start_daemon(&args, false);
    let proc = daemon.proc();
    let port = daemon.port;
    let started = Instant::now();
    let mut rss = Vec::new();
    let mut slowest = Duration::ZERO;
    let (mut first_fds, mut first_threads) = (0, 0);
    let write = |dir: &Path, i: usize, wave: usize| {
        let name = format!("w{wave}-p{i:03}");
        let text = pod(
            &name,
            "",
            &[],
            &[container("main", "busybox", "exec sleep 3600")],
        );
        let tmp = dir.join(format!(".{name}.yaml.tmp"));
        std::fs::write(&tmp, text).expect("manifest written");
        std::fs::rename(&tmp, dir.join(format!("{name}.yaml"))).expect("manifest renamed");
    };
    let mut wave = 0;
    while wave < waves && started.elapsed() < length {
        let began = Instant::now();
        for i in 0..pods {
            write(&manifests, i, wave);
        }
        wait_for(
            &format!("wave {wave}: {pods} pods running"),
            Duration::from_secs(120),
            || pods_listed(port).is_some_and(|(running, _)| running == pods),
        );
        for name in children(&manifests) {
            let _ = std::fs::remove_file(manifests.join(name));
        }
        wait_for(
            &format!("wave {wave}: every pod gone"),
            Duration::from_secs(120),
            || {
                pods_listed(port).is_some_and(|(_, listed)| listed == 0)
                    && children(&root.join("pods")).is_empty()
            },
        );
        slowest = slowest.max(began.elapsed());
        rss.push(proc.rss_kib().unwrap_or(0));
        if wave == 1 {
            first_fds = proc.fd_count().unwrap_or(0);
            first_threads = proc.threads().unwrap_or(0);
        }
        wave += 1;
    }
    let fds = (first_fds, proc.fd_count().unwrap_or(0));
    // The runtime's blocking threads linger 10 s after their last task: a thread count
    // that does not settle back within 15 s is a leak.
    let settle = Instant::now() + Duration::from_secs(15);
    let mut last_threads = proc.threads().unwrap_or(0);
    while last_threads > first_threads && Instant::now() < settle {
        std::thread::sleep(Duration::from_millis(250));
        last_threads = proc.threads().unwrap_or(0);
    }
    let threads = (first_threads, last_threads);
    let pod_dirs_left = children(&root.join("pods")).len();
    // After the warm-up (two waves): KiB against pods churned.
    let after: Vec<(f64, f64)> = rss
        .iter()
        .enumerate()
        .skip(2)
        .map(|(w, kib)| (((w + 1) * pods) as f64, *kib as f64))
        .collect();
    let (xs, ys): (Vec<f64>, Vec<f64>) = after.into_iter().unzip();
    let figures = SoakFigures {
        waves: wave,
        pods_churned: wave * pods,
        slope_kib_per_pod: slope(&xs, &ys),
        rss_kib: rss,
        fds,
        threads,
        pod_dirs_left,
        slowest_wave: slowest,
    };
    let status = daemon.terminate_within(Duration::from_secs(15));
    assert!(
        status.is_some_and(|s| s.success()),
        "rkubelet did not exit cleanly: {status:?}; log:\n{}",
        daemon.log_text()
    );
    assert!(
        !daemon.log_text().contains("panicked"),
        "{}",
        daemon.log_text()
    );
    figures
}

/// The short soak: 250 pods in 6 waves (1,500 churned) on a simulated node; nothing
/// left, no file descriptor or thread gained, and memory under 1 KiB per pod churned
/// after the warm-up (the bench's goal; the short form is noisier, so it is checked at
/// 4 KiB here).
#[test]
fn a_short_soak_of_250_pods_in_waves_leaks_nothing() {
    let waves = std::env::var("RKUBELET_SOAK_WAVES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(6);
    let f = soak_simulated(250, waves, Duration::from_secs(3600));
    println!(
        "FIGURE soak: {} waves of 250 pods ({} churned), slowest wave {:.1} s; resident KiB after each wave {:?}; slope after the warm-up {:.2} KiB a pod; fds {:?}; threads {:?}",
        f.waves,
        f.pods_churned,
        f.slowest_wave.as_secs_f64(),
        f.rss_kib,
        f.slope_kib_per_pod,
        f.fds,
        f.threads
    );
    println!("COUNT soak pod folders left: {}", f.pod_dirs_left);
    assert_eq!(f.waves, waves);
    assert_eq!(f.pod_dirs_left, 0);
    assert!(f.fds.1 <= f.fds.0 + 2, "file descriptors grew: {:?}", f.fds);
    // The blocking pool sizes itself to the load (11 to 30 threads seen); a leak would grow
    // with every wave.
    assert!(
        f.threads.1 <= f.threads.0 + 10,
        "threads grew: {:?}",
        f.threads
    );
    assert!(
        f.slope_kib_per_pod < 4.0,
        "memory grew {:.2} KiB a pod: {:?}",
        f.slope_kib_per_pod,
        f.rss_kib
    );
}
