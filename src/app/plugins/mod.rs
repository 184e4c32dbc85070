//! The plugin watcher (upstream's plugin manager) for CSI drivers (issue 33): every
//! second it lists `<root-dir>/plugins_registry/`; a new socket is asked `GetInfo`, the
//! driver it names is validated (the domain), asked `NodeGetInfo`, and installed on the
//! Node (the `csi.volume.kubernetes.io/nodeid` annotation, its topology labels) and in
//! the node's `CSINode`; the plugin is then told the outcome. A socket that goes away
//! uninstalls its driver. A failed registration is tried again, less often each time.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::watch;
use tracing::{info, warn};

use crate::app::node::ConnectedNode;
use crate::domain::csi::{
    install_driver, node_id_annotation, uninstall_driver, validate_registration, CsiNodeDriver,
    Driver, DriverNodeInfo, NODE_ID_ANNOTATION, PLUGINS_REGISTRY_DIR,
};
use crate::ports::api::{ApiClients, CsiNodeObject};
use crate::ports::csi::CsiPlugins;
use crate::ports::error::Chain;

/// How often the registration folder is listed (upstream's reconciler period).
pub const POLL: Duration = Duration::from_secs(1);
/// A failed registration waits this many polls, doubling, up to `MAX_WAIT_POLLS`.
const MAX_WAIT_POLLS: u32 = 64;
/// Tries of the CSINode's read-modify-write against concurrent writers.
const CSINODE_TRIES: usize = 5;

/// The registered CSI drivers, by name, for the volumes that use them.
#[derive(Debug, Clone, Default)]
pub struct CsiDrivers(Arc<Mutex<BTreeMap<String, Driver>>>);

impl CsiDrivers {
    pub fn get(&self, name: &str) -> Option<Driver> {
        self.lock().get(name).cloned()
    }

    pub fn names(&self) -> Vec<String> {
        self.lock().keys().cloned().collect()
    }

