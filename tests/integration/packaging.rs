//! The systemd unit and the kubeadm drop-in: systemd accepts them as written, and they
//! start this binary with the kubeadm arguments.

use std::path::Path;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_rkubelet");
const INSTALLED: &str = "/usr/local/bin/rkubelet";

fn packaging(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("packaging")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Panics, saying how to get it, when `tool` does not run.
fn require(tool: &str, how: &str) {
    assert!(
        Command::new(tool).arg("--version").output().is_ok(),
        "peer missing: {tool} does not run; {how}"
    );
}

/// `systemd-analyze verify` on the unit with its drop-in directory, ExecStart pointing at
/// the binary just built (verify checks that the command exists). Any complaint fails,
/// including the warnings verify does not count as errors (unknown keys).
#[test]
#[ignore = "needs systemd-analyze: run by scripts/test.sh"]
fn systemd_accepts_the_unit_and_the_kubeadm_drop_in() {
    require(
        "systemd-analyze",
        "scripts/test-env/install-deps.sh installs systemd, which has it",
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let unit = packaging("rkubelet.service");
    let drop_in = packaging("10-rkubelet-kubeadm.conf");
    assert!(unit.contains(&format!("ExecStart={INSTALLED}")));
    assert!(drop_in.contains(&format!("ExecStart={INSTALLED} ")));
    std::fs::write(
        dir.path().join("rkubelet.service"),
        unit.replace(INSTALLED, BIN),
    )
    .expect("write unit");
    let drop_in_dir = dir.path().join("rkubelet.service.d");
    std::fs::create_dir(&drop_in_dir).expect("drop-in dir");
    std::fs::write(
        drop_in_dir.join("10-rkubelet-kubeadm.conf"),
        drop_in.replace(INSTALLED, BIN),
    )
    .expect("write drop-in");
    // The trailing ':' keeps systemd's own unit folders (network-online.target).
    let output = Command::new("systemd-analyze")
        .arg("verify")
        .arg("rkubelet.service")
        .env("SYSTEMD_UNIT_PATH", format!("{}:", dir.path().display()))
        .output()
        .expect("systemd-analyze runs");
    let complaints = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{complaints}");
    assert!(
        !complaints.contains("rkubelet"),
        "systemd-analyze complains:\n{complaints}"
    );
}

#[test]
fn the_unit_is_shaped_like_upstreams() {
    let unit = packaging("rkubelet.service");
    for line in [
        "Type=notify",
        "Restart=always",
        "RestartSec=10",
        "StartLimitIntervalSec=0",
        "Wants=network-online.target",
        "After=network-online.target",
        "WantedBy=multi-user.target",
    ] {
        assert!(
            unit.lines().any(|l| l == line),
            "rkubelet.service lacks {line}"
        );
    }
    let drop_in = packaging("10-rkubelet-kubeadm.conf");
    for line in [
        "EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env",
        "EnvironmentFile=-/etc/default/kubelet",
        "ExecStart=",
        "ExecStart=/usr/local/bin/rkubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS",
    ] {
        assert!(drop_in.lines().any(|l| l == line), "drop-in lacks {line}");
    }
}

/// The install step puts both binaries under PREFIX and the unit files under DESTDIR.
#[test]
fn make_install_places_the_binary_and_the_units() {
    require("make", "install make (Debian: apt-get install make)");
    let output = Command::new("make")
        .args(["-n", "install", "DESTDIR=/stage", "PREFIX=/opt/rk"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("make runs");
    let plan = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{plan}");
    for expected in [
        "cargo build --release",
        "/stage/opt/rk/bin/rkubelet\n",
        "/stage/opt/rk/bin/rkubelet-snapshot\n",
        "/stage/etc/systemd/system/rkubelet.service",
        "/stage/etc/systemd/system/rkubelet.service.d/10-rkubelet-kubeadm.conf",
        "s#/usr/local/bin/rkubelet#/opt/rk/bin/rkubelet#",
    ] {
        assert!(
            plan.contains(expected),
            "make install lacks {expected}:\n{plan}"
        );
    }
}
