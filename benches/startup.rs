//! Start-up benchmark: time from process start to `/healthz` answering `ok`, and the
//! resident memory after 10 s idle, on the simulated runtime. Goals: under 30 ms and
//! under 15 MiB. `RKUBELET_BENCH_RUNS` sets the number of starts (default 20);
//! `RKUBELET_BENCH_STARTUP_IDLE_SECS` the idle wait (default 10).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::{below, env_number, fail, free_port, rss_kib, rss_parts, unmeasured};

fn healthz_ok(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    if stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    response.starts_with("HTTP/1.1 200") && response.ends_with("ok")
}

fn spawn(port: u16, root: &std::path::Path) -> std::io::Result<Child> {
    Command::new(common::rkubelet_bin())
        .args([
            "--container-runtime-endpoint=fake://",
            &format!("--healthz-port={port}"),
            &format!("--root-dir={}", root.display()),
            &format!("--port={}", free_port()),
            &format!("--cert-dir={}", root.join("pki").display()),
        ])
        .env_remove("NOTIFY_SOCKET")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
}

fn time_to_healthz(root: &std::path::Path) -> Option<(Duration, Child)> {
    let port = free_port();
    let start = Instant::now();
    let child = spawn(port, root).ok()?;
    while start.elapsed() < Duration::from_secs(10) {
        if healthz_ok(port) {
            return Some((start.elapsed(), child));
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    None
}

fn main() {
    let runs = env_number("RKUBELET_BENCH_RUNS", 20);
    let idle = env_number("RKUBELET_BENCH_STARTUP_IDLE_SECS", 10);
    let Ok(dir) = tempfile::tempdir() else {
        fail("startup", "no temp dir");
    };
    let mut times = Vec::new();
    for _ in 0..runs {
        match time_to_healthz(dir.path()) {
            Some((elapsed, mut child)) => {
                times.push(elapsed);
                let _ = child.kill();
                let _ = child.wait();
            }
            None => fail("startup", "/healthz never answered"),
        }
    }
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let median = times[times.len() / 2];
    let p90 = times[(times.len() * 9 / 10).min(times.len() - 1)];
    println!(
        "startup: process start to /healthz ok: median {:.2} ms, p90 {:.2} ms, min {:.2} ms over {runs} runs ({})",
        ms(median),
        ms(p90),
        ms(times[0]),
        below(ms(median), 30.0, " ms")
    );
    let Some((_, mut child)) = time_to_healthz(dir.path()) else {
        fail("startup", "/healthz never answered");
    };
    std::thread::sleep(Duration::from_secs(idle));
    let rss = rss_kib(child.id());
    let parts = rss_parts(child.id());
    let _ = child.kill();
    let _ = child.wait();
    match rss {
        Some(kib) => {
            let mib = kib as f64 / 1024.0;
            println!(
                "startup: resident memory after {idle} s idle: {mib:.2} MiB ({}); {parts}",
                below(mib, 15.0, " MiB")
            )
        }
        None => println!(
            "startup: resident memory after {idle} s idle: unavailable ({})",
            unmeasured(15.0, " MiB")
        ),
    }
}