    /// A driver as if registered, for the volume manager's tests.
    #[cfg(test)]
    pub fn insert_for_test(&self, driver: Driver) {
        self.lock().insert(driver.name.clone(), driver);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Driver>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Why a registration failed (the plugin is told this text).
#[derive(Debug, thiserror::Error)]
enum RegisterError {
    #[error("{0}")]
    Refused(#[from] crate::domain::csi::RegistrationError),
    #[error(transparent)]
    Plugin(#[from] crate::ports::csi::CsiError),
    #[error("error updating Node object with CSI driver node info: {0}")]
    Node(String),
    #[error("error updating CSINode object with CSI driver node info: {0}")]
    CsiNode(String),
}

struct Failed {
    /// Polls left before the next try.
    wait: u32,
    /// Polls the next failure waits.
    next_wait: u32,
}

pub struct PluginWatcher {
    registry: PathBuf,
    plugins: Arc<dyn CsiPlugins>,
    drivers: CsiDrivers,
    /// Registration socket → the socket's identity then and the driver it registered.
    registered: BTreeMap<PathBuf, ((u64, i64), String)>,
    failed: BTreeMap<PathBuf, Failed>,
}

impl PluginWatcher {
    pub fn new(root_dir: &Path, plugins: Arc<dyn CsiPlugins>, drivers: CsiDrivers) -> Self {
        PluginWatcher {
            registry: root_dir.join(PLUGINS_REGISTRY_DIR),
            plugins,
            drivers,
            registered: BTreeMap::new(),
            failed: BTreeMap::new(),
        }
    }

    /// Polls until shutdown; registrations wait for the registered Node.
    pub async fn run(
        mut self,
        connected: watch::Receiver<Option<ConnectedNode>>,
        mut shutdown: watch::Receiver<bool>,
    ) {
        // The folder exists from the start: a registrar fails to listen without it.
        if let Err(e) = self.plugins.registration_sockets(&self.registry) {
            warn!(err = %Chain(&e), "plugin registration folder not made");
        }
        loop {
            let node = connected.borrow().as_ref().map(|c| {
                let clients = c.clients.borrow().clone();
                (c.node_name.clone(), clients)
            });
            if let Some((name, clients)) = node {
                self.reconcile(&name, &clients).await;
            }
            tokio::select! {
                _ = shutdown.changed() => return,
                () = tokio::time::sleep(POLL) => {}
            }
        }
    }

    /// One pass: registers new sockets, uninstalls the drivers of sockets gone.
    pub async fn reconcile(&mut self, node_name: &str, clients: &ApiClients) {
        let sockets = match self.plugins.registration_sockets(&self.registry) {
            Ok(s) => s,
            Err(e) => {
                warn!(err = %Chain(&e), "plugin registration folder not read");
                return;
            }
        };
        // Gone, or made again since it registered (a plugin restarted between two
        // listings): deregistered; one made again registers anew below, as upstream's
        // reconciler does on a newer socket timestamp.
        let gone: Vec<PathBuf> = self
            .registered
            .iter()
            .filter(|(path, (identity, _))| {
                !sockets
                    .iter()
                    .any(|s| &&s.path == path && s.identity == *identity)
            })
            .map(|(path, _)| path.clone())
            .collect();
        for socket in gone {
            if let Some((_, name)) = self.registered.remove(&socket) {
                self.deregister(node_name, clients, &name).await;
            }
        }
        self.failed
            .retain(|path, _| sockets.iter().any(|s| &s.path == path));
        for found in sockets {
            let socket = found.path;
            if self.registered.contains_key(&socket) {
                continue;
            }
            if let Some(f) = self.failed.get_mut(&socket) {
                if f.wait > 0 {
                    f.wait -= 1;
                    continue;
                }
            }
            match self.register(node_name, clients, &socket).await {
                Ok(name) => {
                    self.failed.remove(&socket);
                    self.registered.insert(socket, (found.identity, name));
                }
                Err(e) => {
                    let message = Chain(&e).to_string();
                    warn!(path = %socket.display(), err = %message, "RegisterPlugin error");
                    if let Err(e) = self
                        .plugins
                        .notify_registration(&socket, false, &message)
                        .await
                    {
                        warn!(path = %socket.display(), err = %Chain(&e), "failed to send the registration status");
                    }
                    let f = self.failed.entry(socket).or_insert(Failed {
                        wait: 0,
                        next_wait: 1,
                    });
                    f.wait = f.next_wait;
                    f.next_wait = (f.next_wait * 2).min(MAX_WAIT_POLLS);
                }
            }
        }
    }

    async fn register(
        &self,
        node_name: &str,
        clients: &ApiClients,
        socket: &Path,
    ) -> Result<String, RegisterError> {
        let plugin = self.plugins.get_info(socket).await?;
        let others: Vec<Driver> = self
            .registered
            .values()
            .filter_map(|(_, name)| self.drivers.get(name))
            .collect();
        let driver = validate_registration(&socket.display().to_string(), &plugin, &others)?;
        info!(name = %driver.name, endpoint = %driver.endpoint, versions = %plugin.supported_versions.join(","), "Register new plugin");
        let node_info = self
            .plugins
            .node_get_info(Path::new(&driver.endpoint))
            .await?;
        install_on_node(clients, node_name, &driver.name, Some(&node_info))
            .await
            .map_err(RegisterError::Node)?;
        update_csi_node(clients, node_name, |drivers| {
            install_driver(drivers, &driver.name, &node_info)
        })
        .await
        .map_err(RegisterError::CsiNode)?;
        self.plugins.notify_registration(socket, true, "").await?;
        let name = driver.name.clone();
        self.drivers.lock().insert(name.clone(), driver);
        Ok(name)
    }

    async fn deregister(&self, node_name: &str, clients: &ApiClients, name: &str) {
        info!(name, "DeRegisterPlugin: the plugin's socket is gone");
        self.drivers.lock().remove(name);
        if let Err(e) = install_on_node(clients, node_name, name, None).await {
            warn!(name, err = %e, "failed to remove the driver from the Node");
        }
        if let Err(e) = update_csi_node(clients, node_name, |d| uninstall_driver(d, name)).await {
            warn!(name, err = %e, "failed to remove the driver from the CSINode");
        }
    }
}

/// The Node's node-ID annotation with the driver's ID (or without the driver), and its
/// topology labels (kept when it goes, as upstream's).
async fn install_on_node(
    clients: &ApiClients,
    node_name: &str,
    driver: &str,
    info: Option<&DriverNodeInfo>,
) -> Result<(), String> {
    let node = clients
        .nodes
        .get_node(node_name)
        .await
        .map_err(|e| Chain(&e).to_string())?;
    let existing = node.metadata.annotations.get(NODE_ID_ANNOTATION);
    let wanted = node_id_annotation(
        existing.map(String::as_str),
        driver,
        info.map(|i| i.node_id.as_str()),
    )?;
    let mut metadata = serde_json::Map::new();
    if wanted.as_ref() != existing {
        metadata.insert(
            "annotations".into(),
            json!({ NODE_ID_ANNOTATION: wanted.map_or(Value::Null, Value::String) }),
        );
    }
    let labels: serde_json::Map<String, Value> = info
        .map(|i| &i.topology)
        .into_iter()
        .flatten()
        .filter(|(k, v)| node.metadata.labels.get(*k) != Some(*v))
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    if !labels.is_empty() {
        metadata.insert("labels".into(), Value::Object(labels));
    }
    if metadata.is_empty() {
        return Ok(());
    }
    clients
        .nodes
        .patch_node(node_name, &json!({ "metadata": metadata }))
        .await
        .map(|_| ())
        .map_err(|e| Chain(&e).to_string())
}

/// The CSINode's drivers changed by `change` (`None`: nothing to change), made with the
/// Node as its owner when missing; read again and retried when someone wrote meanwhile.
async fn update_csi_node(
    clients: &ApiClients,
    node_name: &str,
    change: impl Fn(&[CsiNodeDriver]) -> Option<Vec<CsiNodeDriver>>,
) -> Result<(), String> {
    let mut last = String::new();
    for _ in 0..CSINODE_TRIES {
        let outcome = match clients.storage.get_csi_node(node_name).await {
            Err(e) => Err(Chain(&e).to_string()),
            Ok(None) => {
                let Some(drivers) = change(&[]) else {
                    return Ok(());
                };
                match clients.nodes.get_node(node_name).await {
                    Err(e) => Err(Chain(&e).to_string()),
                    Ok(node) => clients
                        .storage
                        .create_csi_node(node_name, &node.metadata.uid, &drivers)
                        .await
                        .map_err(|e| Chain(&e).to_string()),
                }
            }
            Ok(Some(current)) => {
                let Some(drivers) = change(&current.drivers) else {
                    return Ok(());
                };
                clients
                    .storage
                    .update_csi_node(&CsiNodeObject { drivers, ..current })
                    .await
                    .map_err(|e| Chain(&e).to_string())
            }
        };
        match outcome {
            Ok(()) => return Ok(()),
            Err(e) => last = e,
        }
    }
    Err(last)
}

#[cfg(test)]
mod tests;
