//! Every field of a Pod's `spec` that an API server from v1.26 to v1.37 can send, and what
//! rkubelet does with it: honoured (by what), not the kubelet's concern (the scheduler's, a
//! controller's or an admission plugin's), or refused. `docs/pod-fields.md` is generated
//! from this table; a test holds it against the schema (`docs/pod-fields.schema.json`,
//! written by `scripts/pod-field-schema.py`), so a field no row classifies fails it.
//!
//! A pod that carries a refused field with a value that matters, or a field this table does
//! not know (a newer API server's), is refused by the node ([`admit`]): nothing of it
//! runs, and it fails with upstream's admission reason for a pod needing what the node
//! lacks, naming each field and why. A field dropped without a word would let the user
//! believe the pod runs as written.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::Value;

use super::Pod;
use crate::domain::securitycontext::Rejection;

/// What rkubelet does with one field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Treatment {
    /// rkubelet acts on it; by what.
    Honoured(&'static str),
    /// Another component acts on it (the scheduler, a controller, an admission plugin);
    /// whose. It and everything under it.
    NotTheKubelets(&'static str),
    /// rkubelet cannot do what it asks: a pod with a value other than `allowed` (an
    /// empty value never matters) is refused. It and everything under it.
    Refused {
        why: &'static str,
        allowed: &'static [&'static str],
    },
    /// Refused where it is used: the pod waits, its `FailedMount` event naming the volume's
    /// plugin (`domain::volumes::plan`). It and everything under it.
    RefusedAtMount(&'static str),
}

impl Treatment {
    /// Whether the row covers the field's whole value, so no row is needed below it.
    pub fn covers_subtree(self) -> bool {
        !matches!(self, Treatment::Honoured(_))
    }
}

/// One field of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    /// The JSON name, with `[]` when the value is a list (`ports[]`).
    pub name: &'static str,
    pub treatment: Treatment,
    /// The fields of its value (of each item for a list). Empty for a scalar, a map, and a
    /// field whose treatment covers its whole value.
    pub fields: &'static [Field],
}

impl Field {
    fn key(&self) -> &'static str {
        self.name.trim_end_matches("[]")
    }
}

const fn honoured(name: &'static str, by: &'static str) -> Field {
    object(name, by, &[])
}

const fn object(name: &'static str, by: &'static str, fields: &'static [Field]) -> Field {
    Field {
        name,
        treatment: Treatment::Honoured(by),
        fields,
    }
}

const fn not_ours(name: &'static str, whose: &'static str) -> Field {
    Field {
        name,
        treatment: Treatment::NotTheKubelets(whose),
        fields: &[],
    }
}

const fn refused(name: &'static str, why: &'static str) -> Field {
    refused_unless(name, &[], why)
}

const fn refused_unless(
    name: &'static str,
    allowed: &'static [&'static str],
    why: &'static str,
) -> Field {
    Field {
        name,
        treatment: Treatment::Refused { why, allowed },
        fields: &[],
    }
}

const fn no_plugin(name: &'static str) -> Field {
    Field {
        name,
        treatment: Treatment::RefusedAtMount("no volume plugin for it: the pod waits"),
        fields: &[],
    }
}

const SCHEDULER: &str = "the scheduler's";
const NODE_AFFINITY: &str = "node admission (NodeAffinity)";
const DRA: &str = "dynamic resource allocation is not done: no claim is prepared";
const NEWER_USER: &str = "file ownership by user is not set";

const NODE_SELECTOR_REQUIREMENT: &[Field] = &[
    honoured("key", NODE_AFFINITY),
    honoured("operator", NODE_AFFINITY),
    honoured("values[]", NODE_AFFINITY),
];

const AFFINITY: &[Field] = &[
    object(
        "nodeAffinity",
        NODE_AFFINITY,
        &[
            not_ours(
                "preferredDuringSchedulingIgnoredDuringExecution[]",
                SCHEDULER,
            ),
            object(
                "requiredDuringSchedulingIgnoredDuringExecution",
                NODE_AFFINITY,
                &[object(
                    "nodeSelectorTerms[]",
                    NODE_AFFINITY,
                    &[
                        object(
                            "matchExpressions[]",
                            NODE_AFFINITY,
                            NODE_SELECTOR_REQUIREMENT,
                        ),
                        object("matchFields[]", NODE_AFFINITY, NODE_SELECTOR_REQUIREMENT),
                    ],
                )],
            ),
        ],
    ),
    not_ours("podAffinity", SCHEDULER),
    not_ours("podAntiAffinity", SCHEDULER),
];

