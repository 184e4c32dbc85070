//! ConfigMaps, Secrets, Services, RuntimeClasses, claims, PersistentVolumes and
//! TokenRequests through kube-rs, each call rate-limited as the
//! connection's other calls (not the heartbeat's).

use std::future::Future;

use async_trait::async_trait;
use k8s_openapi::api::authentication::v1::{
    BoundObjectReference, TokenRequest as KubeTokenRequest, TokenRequestSpec,
};
use k8s_openapi::api::core::v1::{
    ConfigMap, PersistentVolume, PersistentVolumeClaim, Secret, Service, ServiceAccount,
};
use k8s_openapi::api::node::v1::RuntimeClass;
use kube::api::{Api, ListParams, PostParams};

use super::errors::Answer;
use super::{Budget, KubeClients};
use crate::domain::volumes::claim::{
    ClaimData, CsiPersistentSource, PersistentVolumeData, PersistentVolumeSource, SecretReference,
};
use crate::domain::volumes::services::{ServiceInfo, ServicePort};
use crate::domain::volumes::token::IssuedToken;
use crate::domain::volumes::{ConfigMapData, RuntimeClassData, SecretData};
use crate::ports::api::{ObjectsError, PodObjectsApi, TokenRequest};

impl KubeClients {
    /// `Ok(None)` on 404.
    pub(super) async fn object_call<T, F>(
        &self,
        verb: &'static str,
        kind: &'static str,
        namespace: &str,
        name: &str,
        call: F,
    ) -> Result<Option<T>, ObjectsError>
    where
        F: Future<Output = Result<T, kube::Error>>,
    {
        let call_error = |source| ObjectsError::Call {
            verb,
            kind,
            namespace: namespace.into(),
            name: name.into(),
            source: Box::new(source),
        };
        match self
            .connection
            .call(Budget::Api, call)
            .await
            .map_err(call_error)?
        {
            Ok(object) => Ok(Some(object)),
            Err(e) => {
                let (answer, source) = self.connection.classify(e);
                match answer {
                    Answer::NotFound => Ok(None),
                    _ => Err(call_error(source)),
                }
            }
        }
    }
}

