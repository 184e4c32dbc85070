//! The `/configz` document: the whole resolved `KubeletConfiguration`, as upstream serves
//! it, with upstream's defaults for the fields rkubelet keeps unset until given (those it
//! accepts without acting on; see `states`).

use serde_json::{json, Map, Value};

use super::model::{KubeletConfiguration, API_VERSION, KIND};

/// Upstream's v1beta1 defaults of the fields the model leaves unset until given; fields
/// whose default is empty are left out, as upstream's `omitempty` leaves them out.
fn upstream_defaults() -> Value {
    json!({
        "registryPullQPS": 5,
        "registryBurst": 10,
        "eventRecordQPS": 50,
        "eventBurst": 100,
        "enableDebuggingHandlers": true,
        "streamingConnectionIdleTimeout": "4h0m0s",
        "imageMinimumGCAge": "2m0s",
        "imageMaximumGCAge": "0s",
        "imageGCHighThresholdPercent": 85,
        "imageGCLowThresholdPercent": 80,
        "volumeStatsAggPeriod": "1m0s",
        "cpuManagerPolicy": "none",
        "cpuManagerReconcilePeriod": "10s",
        "memoryManagerPolicy": "None",
        "topologyManagerPolicy": "none",
        "topologyManagerScope": "container",
        "hairpinMode": "promiscuous-bridge",
        "nodeStatusMaxImages": 50,
        "maxOpenFiles": 1_000_000,
        "contentType": "application/vnd.kubernetes.protobuf",
        "kubeAPIQPS": 50,
        "kubeAPIBurst": 100,
        "enableControllerAttachDetach": true,
        "makeIPTablesUtilChains": true,
        "iptablesMasqueradeBit": 14,
        "iptablesDropBit": 15,
        "containerLogMaxSize": "10Mi",
        "containerLogMaxFiles": 5,
        "containerLogMaxWorkers": 1,
        "containerLogMonitorInterval": "10s",
        "configMapAndSecretChangeDetectionStrategy": "Watch",
        "volumePluginDir": "/usr/libexec/kubernetes/kubelet-plugins/volume/exec/",
        "enableSystemLogHandler": true,
        "shutdownGracePeriod": "0s",
        "shutdownGracePeriodCriticalPods": "0s",
        "enableProfilingHandler": true,
        "enableDebugFlagsHandler": true,
        "memoryThrottlingFactor": 0.9,
        "localStorageCapacityIsolation": true,
        "memorySwap": {},
    })
}

/// The configuration with its kind and version and every default filled in.
pub fn configz_document(config: &KubeletConfiguration) -> Value {
    let mut document = match serde_json::to_value(config) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    };
    if let Value::Object(defaults) = upstream_defaults() {
        for (field, value) in defaults {
            document.entry(field).or_insert(value);
        }
    }
    document.insert("kind".into(), json!(KIND));
    document.insert("apiVersion".into(), json!(API_VERSION));
    Value::Object(document)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::config::states::FIELDS;

    #[test]
    fn every_default_is_a_known_field_and_a_given_value_wins() {
        let known: Vec<&str> = FIELDS.iter().map(|f| f.name).collect();
        let Value::Object(defaults) = upstream_defaults() else {
            panic!("an object");
        };
        for field in defaults.keys() {
            assert!(known.contains(&field.as_str()), "{field} is not a field");
        }
        let config = KubeletConfiguration {
            image_gc_high_threshold_percent: Some(90),
            ..KubeletConfiguration::default()
        };
        let document = configz_document(&config);
        assert_eq!(document["imageGCHighThresholdPercent"], json!(90));
        assert_eq!(document["imageGCLowThresholdPercent"], json!(80));
        assert_eq!(document["kind"], json!("KubeletConfiguration"));
        assert_eq!(document["readOnlyPort"], json!(0));
    }
}