const OBJECT_FIELD: &[Field] = &[
    honoured("apiVersion", "the downward API"),
    honoured("fieldPath", "the downward API"),
];

const RESOURCE_FIELD: &[Field] = &[
    honoured("containerName", "the downward API"),
    honoured("divisor", "the downward API"),
    honoured("resource", "the downward API"),
];

const KEY_REF: &[Field] = &[
    honoured("key", "environment from API objects"),
    honoured("name", "environment from API objects"),
    honoured("optional", "environment from API objects"),
];

const OPTIONAL_REF: &[Field] = &[
    honoured("name", "environment from API objects"),
    honoured("optional", "environment from API objects"),
];

const ENV: &[Field] = &[
    honoured("name", "the container's environment"),
    honoured("value", "the container's environment, $(VAR) expanded"),
    object(
        "valueFrom",
        "the container's environment",
        &[
            object("configMapKeyRef", "a ConfigMap key", KEY_REF),
            object("fieldRef", "the downward API", OBJECT_FIELD),
            refused(
                "fileKeyRef",
                "variables are not read from a file of a volume",
            ),
            object("resourceFieldRef", "the downward API", RESOURCE_FIELD),
            object("secretKeyRef", "a Secret key", KEY_REF),
        ],
    ),
];

const ENV_FROM: &[Field] = &[
    object("configMapRef", "every key of a ConfigMap", OPTIONAL_REF),
    honoured("prefix", "the variables' prefix"),
    object("secretRef", "every key of a Secret", OPTIONAL_REF),
];

const HTTP_HEADERS: &[Field] = &[
    honoured("name", "the request's headers"),
    honoured("value", "the request's headers"),
];

const HTTP_GET: &[Field] = &[
    honoured("host", "the request's host"),
    object("httpHeaders[]", "the request's headers", HTTP_HEADERS),
    honoured("path", "the request's path"),
    honoured("port", "the request's port (number or named port)"),
    refused("protocol", "the HTTP protocol version is not chosen"),
    honoured("scheme", "HTTP or HTTPS"),
];

const TCP_SOCKET: &[Field] = &[
    honoured("host", "the address dialled"),
    honoured("port", "the port dialled (number or named port)"),
];

const EXEC: &[Field] = &[honoured("command[]", "run in the container (CRI ExecSync)")];

const PROBE: &[Field] = &[
    object("exec", "an exec probe", EXEC),
    honoured("failureThreshold", "the prober"),
    object(
        "grpc",
        "a gRPC health check",
        &[
            refused("mode", "the gRPC health-check mode is not chosen"),
            honoured("port", "the port dialled"),
            honoured("service", "the service asked for"),
        ],
    ),
    object("httpGet", "an HTTP probe", HTTP_GET),
    honoured("initialDelaySeconds", "the prober"),
    honoured("periodSeconds", "the prober"),
    honoured("successThreshold", "the prober"),
    object("tcpSocket", "a TCP probe", TCP_SOCKET),
    honoured(
        "terminationGracePeriodSeconds",
        "the grace period of a kill the probe asks for",
    ),
    honoured("timeoutSeconds", "the prober"),
];

const HANDLER: &[Field] = &[
    object("exec", "an exec hook", EXEC),
    object("httpGet", "an HTTP hook", HTTP_GET),
    object(
        "sleep",
        "a sleep hook",
        &[honoured("seconds", "how long the hook sleeps")],
    ),
    object(
        "tcpSocket",
        "as upstream: a hook with only tcpSocket is not run and fails",
        TCP_SOCKET,
    ),
];

const SE_LINUX: &[Field] = &[
    honoured("level", "the CRI's SELinux label"),
    honoured("role", "the CRI's SELinux label"),
    honoured("type", "the CRI's SELinux label"),
    honoured("user", "the CRI's SELinux label"),
];

const PROFILE: &[Field] = &[
    honoured("localhostProfile", "the profile's file"),
    honoured("type", "the profile's kind"),
];

const WINDOWS: &[Field] = &[
    honoured(
        "gmsaCredentialSpec",
        "as upstream on Linux: Windows only, unused",
    ),
    honoured(
        "gmsaCredentialSpecName",
        "as upstream on Linux: Windows only, unused",
    ),
    refused_unless(
        "hostProcess",
        &["false"],
        "a Windows host-process container cannot run on Linux",
    ),
    honoured(
        "runAsUserName",
        "as upstream on Linux: Windows only, unused",
    ),
];

