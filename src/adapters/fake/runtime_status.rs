//! A runtime whose readiness and images the test sets; it can be "stopped".

use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;

use crate::domain::config::resolved::RuntimeEndpoint;
use crate::domain::node_status::readiness::RuntimeCondition;
use crate::domain::node_status::status::ImageSummary;
use crate::ports::runtime::RuntimeError;
use crate::ports::runtime_status::RuntimeStatusService;

#[derive(Debug)]
struct State {
    up: bool,
    network_ready: bool,
    images: Vec<ImageSummary>,
    calls: usize,
}

/// Ready, with no images, until told otherwise.
#[derive(Debug, Clone)]
pub struct FakeRuntimeStatus {
    state: Arc<Mutex<State>>,
}

impl Default for FakeRuntimeStatus {
    fn default() -> Self {
        FakeRuntimeStatus {
            state: Arc::new(Mutex::new(State {
                up: true,
                network_ready: true,
                images: Vec::new(),
                calls: 0,
            })),
        }
    }
}

impl FakeRuntimeStatus {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A stopped runtime answers nothing.
    pub fn set_up(&self, up: bool) {
        self.lock().up = up;
    }

    pub fn set_network_ready(&self, ready: bool) {
        self.lock().network_ready = ready;
    }

    pub fn set_images(&self, images: Vec<ImageSummary>) {
        self.lock().images = images;
    }

    pub fn calls(&self) -> usize {
        self.lock().calls
    }

    fn answer(&self) -> Result<MutexGuard<'_, State>, RuntimeError> {
        let mut s = self.lock();
        s.calls += 1;
        if s.up {
            Ok(s)
        } else {
            Err(RuntimeError::Unavailable {
                endpoint: RuntimeEndpoint::Simulated.to_string(),
                source: crate::ports::runtime::cause("stopped by the test"),
            })
        }
    }
}

#[async_trait]
impl RuntimeStatusService for FakeRuntimeStatus {
    async fn runtime_conditions(&self) -> Result<Vec<RuntimeCondition>, RuntimeError> {
        let s = self.answer()?;
        let condition = |t: &str, status: bool| RuntimeCondition {
            type_: t.into(),
            status,
            reason: if status { "" } else { "NetworkPluginNotReady" }.into(),
            message: if status {
                ""
            } else {
                "Network plugin returns error: cni plugin not initialized"
            }
            .into(),
        };
        Ok(vec![
            condition("RuntimeReady", true),
            condition("NetworkReady", s.network_ready),
        ])
    }

    async fn list_images(&self) -> Result<Vec<ImageSummary>, RuntimeError> {
        Ok(self.answer()?.images.clone())
    }
}
