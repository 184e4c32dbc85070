//! The embedded simulated runtime behind `--container-runtime-endpoint=fake://`: an
//! in-memory runtime so rkubelet runs anywhere, without root (a simulated node).

use async_trait::async_trait;

use crate::ports::runtime::{RuntimeError, RuntimeService, RuntimeVersion};

#[derive(Debug, Default)]
pub struct FakeRuntime;

pub const FAKE_RUNTIME_NAME: &str = "rkubelet-fake";

#[async_trait]
impl RuntimeService for FakeRuntime {
    async fn version(&self) -> Result<RuntimeVersion, RuntimeError> {
        Ok(RuntimeVersion {
            runtime_name: FAKE_RUNTIME_NAME.into(),
            runtime_version: env!("CARGO_PKG_VERSION").into(),
            runtime_api_version: "v1".into(),
        })
    }
}