const CONTAINER_SECURITY: &[Field] = &[
    honoured("allowPrivilegeEscalation", "the CRI's no_new_privs"),
    object(
        "appArmorProfile",
        "the container's AppArmor profile",
        PROFILE,
    ),
    object(
        "capabilities",
        "the CRI's capabilities",
        &[
            honoured("add[]", "the CRI's capabilities"),
            honoured("drop[]", "the CRI's capabilities"),
        ],
    ),
    honoured("privileged", "a privileged container"),
    honoured("procMount", "the masked and read-only /proc paths"),
    honoured("readOnlyRootFilesystem", "a read-only root filesystem"),
    honoured("runAsGroup", "the container's group"),
    honoured("runAsNonRoot", "checked against the image's user"),
    honoured("runAsUser", "the container's user"),
    object(
        "seLinuxOptions",
        "the CRI's SELinux label (volumes are not relabelled)",
        SE_LINUX,
    ),
    object("seccompProfile", "the container's seccomp profile", PROFILE),
    object(
        "windowsOptions",
        "as upstream on Linux: Windows only",
        WINDOWS,
    ),
];

const PORTS: &[Field] = &[
    honoured("containerPort", "the sandbox's port mappings"),
    honoured("hostIP", "the sandbox's port mappings"),
    honoured(
        "hostPort",
        "the sandbox's port mappings, node admission (NodePorts)",
    ),
    honoured("name", "named ports of probes and hooks"),
    honoured("protocol", "the sandbox's port mappings"),
];

const VOLUME_DEVICES: &[Field] = &[
    honoured("devicePath", "the CRI device's container path"),
    honoured("name", "the claim's volume given"),
];

const VOLUME_MOUNTS: &[Field] = &[
    refused(
        "bindMountOptions[]",
        "bind-mount options are not given to the runtime",
    ),
    honoured("mountPath", "the CRI mount's container path"),
    honoured(
        "mountPropagation",
        "the CRI mount's propagation (Bidirectional for privileged containers only; the root directory is made rshared at start, as upstream's MakeRShared)",
    ),
    honoured("name", "the volume mounted"),
    honoured("readOnly", "a read-only CRI mount"),
    refused_unless(
        "recursiveReadOnly",
        &["Disabled"],
        "recursive read-only mounts are not asked of the runtime (only Disabled is supported)",
    ),
    honoured(
        "subPath",
        "a bind of the subpath, resolved inside the volume",
    ),
    honoured("subPathExpr", "a subpath with $(VAR) from the environment"),
];

const CONTAINER: &[Field] = &[
    honoured("args[]", "the container's command line"),
    honoured("command[]", "the container's command line"),
    object("env[]", "the container's environment", ENV),
    object("envFrom[]", "the container's environment", ENV_FROM),
    honoured("image", "pulled and run"),
    honoured("imagePullPolicy", "when the image is pulled"),
    object(
        "lifecycle",
        "lifecycle hooks",
        &[
            object("postStart", "the postStart hook", HANDLER),
            object("preStop", "the preStop hook", HANDLER),
            refused(
                "stopSignal",
                "the container is stopped with its image's signal, not this one",
            ),
        ],
    ),
    object("livenessProbe", "the liveness probe", PROBE),
    honoured("name", "the container's name"),
    object("ports[]", "the sandbox's port mappings", PORTS),
    object("readinessProbe", "the readiness probe", PROBE),
    object(
        "resizePolicy[]",
        "a change of resources restarts the container",
        &[
            honoured("resourceName", "the resource resized"),
            refused_unless(
                "restartPolicy",
                &["RestartContainer"],
                "resources are not resized in place: a resize restarts the container",
            ),
        ],
    ),
    object(
        "resources",
        "the container's cgroup limits and node admission",
        &[
            refused("claims[]", DRA),
            honoured(
                "limits",
                "the container's cgroup limits; extended resources of a device plugin: its devices",
            ),
            honoured(
                "requests",
                "the container's cgroup shares and node admission",
            ),
        ],
    ),
    honoured(
        "restartPolicy",
        "an init container with Always is a sidecar",
    ),
    refused(
        "restartPolicyRules[]",
        "per exit code restart rules are not followed",
    ),
    object(
        "securityContext",
        "the CRI's security context",
        CONTAINER_SECURITY,
    ),
    object("startupProbe", "the startup probe", PROBE),
    honoured("stdin", "the CRI's stdin (attach)"),
    honoured(
        "stdinOnce",
        "the CRI's stdin_once (stdin closed after the first attach)",
    ),
    honoured("terminationMessagePath", "the termination message file"),
    honoured(
        "terminationMessagePolicy",
        "the termination message (File or FallbackToLogsOnError)",
    ),
    honoured("tty", "the CRI's tty"),
    object(
        "volumeDevices[]",
        "the CRI devices (a claim's Block volume from its CSI driver)",
        VOLUME_DEVICES,
    ),
    object("volumeMounts[]", "the CRI mounts", VOLUME_MOUNTS),
    honoured("workingDir", "the container's working directory"),
];

