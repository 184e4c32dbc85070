//! Core v1 Events.

use async_trait::async_trait;
use serde_json::Value;
use thiserror::Error;

use super::CallError;
use crate::domain::node_status::model::Event;

#[derive(Debug, Error)]
pub enum EventsError {
    #[error("event {namespace}/{name} not found")]
    NotFound { namespace: String, name: String },
    #[error("{verb} event {namespace}/{name}: {source}")]
    Call {
        verb: &'static str,
        namespace: String,
        name: String,
        #[source]
        source: CallError,
    },
}

#[async_trait]
pub trait EventApi: Send + Sync {
    async fn create_event(&self, event: &Event) -> Result<Event, EventsError>;

    /// A strategic-merge patch of an existing event (a repeat's count).
    /// # Errors
    /// [`EventsError::NotFound`] when it is gone (the recorder then creates it).
    async fn patch_event(
        &self,
        namespace: &str,
        name: &str,
        patch: &Value,
    ) -> Result<Event, EventsError>;
}