#[async_trait]
impl PodObjectsApi for KubeClients {
    async fn get_config_map(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<ConfigMapData>, ObjectsError> {
        let api: Api<ConfigMap> = Api::namespaced(self.connection.client.clone(), namespace);
        let cm = self
            .object_call("get", "configmap", namespace, name, api.get(name))
            .await?;
        Ok(cm.map(|cm| ConfigMapData {
            data: cm.data.unwrap_or_default(),
            binary_data: cm
                .binary_data
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k, v.0))
                .collect(),
        }))
    }

    async fn get_secret(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<SecretData>, ObjectsError> {
        let api: Api<Secret> = Api::namespaced(self.connection.client.clone(), namespace);
        let secret = self
            .object_call("get", "secret", namespace, name, api.get(name))
            .await?;
        Ok(secret.map(|s| {
            let mut data: std::collections::BTreeMap<String, Vec<u8>> = s
                .data
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k, v.0))
                .collect();
            // stringData is write-only, but a server may echo it: it wins, as on write.
            for (k, v) in s.string_data.unwrap_or_default() {
                data.insert(k, v.into_bytes());
            }
            SecretData {
                data,
                kind: s.type_.unwrap_or_default(),
            }
        }))
    }

    async fn list_services(&self) -> Result<Vec<ServiceInfo>, ObjectsError> {
        let api: Api<Service> = Api::all(self.connection.client.clone());
        let list = self
            .object_call("list", "services", "", "", api.list(&ListParams::default()))
            .await?;
        Ok(list
            .map(|l| l.items)
            .unwrap_or_default()
            .into_iter()
            .map(|s| {
                let spec = s.spec.unwrap_or_default();
                ServiceInfo {
                    namespace: s.metadata.namespace.unwrap_or_default(),
                    name: s.metadata.name.unwrap_or_default(),
                    cluster_ip: spec.cluster_ip.unwrap_or_default(),
                    ports: spec
                        .ports
                        .unwrap_or_default()
                        .into_iter()
                        .map(|p| ServicePort {
                            name: p.name.unwrap_or_default(),
                            port: p.port,
                            protocol: p.protocol.unwrap_or_default(),
                        })
                        .collect(),
                }
            })
            .collect())
    }

    async fn get_runtime_class(
        &self,
        name: &str,
    ) -> Result<Option<RuntimeClassData>, ObjectsError> {
        let api: Api<RuntimeClass> = Api::all(self.connection.client.clone());
        let class = self
            .object_call("get", "runtimeclass", "", name, api.get(name))
            .await?;
        Ok(class.map(|c| RuntimeClassData { handler: c.handler }))
    }

    async fn get_persistent_volume_claim(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<ClaimData>, ObjectsError> {
        let api: Api<PersistentVolumeClaim> =
            Api::namespaced(self.connection.client.clone(), namespace);
        let claim = self
            .object_call(
                "get",
                "persistentvolumeclaim",
                namespace,
                name,
                api.get(name),
            )
            .await?;
        Ok(claim.map(|c| ClaimData {
            uid: c.metadata.uid.unwrap_or_default(),
            volume_name: c.spec.and_then(|s| s.volume_name).unwrap_or_default(),
            capacity: c
                .status
                .as_ref()
                .and_then(|s| s.capacity.as_ref()?.get("storage"))
                .map(|q| q.0.clone()),
            phase: c.status.and_then(|s| s.phase).unwrap_or_default(),
            being_deleted: c.metadata.deletion_timestamp.is_some(),
            controller_uid: c
                .metadata
                .owner_references
                .unwrap_or_default()
                .into_iter()
                .find(|o| o.controller == Some(true))
                .map(|o| o.uid),
        }))
    }

    async fn get_csi_driver(
        &self,
        name: &str,
    ) -> Result<Option<crate::domain::csi::volume::CsiDriverData>, ObjectsError> {
        let api: Api<k8s_openapi::api::storage::v1::CSIDriver> =
            Api::all(self.connection.client.clone());
        let driver = self
            .object_call("get", "csidriver", "", name, api.get(name))
            .await?;
        Ok(driver.map(|d| crate::domain::csi::volume::CsiDriverData {
            // The API's defaults: attach required, no pod info, ReadWriteOnceWithFSType.
            attach_required: d.spec.attach_required.unwrap_or(true),
            pod_info_on_mount: d.spec.pod_info_on_mount.unwrap_or(false),
            fs_group_policy: d.spec.fs_group_policy.unwrap_or_default(),
            volume_lifecycle_modes: d.spec.volume_lifecycle_modes.unwrap_or_default(),
        }))
    }

    async fn get_persistent_volume(
        &self,
        name: &str,
    ) -> Result<Option<PersistentVolumeData>, ObjectsError> {
        let api: Api<PersistentVolume> = Api::all(self.connection.client.clone());
        let pv = self
            .object_call("get", "persistentvolume", "", name, api.get(name))
            .await?;
        Ok(pv.map(|pv| persistent_volume_data(pv.spec.unwrap_or_default())))
    }

    async fn get_volume_attachment(
        &self,
        name: &str,
    ) -> Result<Option<crate::domain::csi::volume::VolumeAttachmentData>, ObjectsError> {
        let api: Api<k8s_openapi::api::storage::v1::VolumeAttachment> =
            Api::all(self.connection.client.clone());
        let attachment = self
            .object_call("get", "volumeattachment", "", name, api.get(name))
            .await?;
        Ok(attachment.map(|a| {
            let status = a.status.unwrap_or_default();
            crate::domain::csi::volume::VolumeAttachmentData {
                attached: status.attached,
                being_deleted: a.metadata.deletion_timestamp.is_some(),
                attach_error: status.attach_error.and_then(|e| e.message),
                attachment_metadata: status.attachment_metadata.unwrap_or_default(),
            }
        }))
    }

    async fn mark_claim_resized(
        &self,
        namespace: &str,
        name: &str,
        capacity: &str,
    ) -> Result<(), ObjectsError> {
        let api: Api<PersistentVolumeClaim> =
            Api::namespaced(self.connection.client.clone(), namespace);
        // A strategic merge patch: the conditions are merged by type, so only the two
        // resize conditions go.
        let patch = serde_json::json!({"status": {
            "capacity": {"storage": capacity},
            "conditions": [
                {"type": "Resizing", "$patch": "delete"},
                {"type": "FileSystemResizePending", "$patch": "delete"},
            ],
        }});
        self.object_call(
            "patch",
            "persistentvolumeclaims/status",
            namespace,
            name,
            api.patch_status(
                name,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Strategic(patch),
            ),
        )
        .await?;
        Ok(())
    }

    async fn request_token(&self, request: &TokenRequest) -> Result<IssuedToken, ObjectsError> {
        let api: Api<ServiceAccount> =
            Api::namespaced(self.connection.client.clone(), &request.namespace);
        let body = KubeTokenRequest {
            spec: TokenRequestSpec {
                audiences: request.audiences.clone(),
                expiration_seconds: Some(request.expiration_seconds),
                bound_object_ref: Some(BoundObjectReference {
                    api_version: Some("v1".into()),
                    kind: Some("Pod".into()),
                    name: Some(request.pod_name.clone()),
                    uid: Some(request.pod_uid.clone()),
                }),
            },
            ..KubeTokenRequest::default()
        };
        let (namespace, name) = (request.namespace.as_str(), request.service_account.as_str());
        let params = PostParams::default();
        let answer = self
            .object_call(
                "create",
                "token",
                namespace,
                name,
                api.create_token_request(name, &params, &body),
            )
            .await?;
        let status = answer
            .and_then(|t| t.status)
            .ok_or_else(|| ObjectsError::Call {
                verb: "create",
                kind: "token",
                namespace: namespace.into(),
                name: name.into(),
                source: Box::new(crate::ports::api::CallError::new(
                    crate::ports::api::CallErrorKind::Decode,
                    "the TokenRequest came back without a status",
                )),
            })?;
        Ok(IssuedToken {
            token: status.token,
            issued_unix: 0,
            expires_unix: status.expiration_timestamp.0.as_second(),
        })
    }
}

