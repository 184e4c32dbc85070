//! A host process a test runs beside its node (a CSI driver and its sidecars, a device
//! plugin), its output in a log file; stopped on drop as a pod's container is: SIGTERM,
//! then waited for.

use std::fs::File;
use std::path::Path;
use std::process::{Child, Command, Stdio};

pub struct Peer(Child);

impl Peer {
    /// `binary` with `args`, its log at `log` (made anew).
    pub fn start(binary: &Path, args: &[String], log: &Path) -> Peer {
        let out = File::create(log).expect("peer log");
        let mut command = Command::new(binary);
        command.args(args);
        Peer::spawn(&mut command, out, &binary.display().to_string())
    }

    /// `command` with its output and errors to `out`; `what` names it when it does not
    /// start.
    pub fn spawn(command: &mut Command, out: File, what: &str) -> Peer {
        let err = out.try_clone().expect("peer log");
        let child = command
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .spawn()
            .unwrap_or_else(|e| panic!("{what} does not start: {e}"));
        Peer(child)
    }

    /// SIGTERM, and the wait for its exit.
    pub fn stop(&mut self) {
        if let Ok(pid) = i32::try_from(self.0.id()) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
        let _ = self.0.wait();
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        self.stop();
    }
}