/// The fields the API server's validation refuses for an ephemeral container
/// (`allowedEphemeralContainerFields`): the kubelet never sees them.
const NOT_FOR_EPHEMERAL: &str = "the API server's (refused for an ephemeral container)";

/// An ephemeral container: a container's fields, of which the API server lets through
/// only those that do not make it part of the workload, and its target.
const EPHEMERAL_CONTAINER: &[Field] = &[
    honoured("args[]", "the container's command line"),
    honoured("command[]", "the container's command line"),
    object("env[]", "the container's environment", ENV),
    object("envFrom[]", "the container's environment", ENV_FROM),
    honoured("image", "pulled and run"),
    honoured("imagePullPolicy", "when the image is pulled"),
    not_ours("lifecycle", NOT_FOR_EPHEMERAL),
    not_ours("livenessProbe", NOT_FOR_EPHEMERAL),
    honoured("name", "the container's name"),
    not_ours("ports[]", NOT_FOR_EPHEMERAL),
    not_ours("readinessProbe", NOT_FOR_EPHEMERAL),
    not_ours("resizePolicy[]", NOT_FOR_EPHEMERAL),
    not_ours("resources", NOT_FOR_EPHEMERAL),
    not_ours("restartPolicy", NOT_FOR_EPHEMERAL),
    not_ours("restartPolicyRules[]", NOT_FOR_EPHEMERAL),
    object(
        "securityContext",
        "the CRI's security context",
        CONTAINER_SECURITY,
    ),
    not_ours("startupProbe", NOT_FOR_EPHEMERAL),
    honoured("stdin", "the CRI's stdin (kubectl debug -i, attach)"),
    honoured(
        "stdinOnce",
        "the CRI's stdin_once (stdin closed after the first attach)",
    ),
    honoured(
        "targetContainerName",
        "the target container's process namespace (the CRI's TARGET)",
    ),
    honoured("terminationMessagePath", "the termination message file"),
    honoured(
        "terminationMessagePolicy",
        "the termination message (File or FallbackToLogsOnError)",
    ),
    honoured("tty", "the CRI's tty"),
    object(
        "volumeDevices[]",
        "the CRI devices (a claim's Block volume from its CSI driver)",
        VOLUME_DEVICES,
    ),
    object("volumeMounts[]", "the CRI mounts", VOLUME_MOUNTS),
    honoured("workingDir", "the container's working directory"),
];

const KEY_TO_PATH: &[Field] = &[
    honoured("key", "the key written"),
    honoured("mode", "the file's mode"),
    honoured("path", "the file's path"),
    refused("user", NEWER_USER),
];

const DOWNWARD_FILE: &[Field] = &[
    object("fieldRef", "the downward API", OBJECT_FIELD),
    honoured("mode", "the file's mode"),
    honoured("path", "the file's path"),
    object("resourceFieldRef", "the downward API", RESOURCE_FIELD),
    refused("user", NEWER_USER),
];

const PROJECTION_SOURCE: &[Field] = &[
    honoured("name", "the object read"),
    object("items[]", "the keys written", KEY_TO_PATH),
    honoured("optional", "a missing object is an empty volume"),
];

const SECRET_VOLUME: &[Field] = &[
    honoured("defaultMode", "the files' mode"),
    refused("defaultUser", NEWER_USER),
    object("items[]", "the keys written", KEY_TO_PATH),
    honoured("optional", "a missing Secret is an empty volume"),
    honoured("secretName", "the Secret read"),
];

