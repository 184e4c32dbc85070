//! The node's CSINode through kube-rs (`storage.k8s.io/v1`).

use async_trait::async_trait;
use k8s_openapi::api::storage::v1::{CSINode, CSINodeDriver, CSINodeSpec, VolumeNodeResources};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Api, PostParams};

use super::KubeClients;
use crate::domain::csi::CsiNodeDriver as Driver;
use crate::ports::api::{CallError, CallErrorKind, CsiNodeApi, CsiNodeObject, ObjectsError};

fn to_kube(drivers: &[Driver]) -> Vec<CSINodeDriver> {
    drivers
        .iter()
        .map(|d| CSINodeDriver {
            name: d.name.clone(),
            node_id: d.node_id.clone(),
            topology_keys: Some(d.topology_keys.clone()),
            allocatable: d
                .allocatable_count
                .map(|count| VolumeNodeResources { count: Some(count) }),
        })
        .collect()
}

fn from_kube(node: CSINode) -> CsiNodeObject {
    CsiNodeObject {
        name: node.metadata.name.unwrap_or_default(),
        resource_version: node.metadata.resource_version.unwrap_or_default(),
        drivers: node
            .spec
            .drivers
            .into_iter()
            .map(|d| Driver {
                name: d.name,
                node_id: d.node_id,
                topology_keys: d.topology_keys.unwrap_or_default(),
                allocatable_count: d.allocatable.and_then(|a| a.count),
            })
            .collect(),
    }
}

#[async_trait]
impl CsiNodeApi for KubeClients {
    async fn get_csi_node(&self, name: &str) -> Result<Option<CsiNodeObject>, ObjectsError> {
        let api: Api<CSINode> = Api::all(self.connection.client.clone());
        let node = self
            .object_call("get", "csinode", "", name, api.get(name))
            .await?;
        Ok(node.map(from_kube))
    }

    async fn create_csi_node(
        &self,
        name: &str,
        node_uid: &str,
        drivers: &[Driver],
    ) -> Result<(), ObjectsError> {
        let api: Api<CSINode> = Api::all(self.connection.client.clone());
        let object = CSINode {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                owner_references: Some(vec![OwnerReference {
                    api_version: "v1".into(),
                    kind: "Node".into(),
                    name: name.to_owned(),
                    uid: node_uid.to_owned(),
                    ..OwnerReference::default()
                }]),
                ..ObjectMeta::default()
            },
            spec: CSINodeSpec {
                drivers: to_kube(drivers),
            },
        };
        let params = PostParams::default();
        self.object_call("create", "csinode", "", name, api.create(&params, &object))
            .await?;
        Ok(())
    }

    async fn update_csi_node(&self, node: &CsiNodeObject) -> Result<(), ObjectsError> {
        let api: Api<CSINode> = Api::all(self.connection.client.clone());
        let name = node.name.as_str();
        let Some(mut current) = self
            .object_call("get", "csinode", "", name, api.get(name))
            .await?
        else {
            return Err(ObjectsError::Call {
                verb: "update",
                kind: "csinode",
                namespace: String::new(),
                name: name.to_owned(),
                source: Box::new(CallError::new(
                    CallErrorKind::Other,
                    "the CSINode is gone; it is made again",
                )),
            });
        };
        // The read the caller decided on: a newer object makes the API server refuse it.
        current.metadata.resource_version = Some(node.resource_version.clone());
        current.spec.drivers = to_kube(&node.drivers);
        let params = PostParams::default();
        self.object_call(
            "update",
            "csinode",
            "",
            name,
            api.replace(name, &params, &current),
        )
        .await?;
        Ok(())
    }
}
