//! The API objects a node reads for its pods' volumes, environment and runtime:
//! ConfigMaps, Secrets, service-account tokens (TokenRequest), Services,
//! RuntimeClasses, PersistentVolumeClaims and PersistentVolumes. The Node authorizer lets a node
//! read only the objects its pods reference, so these are single gets, never lists.

use async_trait::async_trait;
use thiserror::Error;

use super::CallError;
use crate::domain::volumes::claim::{ClaimData, PersistentVolumeData};
use crate::domain::volumes::services::ServiceInfo;
use crate::domain::volumes::token::IssuedToken;
use crate::domain::volumes::{ConfigMapData, RuntimeClassData, SecretData};

#[derive(Debug, Error)]
pub enum ObjectsError {
    #[error("{verb} {kind} {namespace}/{name}: {source}")]
    Call {
        verb: &'static str,
        kind: &'static str,
        namespace: String,
        name: String,
        #[source]
        source: Box<CallError>,
    },
}

/// A TokenRequest for a pod's service account, bound to the pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRequest {
    pub namespace: String,
    pub service_account: String,
    /// Empty: the API server's own audiences.
    pub audiences: Vec<String>,
    pub expiration_seconds: i64,
    pub pod_name: String,
    pub pod_uid: String,
}

#[async_trait]
pub trait PodObjectsApi: Send + Sync {
    /// `Ok(None)` when the ConfigMap does not exist.
    /// # Errors
    /// [`ObjectsError::Call`] (forbidden when no pod of the node references it).
    async fn get_config_map(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<ConfigMapData>, ObjectsError>;

    /// `Ok(None)` when the Secret does not exist.
    /// # Errors
    /// [`ObjectsError::Call`].
    async fn get_secret(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<SecretData>, ObjectsError>;

    /// A token from `serviceaccounts/<name>/token`; `issued_unix` is left for the caller
    /// (its clock).
    /// # Errors
    /// [`ObjectsError::Call`].
    async fn request_token(&self, request: &TokenRequest) -> Result<IssuedToken, ObjectsError>;

    /// Every Service of the cluster (the Node authorizer lets a node list them), for the
    /// service-link environment.
    /// # Errors
    /// [`ObjectsError::Call`].
    async fn list_services(&self) -> Result<Vec<ServiceInfo>, ObjectsError>;

    /// A `node.k8s.io/v1` RuntimeClass (the Node authorizer lets a node read them all);
    /// `Ok(None)` when it does not exist.
    /// # Errors
    /// [`ObjectsError::Call`].
    async fn get_runtime_class(&self, name: &str)
        -> Result<Option<RuntimeClassData>, ObjectsError>;

    /// A PersistentVolumeClaim one of the node's pods names; `Ok(None)` when it does
    /// not exist.
    /// # Errors
    /// [`ObjectsError::Call`].
    async fn get_persistent_volume_claim(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<ClaimData>, ObjectsError>;

    /// A `storage.k8s.io/v1` CSIDriver (the Node authorizer lets a node read them all);
    /// `Ok(None)` when it does not exist.
    /// # Errors
    /// [`ObjectsError::Call`].
    async fn get_csi_driver(
        &self,
        name: &str,
    ) -> Result<Option<crate::domain::csi::volume::CsiDriverData>, ObjectsError>;

    /// The PersistentVolume such a claim is bound to; `Ok(None)` when it does not exist.
    /// # Errors
    /// [`ObjectsError::Call`].
    async fn get_persistent_volume(
        &self,
        name: &str,
    ) -> Result<Option<PersistentVolumeData>, ObjectsError>;

    /// A `storage.k8s.io/v1` VolumeAttachment (the Node authorizer lets a node read those
    /// of its node); `Ok(None)` when it does not exist.
    /// # Errors
    /// [`ObjectsError::Call`].
    async fn get_volume_attachment(
        &self,
        name: &str,
    ) -> Result<Option<crate::domain::csi::volume::VolumeAttachmentData>, ObjectsError>;

    /// Upstream's `MarkFSResizeFinished`: the claim's `status.capacity.storage` set to
    /// `capacity` and its resize conditions (`Resizing`, `FileSystemResizePending`)
    /// removed, once its volume's file system was grown on the node (the Node
    /// authorizer and NodeRestriction let a node change just these of its pods' claims).
    /// # Errors
    /// [`ObjectsError::Call`].
    async fn mark_claim_resized(
        &self,
        namespace: &str,
        name: &str,
        capacity: &str,
    ) -> Result<(), ObjectsError>;
}