const VOLUME: &[Field] = &[
    no_plugin("awsElasticBlockStore"),
    no_plugin("azureDisk"),
    no_plugin("azureFile"),
    no_plugin("cephfs"),
    no_plugin("cinder"),
    object(
        "configMap",
        "the ConfigMap's keys as files",
        &[
            honoured("defaultMode", "the files' mode"),
            refused("defaultUser", NEWER_USER),
            object("items[]", "the keys written", KEY_TO_PATH),
            honoured("name", "the ConfigMap read"),
            honoured("optional", "a missing ConfigMap is an empty volume"),
        ],
    ),
    object(
        "csi",
        "an inline volume its registered CSI driver publishes (its CSIDriver allowing Ephemeral)",
        &[
            honoured("driver", "the registered driver called"),
            honoured("fsType", "NodePublishVolume's fs type"),
            object(
                "nodePublishSecretRef",
                "the Secret sent as NodePublishVolume's secrets",
                &[honoured("name", "the Secret read")],
            ),
            honoured(
                "readOnly",
                "NodePublishVolume's readonly and every mount read-only",
            ),
            honoured("volumeAttributes", "NodePublishVolume's volume context"),
        ],
    ),
    object(
        "downwardAPI",
        "the pod's fields as files",
        &[
            honoured("defaultMode", "the files' mode"),
            refused("defaultUser", NEWER_USER),
            object("items[]", "the files written", DOWNWARD_FILE),
        ],
    ),
    object(
        "emptyDir",
        "a folder of the pod (tmpfs for Memory)",
        &[
            honoured("medium", "node disk, or tmpfs for Memory"),
            refused("mode", "the folder's mode is not set from the pod"),
            honoured("sizeLimit", "the tmpfs size and eviction"),
        ],
    ),
    object(
        "ephemeral",
        "the claim <pod>-<volume> the ephemeral volume controller makes, owned by the pod, as a persistentVolumeClaim",
        &[not_ours("volumeClaimTemplate", "the ephemeral volume controller's")],
    ),
    no_plugin("fc"),
    no_plugin("flexVolume"),
    no_plugin("flocker"),
    no_plugin("gcePersistentDisk"),
    no_plugin("gitRepo"),
    no_plugin("glusterfs"),
    object(
        "hostPath",
        "a folder or file of the node",
        &[
            honoured("path", "the node's path"),
            honoured("type", "checked, or created, before the mount"),
        ],
    ),
    no_plugin("image"),
    no_plugin("iscsi"),
    honoured("name", "the volume's name"),
    no_plugin("nfs"),
    object(
        "persistentVolumeClaim",
        "the bound PersistentVolume's hostPath or local path (other sources: the pod waits)",
        &[
            honoured("claimName", "the claim read, then its PersistentVolume"),
            honoured("readOnly", "every mount of it read-only"),
        ],
    ),
    no_plugin("photonPersistentDisk"),
    no_plugin("portworxVolume"),
    object(
        "projected",
        "several sources as files of one volume",
        &[
            honoured("defaultMode", "the files' mode"),
            refused("defaultUser", NEWER_USER),
            object(
                "sources[]",
                "the projected sources",
                &[
                    refused(
                        "clusterTrustBundle",
                        "ClusterTrustBundles are not projected",
                    ),
                    object("configMap", "a ConfigMap's keys", PROJECTION_SOURCE),
                    object(
                        "downwardAPI",
                        "the pod's fields",
                        &[object("items[]", "the files written", DOWNWARD_FILE)],
                    ),
                    refused("podCertificate", "pod certificates are not requested"),
                    object("secret", "a Secret's keys", PROJECTION_SOURCE),
                    object(
                        "serviceAccountToken",
                        "a bound token, refreshed (TokenRequest)",
                        &[
                            honoured("audience", "the token's audience"),
                            honoured("expirationSeconds", "the token's lifetime"),
                            honoured("path", "the token's file"),
                            refused("user", NEWER_USER),
                        ],
                    ),
                ],
            ),
        ],
    ),
    no_plugin("quobyte"),
    no_plugin("rbd"),
    no_plugin("scaleIO"),
    object("secret", "the Secret's keys as files", SECRET_VOLUME),
    no_plugin("storageos"),
    no_plugin("vsphereVolume"),
];

const POD_SECURITY: &[Field] = &[
    object(
        "appArmorProfile",
        "the containers' AppArmor profile",
        PROFILE,
    ),
    honoured("fsGroup", "volume ownership and the containers' groups"),
    honoured(
        "fsGroupChangePolicy",
        "OnRootMismatch skips the walk of a matching volume",
    ),
    honoured("runAsGroup", "the containers' group"),
    honoured("runAsNonRoot", "checked against the image's user"),
    honoured("runAsUser", "the containers' user"),
    refused(
        "seLinuxChangePolicy",
        "the SELinux relabelling policy is not followed",
    ),
    object(
        "seLinuxOptions",
        "the CRI's SELinux label (volumes are not relabelled)",
        SE_LINUX,
    ),
    object("seccompProfile", "the containers' seccomp profile", PROFILE),
    refused_unless(
        "supplementalGroupsPolicy",
        &["Merge"],
        "the image's groups are always merged (only Merge is supported)",
    ),
    honoured("supplementalGroups[]", "the containers' extra groups"),
    object(
        "sysctls[]",
        "the sandbox's sysctls, checked by admission (SysctlForbidden)",
        &[
            honoured("name", "the sysctl set"),
            honoured("value", "the sysctl's value"),
        ],
    ),
    object(
        "windowsOptions",
        "as upstream on Linux: Windows only",
        WINDOWS,
    ),
];

