//! The machine's hardware and identity facts (what cAdvisor's `MachineInfo` gives the upstream
//! kubelet).

use std::path::PathBuf;

use thiserror::Error;

use crate::domain::node::machine::MachineInfo;
use crate::domain::resource_managers::topology::MachineTopology;

/// Why the machine facts could not be gathered.
#[derive(Debug, Error)]
pub enum MachineInfoError {
    /// A required file could not be read.
    #[error("failed to read {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A file was read but its content was not what the kernel writes.
    #[error("failed to parse {}: {detail}", path.display())]
    Parse { path: PathBuf, detail: String },
    /// The filesystem holding the root directory could not be measured.
    #[error("failed to statvfs {}", path.display())]
    Statfs {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Gathers [`MachineInfo`].
pub trait MachineInfoProvider: Send + Sync {
    /// Reads the machine facts afresh.
    ///
    /// # Errors
    /// [`MachineInfoError::Read`] or [`MachineInfoError::Parse`] when a required kernel file
    /// (online CPUs, memory, pid_max, boot id) is missing or malformed;
    /// [`MachineInfoError::Statfs`] when the root directory's filesystem cannot be measured.
    /// A missing machine-id or DMI product UUID is not an error: the field is left empty.
    fn machine_info(&self) -> Result<MachineInfo, MachineInfoError>;

    /// The online CPUs by NUMA node, socket and core (what cAdvisor's `MachineInfo.Topology`
    /// gives upstream's CPU manager).
    ///
    /// # Errors
    /// [`MachineInfoError::Read`] or [`MachineInfoError::Parse`] when a CPU's topology
    /// file or a NUMA node's CPU list is missing or malformed.
    fn cpu_topology(&self) -> Result<MachineTopology, MachineInfoError>;
}
