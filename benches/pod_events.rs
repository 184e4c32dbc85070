//! Pod events bench: the events a crash-looping container makes over ten minutes (its
//! Pulled, Created and Started at each restart, BackOff at each sync in back-off, the
//! back-off doubling from 10 s to 5 min, a sync every 10 s while it waits), through the
//! recorder's correlator on a fake clock: writes to the API per minute, side by side with
//! what upstream's correlator (client-go `EventCorrelator`: a burst of 25 per object, then
//! one per 5 minutes) allows. Goal: no more writes than upstream's allowance.

use rkubelet::domain::events::simulate::{crash_loop, upstream_allowance};
use rkubelet::domain::pod::{Container, Pod};

mod common;

use common::at_most;

const MINUTES: u64 = 10;

fn main() {
    let mut pod = Pod::default();
    pod.metadata.name = "crash-n1".into();
    pod.metadata.namespace = "default".into();
    pod.metadata.uid = "bench".into();
    pod.spec.containers.push(Container {
        name: "main".into(),
        image: "docker.io/library/busybox:1.36".into(),
        ..Container::default()
    });
    let minutes = crash_loop(&pod, MINUTES);
    println!("pod_events: a crash-looping container, {MINUTES} minutes on a fake clock");
    println!("  minute  recorded  created  patched  dropped  writes  upstream allows (cumulative)");
    let mut cumulative = 0u64;
    for (i, m) in minutes.iter().enumerate() {
        cumulative += u64::from(m.writes());
        let minute = i as u64 + 1;
        println!(
            "  {minute:>6}  {:>8}  {:>7}  {:>7}  {:>7}  {:>6}  {:>3} ({cumulative} written so far)",
            m.recorded,
            m.created,
            m.patched,
            m.skipped,
            m.writes(),
            upstream_allowance(minute)
        );
    }
    let recorded: u64 = minutes.iter().map(|m| u64::from(m.recorded)).sum();
    let allowance = upstream_allowance(MINUTES);
    let per_minute_after_burst: f64 = minutes[5..]
        .iter()
        .map(|m| f64::from(m.writes()))
        .sum::<f64>()
        / (MINUTES - 5) as f64;
    println!(
        "FIGURE event writes in {MINUTES} minutes of a crash loop: {cumulative} ({recorded} recorded); upstream's correlator allows {allowance}; {}",
        at_most(cumulative as f64, allowance as f64, " writes")
    );
    println!(
        "FIGURE event writes per minute after the first 5 minutes: {per_minute_after_burst:.1}; upstream allows 0.2; {}",
        at_most(per_minute_after_burst, 0.2, "/min")
    );
}