/// The table: the fields of a Pod's `spec`.
pub const POD_SPEC: &[Field] = &[
    honoured(
        "activeDeadlineSeconds",
        "the pod killed and Failed (DeadlineExceeded) once past it, from its startTime",
    ),
    object("affinity", NODE_AFFINITY, AFFINITY),
    not_ours(
        "automountServiceAccountToken",
        "the ServiceAccount admission plugin's (it adds the token volume)",
    ),
    object("containers[]", "run", CONTAINER),
    object(
        "dnsConfig",
        "merged into the sandbox's DNS configuration (upstream's appendDNSConfig)",
        &[
            honoured("nameservers[]", "the pod's resolv.conf, after its policy's"),
            object(
                "options[]",
                "the pod's resolv.conf options, replacing those of the same name",
                &[
                    honoured("name", "the option's name"),
                    honoured("value", "the option's value"),
                ],
            ),
            honoured(
                "searches[]",
                "the pod's resolv.conf search list, after its policy's",
            ),
        ],
    ),
    honoured("dnsPolicy", "the sandbox's DNS configuration"),
    honoured("enableServiceLinks", "service environment variables"),
    object(
        "ephemeralContainers[]",
        "started once in the running pod, never restarted",
        EPHEMERAL_CONTAINER,
    ),
    not_ours("evictionResponders[]", "the Eviction API's responders'"),
    object(
        "hostAliases[]",
        "the pod's /etc/hosts",
        &[
            honoured("hostnames[]", "the pod's /etc/hosts"),
            honoured("ip", "the pod's /etc/hosts"),
        ],
    ),
    honoured("hostIPC", "the sandbox's IPC namespace"),
    honoured("hostNetwork", "the sandbox's network namespace"),
    honoured("hostPID", "the sandbox's PID namespace"),
    honoured(
        "hostUsers",
        "false: the pod's own user namespace where the runtime handler supports one, else the sandbox fails with the reason",
    ),
    honoured("hostname", "the sandbox's hostname and /etc/hosts"),
    refused(
        "hostnameOverride",
        "the hostname override is not given to the sandbox",
    ),
    object(
        "imagePullSecrets[]",
        "credentials of the image pulls",
        &[honoured("name", "the Secret read")],
    ),
    object(
        "initContainers[]",
        "run in order before the containers",
        CONTAINER,
    ),
    honoured("nodeName", "node admission (NodeName)"),
    honoured("nodeSelector", NODE_AFFINITY),
    object(
        "os",
        "node admission",
        &[honoured(
            "name",
            "node admission: only linux runs (PodOSNotSupported)",
        )],
    ),
    honoured(
        "overhead",
        "admission, the pod's cgroup and the sandbox's resources",
    ),
    not_ours("preemptionPolicy", SCHEDULER),
    honoured(
        "priority",
        "critical pods (OOM score, eviction order and admission)",
    ),
    honoured("priorityClassName", "system-node-critical pods' OOM score"),
    object(
        "readinessGates[]",
        "the pod's Ready condition (ReadinessGatesNotReady until each gate's condition is True)",
        &[honoured(
            "conditionType",
            "the condition read from the pod's status",
        )],
    ),
    refused("resourceClaims[]", DRA),
    refused(
        "resources",
        "pod-level resources are not applied to the pod's cgroup",
    ),
    honoured("restartPolicy", "restarts of exited containers"),
    honoured(
        "runtimeClassName",
        "the sandbox's runtime handler, from the node.k8s.io/v1 RuntimeClass",
    ),
    not_ours("schedulerName", SCHEDULER),
    not_ours("schedulingGates[]", SCHEDULER),
    not_ours("schedulingGroup", SCHEDULER),
    object(
        "securityContext",
        "the CRI's security contexts",
        POD_SECURITY,
    ),
    not_ours(
        "serviceAccount",
        "the API server's (deprecated; copied to serviceAccountName)",
    ),
    honoured(
        "serviceAccountName",
        "the service account's tokens (TokenRequest)",
    ),
    honoured(
        "setHostnameAsFQDN",
        "the sandbox's hostname (the FQDN, at most 64 characters)",
    ),
    honoured("shareProcessNamespace", "the sandbox's PID namespace"),
    honoured("subdomain", "the pod's FQDN in /etc/hosts"),
    honoured(
        "terminationGracePeriodSeconds",
        "the grace period of a stop",
    ),
    object(
        "tolerations[]",
        "node admission (TaintToleration) and pressure admission",
        &[
            honoured("effect", "matched against the node's taints"),
            honoured("key", "matched against the node's taints"),
            honoured("operator", "matched against the node's taints"),
            not_ours("tolerationSeconds", "the taint eviction controller's"),
            honoured("value", "matched against the node's taints"),
        ],
    ),
    not_ours("topologySpreadConstraints[]", SCHEDULER),
    object("volumes[]", "set up before the containers", VOLUME),
    not_ours("workloadRef", SCHEDULER),
];

