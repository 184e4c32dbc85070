//! Device plugins in memory: plugins added by endpoint path (their devices, options and
//! answer), the checkpoints kept as text by path, the calls recorded. For the device manager's
//! tests and benchmark; never proof that the gRPC adapter works.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;

use crate::domain::devices::{ContainerAllocateResponse, Device, PluginOptions};
use crate::ports::device_plugins::{
    DevicePluginClient, DevicePluginError, DevicePlugins, DeviceWatch, PodResourcesProvider,
    RegistrationHandler,
};

/// One plugin as the fake answers for it.
#[derive(Debug, Clone, Default)]
pub struct FakePlugin {
    pub devices: Vec<Device>,
    pub options: PluginOptions,
    pub response: ContainerAllocateResponse,
    pub preferred: Vec<String>,
}

#[derive(Default)]
struct Inner {
    /// Checkpoint files by path (the device manager's and the CPU manager's).
    checkpoints: BTreeMap<PathBuf, String>,
    plugins: BTreeMap<PathBuf, FakePlugin>,
    calls: Vec<String>,
}

#[derive(Clone, Default)]
pub struct FakeDevicePlugins {
    inner: Arc<Mutex<Inner>>,
}

impl FakeDevicePlugins {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn add_plugin(&self, endpoint: &Path, plugin: FakePlugin) {
        self.lock().plugins.insert(endpoint.to_path_buf(), plugin);
    }

    /// The device manager's checkpoint.
    pub fn checkpoint(&self) -> Option<String> {
        self.lock()
            .checkpoints
            .iter()
            .find(|(path, _)| path.ends_with(crate::domain::devices::CHECKPOINT_FILE))
            .map(|(_, text)| text.clone())
    }

    /// The checkpoint file at `path`.
    pub fn checkpoint_at(&self, path: &Path) -> Option<String> {
        self.lock().checkpoints.get(path).cloned()
    }

    /// Puts a checkpoint file at `path` (a file left by an earlier run).
    pub fn set_checkpoint(&self, path: &Path, contents: &str) {
        self.lock()
            .checkpoints
            .insert(path.to_path_buf(), contents.to_owned());
    }

    /// `Allocate`, `GetPreferredAllocation`, `PreStartContainer` calls, in order.
    pub fn calls(&self) -> Vec<String> {
        self.lock().calls.clone()
    }
}

struct FakeClient {
    plugins: FakeDevicePlugins,
    plugin: FakePlugin,
}

struct FakeWatch(Option<Vec<Device>>);

#[async_trait]
impl DeviceWatch for FakeWatch {
    async fn next(&mut self) -> Result<Option<Vec<Device>>, DevicePluginError> {
        match self.0.take() {
            Some(devices) => Ok(Some(devices)),
            // The stream stays open, as a plugin's does.
            None => std::future::pending().await,
        }
    }
}

#[async_trait]
impl DevicePluginClient for FakeClient {
    async fn options(&self) -> Result<PluginOptions, DevicePluginError> {
        Ok(self.plugin.options)
    }

    async fn list_and_watch(&self) -> Result<Box<dyn DeviceWatch>, DevicePluginError> {
        Ok(Box::new(FakeWatch(Some(self.plugin.devices.clone()))))
    }

    async fn preferred_allocation(
        &self,
        _available: Vec<String>,
        _must_include: Vec<String>,
        size: usize,
    ) -> Result<Vec<String>, DevicePluginError> {
        self.plugins
            .lock()
            .calls
            .push(format!("GetPreferredAllocation {size}"));
        Ok(self.plugin.preferred.clone())
    }

    async fn allocate(
        &self,
        device_ids: Vec<String>,
    ) -> Result<Option<(ContainerAllocateResponse, Vec<u8>)>, DevicePluginError> {
        self.plugins
            .lock()
            .calls
            .push(format!("Allocate {}", device_ids.join(",")));
        Ok(Some((self.plugin.response.clone(), Vec::new())))
    }

    async fn pre_start_container(&self, device_ids: Vec<String>) -> Result<(), DevicePluginError> {
        self.plugins
            .lock()
            .calls
            .push(format!("PreStartContainer {}", device_ids.join(",")));
        Ok(())
    }
}

#[async_trait]
impl DevicePlugins for FakeDevicePlugins {
    fn prepare_dir(&self, _dir: &Path, _keep: &Path) -> Result<(), DevicePluginError> {
        Ok(())
    }

    fn read_checkpoint(&self, path: &Path) -> Result<Option<String>, DevicePluginError> {
        Ok(self.checkpoint_at(path))
    }

    fn write_checkpoint(&self, path: &Path, contents: &str) -> Result<(), DevicePluginError> {
        self.set_checkpoint(path, contents);
        Ok(())
    }

    async fn serve_registration(
        &self,
        _socket: &Path,
        _handler: Arc<dyn RegistrationHandler>,
    ) -> Result<(), DevicePluginError> {
        Ok(())
    }

    async fn serve_pod_resources(
        &self,
        _socket: &Path,
        _provider: Arc<dyn PodResourcesProvider>,
    ) -> Result<(), DevicePluginError> {
        Ok(())
    }

    async fn connect(
        &self,
        endpoint: &Path,
    ) -> Result<Arc<dyn DevicePluginClient>, DevicePluginError> {
        let plugin = self.lock().plugins.get(endpoint).cloned();
        match plugin {
            Some(plugin) => Ok(Arc::new(FakeClient {
                plugins: self.clone(),
                plugin,
            })),
            None => Err(DevicePluginError::Call {
                socket: endpoint.display().to_string(),
                call: "dial",
                message: "failed to dial device plugin: no such plugin".into(),
            }),
        }
    }

    fn decode_response(&self, _bytes: &[u8]) -> Option<ContainerAllocateResponse> {
        Some(ContainerAllocateResponse::default())
    }
}
