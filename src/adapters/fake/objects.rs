//! In-memory ConfigMaps, Secrets, RuntimeClasses, claims, PersistentVolumes and
//! service-account tokens for the volume manager's
//! tests; every call is counted. Never proof the kube adapter works.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;

use crate::domain::volumes::claim::{ClaimData, PersistentVolumeData};
use crate::domain::volumes::services::ServiceInfo;
use crate::domain::volumes::token::IssuedToken;
use crate::domain::volumes::{ConfigMapData, RuntimeClassData, SecretData};
use crate::ports::api::{CallError, CallErrorKind, ObjectsError, PodObjectsApi, TokenRequest};

#[derive(Debug, Default)]
struct State {
    config_maps: BTreeMap<(String, String), ConfigMapData>,
    secrets: BTreeMap<(String, String), SecretData>,
    services: Vec<ServiceInfo>,
    runtime_classes: BTreeMap<String, RuntimeClassData>,
    claims: BTreeMap<(String, String), ClaimData>,
    persistent_volumes: BTreeMap<String, PersistentVolumeData>,
    csi_drivers: BTreeMap<String, crate::domain::csi::volume::CsiDriverData>,
    volume_attachments: BTreeMap<String, crate::domain::csi::volume::VolumeAttachmentData>,
    /// Tokens issued so far, in order.
    tokens: Vec<TokenRequest>,
    /// Lifetime the fake gives tokens from the "now" the test sets.
    now_unix: i64,
    calls: usize,
    service_lists: usize,
    down: bool,
}

/// Clone it to share.
#[derive(Debug, Clone, Default)]
pub struct FakeObjects {
    state: Arc<Mutex<State>>,
}

impl FakeObjects {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn put_config_map(&self, namespace: &str, name: &str, data: &[(&str, &str)]) {
        let cm = ConfigMapData {
            data: data
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            binary_data: BTreeMap::new(),
        };
        self.lock()
            .config_maps
            .insert((namespace.into(), name.into()), cm);
    }

    pub fn put_secret(&self, namespace: &str, name: &str, data: &[(&str, &[u8])]) {
        let s = SecretData {
            data: data
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.to_vec()))
                .collect(),
            kind: "Opaque".into(),
        };
        self.lock()
            .secrets
            .insert((namespace.into(), name.into()), s);
    }

    pub fn put_service(&self, service: ServiceInfo) {
        self.lock().services.push(service);
    }

    pub fn put_runtime_class(&self, name: &str, handler: &str) {
        self.lock().runtime_classes.insert(
            name.into(),
            RuntimeClassData {
                handler: handler.into(),
            },
        );
    }

    pub fn put_claim(&self, namespace: &str, name: &str, claim: ClaimData) {
        self.lock()
            .claims
            .insert((namespace.into(), name.into()), claim);
    }

    pub fn put_csi_driver(&self, name: &str, driver: crate::domain::csi::volume::CsiDriverData) {
        self.lock().csi_drivers.insert(name.into(), driver);
    }

    /// The VolumeAttachment `name` as the attacher left it.
    pub fn put_volume_attachment(
        &self,
        name: &str,
        attachment: crate::domain::csi::volume::VolumeAttachmentData,
    ) {
        self.lock()
            .volume_attachments
            .insert(name.into(), attachment);
    }

    pub fn put_persistent_volume(&self, name: &str, volume: PersistentVolumeData) {
        self.lock().persistent_volumes.insert(name.into(), volume);
    }

    /// Sets the `type` of a Secret put before (`kubernetes.io/dockerconfigjson` ...).
    pub fn set_secret_type(&self, namespace: &str, name: &str, kind: &str) {
        if let Some(s) = self
            .lock()
            .secrets
            .get_mut(&(namespace.to_owned(), name.to_owned()))
        {
            s.kind = kind.into();
        }
    }

    /// The time tokens are issued at.
    pub fn set_now(&self, now_unix: i64) {
        self.lock().now_unix = now_unix;
    }

    pub fn set_down(&self, down: bool) {
        self.lock().down = down;
    }

    pub fn token_requests(&self) -> Vec<TokenRequest> {
        self.lock().tokens.clone()
    }

    /// Gets and token requests so far.
    pub fn calls(&self) -> usize {
        self.lock().calls
    }

    /// Service lists asked for so far, failed ones included.
    pub fn service_lists(&self) -> usize {
        self.lock().service_lists
    }

    fn check(
        &self,
        verb: &'static str,
        kind: &'static str,
        ns: &str,
        name: &str,
    ) -> Result<(), ObjectsError> {
        let mut state = self.lock();
        state.calls += 1;
        if state.down {
            return Err(ObjectsError::Call {
                verb,
                kind,
                namespace: ns.into(),
                name: name.into(),
                source: Box::new(CallError::new(
                    CallErrorKind::Unreachable,
                    "connection refused (fake)",
                )),
            });
        }
        Ok(())
    }
}