/// Upstream's admission reason for a pod that needs what the node does not have.
pub const REJECTION_REASON: &str = "PodFeatureUnsupported";

/// Why a field absent from the table is refused.
const UNKNOWN_FIELD: &str =
    "not a field rkubelet knows (newer than Kubernetes v1.37?): refused rather than ignored";

/// One field of a pod that makes the node refuse it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefusedField {
    /// With list indexes: `spec.containers[0].volumeMounts[1].mountPropagation`.
    pub path: String,
    pub why: String,
}

impl fmt::Display for RefusedField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.why)
    }
}

/// The fields of a Pod's `spec` document (as decoded, before any model drops a field)
/// that make the node refuse the pod, by path.
pub fn refused_fields(spec: &Value) -> Vec<RefusedField> {
    let mut out = Vec::new();
    walk(spec, POD_SPEC, "spec", &mut out);
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

/// Nulls, empty strings, lists and objects say nothing (Go's `omitempty`).
fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Array(items) => items.is_empty(),
        Value::Object(map) => map.is_empty(),
        Value::Bool(_) | Value::Number(_) => false,
    }
}

/// A scalar as the table's `allowed` values spell it: a string's text, `true`, `1`.
fn scalar_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        Value::Null | Value::Array(_) | Value::Object(_) => None,
    }
}

fn walk(value: &Value, fields: &[Field], path: &str, out: &mut Vec<RefusedField>) {
    let Some(map) = value.as_object() else {
        return;
    };
    for (key, value) in map {
        if is_empty(value) {
            continue;
        }
        // Most fields are honoured leaves: their path is never written.
        let here = || format!("{path}.{key}");
        let Some(field) = fields.iter().find(|f| f.key() == key.as_str()) else {
            out.push(RefusedField {
                path: here(),
                why: UNKNOWN_FIELD.to_owned(),
            });
            continue;
        };
        match field.treatment {
            Treatment::Honoured(_) if field.fields.is_empty() => {}
            Treatment::Honoured(_) => match value {
                Value::Array(items) => {
                    let here = here();
                    for (i, item) in items.iter().enumerate() {
                        walk(item, field.fields, &format!("{here}[{i}]"), out);
                    }
                }
                _ => walk(value, field.fields, &here(), out),
            },
            Treatment::NotTheKubelets(_) | Treatment::RefusedAtMount(_) => {}
            Treatment::Refused { why, allowed } => {
                if let Some(why) = refusal(value, why, allowed) {
                    out.push(RefusedField { path: here(), why });
                }
            }
        }
    }
}

/// Why `value` of a refused field is refused; `None` for an allowed value.
fn refusal(value: &Value, why: &str, allowed: &[&str]) -> Option<String> {
    if allowed.is_empty() {
        return Some(why.to_owned());
    }
    let text = scalar_text(value);
    if text.as_deref().is_some_and(|t| allowed.contains(&t)) {
        return None;
    }
    Some(format!("{value}: {why}"))
}

/// Whether the node can run the pod as written: a refusal naming every refused field.
pub fn admit(pod: &Pod) -> Result<(), Rejection> {
    let refused = &pod.spec.refused_fields;
    if refused.is_empty() {
        return Ok(());
    }
    let fields: Vec<String> = refused.iter().map(ToString::to_string).collect();
    Err(Rejection {
        reason: REJECTION_REASON.to_owned(),
        message: format!(
            "Pod requires node features that are not available: {}",
            fields.join("; ")
        ),
    })
}