/// The kubelet's view of a PersistentVolume's spec; a source other than `hostPath` and
/// `local` is named by its field, as the pod's volumes are.
fn persistent_volume_data(
    spec: k8s_openapi::api::core::v1::PersistentVolumeSpec,
) -> PersistentVolumeData {
    let source = if let Some(h) = &spec.host_path {
        PersistentVolumeSource::HostPath {
            path: h.path.clone(),
            kind: h.type_.clone().unwrap_or_default(),
        }
    } else if let Some(l) = &spec.local {
        PersistentVolumeSource::Local {
            path: l.path.clone(),
        }
    } else if let Some(c) = &spec.csi {
        let reference = |r: &Option<k8s_openapi::api::core::v1::SecretReference>| {
            r.as_ref().map(|r| SecretReference {
                namespace: r.namespace.clone().unwrap_or_default(),
                name: r.name.clone().unwrap_or_default(),
            })
        };
        PersistentVolumeSource::Csi(Box::new(CsiPersistentSource {
            driver: c.driver.clone(),
            volume_handle: c.volume_handle.clone(),
            fs_type: c.fs_type.clone().unwrap_or_default(),
            read_only: c.read_only.unwrap_or(false),
            volume_attributes: c.volume_attributes.clone().unwrap_or_default(),
            node_stage_secret_ref: reference(&c.node_stage_secret_ref),
            node_publish_secret_ref: reference(&c.node_publish_secret_ref),
            node_expand_secret_ref: reference(&c.node_expand_secret_ref),
        }))
    } else {
        // The spec's one source is the field set besides the common ones.
        const COMMON: &[&str] = &[
            "accessModes",
            "capacity",
            "claimRef",
            "mountOptions",
            "nodeAffinity",
            "persistentVolumeReclaimPolicy",
            "storageClassName",
            "volumeMode",
            "volumeAttributesClassName",
        ];
        let plugin = serde_json::to_value(&spec)
            .ok()
            .and_then(|v| {
                v.as_object()
                    .and_then(|o| o.keys().find(|k| !COMMON.contains(&k.as_str())).cloned())
            })
            .unwrap_or_default();
        PersistentVolumeSource::Other(plugin)
    };
    let node_affinity = spec
        .node_affinity
        .and_then(|a| a.required)
        .and_then(|required| serde_json::to_value(required).ok())
        .and_then(|v| serde_json::from_value(v).ok());
    PersistentVolumeData {
        access_modes: spec.access_modes.clone().unwrap_or_default(),
        claim_uid: spec.claim_ref.map(|r| r.uid.unwrap_or_default()),
        source,
        volume_mode: spec.volume_mode.unwrap_or_default(),
        node_affinity,
        mount_options: spec.mount_options.unwrap_or_default(),
        capacity: spec
            .capacity
            .as_ref()
            .and_then(|c| c.get("storage"))
            .map(|q| q.0.clone()),
    }
}