#[async_trait]
impl PodObjectsApi for FakeObjects {
    async fn get_config_map(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<ConfigMapData>, ObjectsError> {
        self.check("get", "configmap", namespace, name)?;
        Ok(self
            .lock()
            .config_maps
            .get(&(namespace.into(), name.into()))
            .cloned())
    }

    async fn get_secret(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<SecretData>, ObjectsError> {
        self.check("get", "secret", namespace, name)?;
        Ok(self
            .lock()
            .secrets
            .get(&(namespace.into(), name.into()))
            .cloned())
    }

    /// Not counted in `calls`: in `service_lists`.
    async fn list_services(&self) -> Result<Vec<ServiceInfo>, ObjectsError> {
        let mut state = self.lock();
        state.service_lists += 1;
        if state.down {
            return Err(ObjectsError::Call {
                verb: "list",
                kind: "services",
                namespace: String::new(),
                name: String::new(),
                source: Box::new(CallError::new(
                    CallErrorKind::Unreachable,
                    "connection refused (fake)",
                )),
            });
        }
        Ok(state.services.clone())
    }

    async fn get_runtime_class(
        &self,
        name: &str,
    ) -> Result<Option<RuntimeClassData>, ObjectsError> {
        self.check("get", "runtimeclass", "", name)?;
        Ok(self.lock().runtime_classes.get(name).cloned())
    }

    async fn get_persistent_volume_claim(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<ClaimData>, ObjectsError> {
        self.check("get", "persistentvolumeclaim", namespace, name)?;
        Ok(self
            .lock()
            .claims
            .get(&(namespace.into(), name.into()))
            .cloned())
    }

    async fn get_csi_driver(
        &self,
        name: &str,
    ) -> Result<Option<crate::domain::csi::volume::CsiDriverData>, ObjectsError> {
        self.check("get", "csidriver", "", name)?;
        Ok(self.lock().csi_drivers.get(name).cloned())
    }

    async fn get_persistent_volume(
        &self,
        name: &str,
    ) -> Result<Option<PersistentVolumeData>, ObjectsError> {
        self.check("get", "persistentvolume", "", name)?;
        Ok(self.lock().persistent_volumes.get(name).cloned())
    }

    async fn get_volume_attachment(
        &self,
        name: &str,
    ) -> Result<Option<crate::domain::csi::volume::VolumeAttachmentData>, ObjectsError> {
        self.check("get", "volumeattachment", "", name)?;
        Ok(self.lock().volume_attachments.get(name).cloned())
    }

    async fn mark_claim_resized(
        &self,
        namespace: &str,
        name: &str,
        capacity: &str,
    ) -> Result<(), ObjectsError> {
        self.check("patch", "persistentvolumeclaims/status", namespace, name)?;
        if let Some(claim) = self
            .lock()
            .claims
            .get_mut(&(namespace.to_owned(), name.to_owned()))
        {
            claim.capacity = Some(capacity.to_owned());
        }
        Ok(())
    }

    async fn request_token(&self, request: &TokenRequest) -> Result<IssuedToken, ObjectsError> {
        self.check(
            "create",
            "token",
            &request.namespace,
            &request.service_account,
        )?;
        let mut state = self.lock();
        state.tokens.push(request.clone());
        let n = state.tokens.len();
        Ok(IssuedToken {
            token: format!("token-{n}-{}", request.pod_name),
            issued_unix: state.now_unix,
            expires_unix: state.now_unix + request.expiration_seconds,
        })
    }
}