/// The treatment of a schema path (`spec.containers[].ports[].hostPort`): its row's, or
/// the nearest ancestor's that covers its whole value; `None` when no row classifies it.
pub fn treatment_of(path: &str) -> Option<Treatment> {
    let mut segments = path.split('.');
    if segments.next() != Some("spec") {
        return None;
    }
    let mut fields = POD_SPEC;
    let mut found = None;
    for segment in segments {
        if found.is_some_and(Treatment::covers_subtree) {
            return found;
        }
        let field = fields.iter().find(|f| f.name == segment)?;
        found = Some(field.treatment);
        fields = field.fields;
    }
    found
}

/// Every row of the table, as `(path, treatment)`, in table order.
pub fn rows() -> Vec<(String, Treatment)> {
    fn add(fields: &[Field], path: &str, out: &mut Vec<(String, Treatment)>) {
        for field in fields {
            let here = format!("{path}.{}", field.name);
            out.push((here.clone(), field.treatment));
            add(field.fields, &here, out);
        }
    }
    let mut out = Vec::new();
    add(POD_SPEC, "spec", &mut out);
    out
}

/// `docs/pod-fields.md`: every row, with the first version known to have the field
/// (`since`, from the schema: path → version).
pub fn markdown_table(since: &BTreeMap<String, String>) -> String {
    let rows = rows();
    let count = |pick: fn(&Treatment) -> bool| rows.iter().filter(|(_, t)| pick(t)).count();
    let mut out = String::new();
    out.push_str("# Pod fields\n\n");
    out.push_str(
        "Generated from `src/domain/pod/fields.rs`; do not edit by hand. Regenerate with \
         `UPDATE_POD_FIELDS=1 cargo test --test integration pod_fields`.\n\n",
    );
    out.push_str(
        "Every field of a Pod's `spec` that an API server from Kubernetes 1.26 to 1.37 can send \
         (`docs/pod-fields.schema.json`, written by `scripts/pod-field-schema.py`) is in one state:\n\n\
         - **honoured**: rkubelet acts on it (the row says by what).\n\
         - **not the kubelet's**: the scheduler, a controller or an admission plugin acts on it; \
         so does upstream's kubelet leave it.\n\
         - **refused**: rkubelet cannot do what it asks. A pod carrying it with a value that matters \
         (anything but an empty value or the values listed) is refused by the node: nothing of it runs, \
         it fails with reason `PodFeatureUnsupported`, a warning event, and a message naming each such \
         field and why.\n\
         - **refused at mount**: a volume of a plugin rkubelet does not have; the pod waits, \
         its `FailedMount` event naming the plugin.\n\n\
         A field under a row that is not honoured shares that row's state. A field in a pod that this \
         table does not know (a newer API server's) is refused too, its path named.\n\n",
    );
    out.push_str(&format!(
        "Rows: {} honoured, {} not the kubelet's, {} refused, {} refused at mount.\n\n",
        count(|t| matches!(t, Treatment::Honoured(_))),
        count(|t| matches!(t, Treatment::NotTheKubelets(_))),
        count(|t| matches!(t, Treatment::Refused { .. })),
        count(|t| matches!(t, Treatment::RefusedAtMount(_))),
    ));
    out.push_str(
        "## Refused\n\n| Field | Allowed values | Why | Since |\n| --- | --- | --- | --- |\n",
    );
    for (path, treatment) in &rows {
        if let Treatment::Refused { why, allowed } = treatment {
            let allowed = if allowed.is_empty() {
                "(none)".to_owned()
            } else {
                allowed
                    .iter()
                    .map(|a| format!("`{a}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            out.push_str(&format!(
                "| `{path}` | {allowed} | {why} | {} |\n",
                since_of(since, path)
            ));
        }
    }
    out.push_str("\n## Every field\n\n| Field | State | By what, whose or why | Since |\n| --- | --- | --- | --- |\n");
    for (path, treatment) in &rows {
        let (state, text) = match treatment {
            Treatment::Honoured(by) => ("honoured", *by),
            Treatment::NotTheKubelets(whose) => ("not the kubelet's", *whose),
            Treatment::Refused { why, .. } => ("refused", *why),
            Treatment::RefusedAtMount(why) => ("refused at mount", *why),
        };
        out.push_str(&format!(
            "| `{path}` | {state} | {text} | {} |\n",
            since_of(since, path)
        ));
    }
    out
}

fn since_of<'a>(since: &'a BTreeMap<String, String>, path: &str) -> &'a str {
    since.get(path).map_or("", String::as_str)
}

#[cfg(test)]
mod tests;
