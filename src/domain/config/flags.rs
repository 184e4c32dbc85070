//! The command line, as one table: every flag, the configuration field (or flag-only
//! option) it sets, and how its text becomes a value. The CLI is built from this table
//! and the README's flag list is generated from it, so the three cannot drift.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::error::ConfigError;
use super::options::DEFAULT_POD_SANDBOX_IMAGE;
use crate::domain::eviction;
use crate::domain::node::reserved;
use crate::domain::units::duration::GoDuration;
use crate::domain::units::quantity::Quantity;

/// What rkubelet does with a flag or field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum State {
    /// It works as upstream documents.
    Implemented,
    /// Parsed and type-checked; when given, start-up warns and runs without it.
    NotImplemented,
    /// Accepted only with values that ask for nothing unsafe; otherwise start-up fails.
    Refused,
}

impl State {
    pub fn label(self) -> &'static str {
        match self {
            State::Implemented => "implemented",
            State::NotImplemented => "accepted, not implemented",
            State::Refused => "refused when unsafe",
        }
    }
}

/// How a flag's text becomes a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlagKind {
    Str,
    /// Go's `strconv.ParseBool` spellings; `--flag` alone means true.
    Bool,
    Int,
    Duration,
    /// `signal<value,...` (eviction thresholds).
    LessThanMap,
    /// `key=value,...` with string values (grace periods, minimum reclaim, reserved).
    EqualsMap,
    /// `key=value,...` with `key` and the values kept as given, comma-separated list.
    List,
    /// `Name=true,Other=false`.
    FeatureGates,
    /// `key=value:Effect,key:Effect`.
    Taints,
    /// `key:value,...` into a map of lists (`--manifest-url-header`); repeats add values.
    ColonMultiMap,
    /// `node:type=quantity,...;node:...` into `reservedMemory`'s list; repeats add nodes.
    ReservedMemory,
}

/// Where a flag's value goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// A `KubeletConfiguration` field, by its path of upstream names.
    Config(&'static [&'static str]),
    /// An option that exists only on the command line.
    FlagOnly,
}

#[derive(Debug, Clone, Copy)]
pub struct FlagSpec {
    pub name: &'static str,
    pub short: Option<char>,
    pub kind: FlagKind,
    pub target: Target,
    /// The default shown in `--help` for flag-only options (config-backed flags show the
    /// configuration's default).
    pub flag_default: &'static str,
    pub help: &'static str,
    /// What rkubelet does with it; see `states`.
    pub state: State,
    /// Upstream's deprecation notice (the `MarkDeprecated` text), printed when given.
    pub deprecated: Option<&'static str>,
}

/// The notice upstream gives every flag that sets a `KubeletConfiguration` field.
pub const CONFIG_FLAG_DEPRECATED: &str = "This parameter should be set via the config file specified by the Kubelet's --config flag. See https://kubernetes.io/docs/tasks/administer-cluster/kubelet-config-file/ for more information.";
const CADVISOR_DEPRECATED: &str = "This is a cadvisor flag that was mistakenly registered with the Kubelet. Due to legacy concerns, it will follow the standard CLI deprecation timeline before being removed.";
const GC_DEPRECATED: &str =
    "Use --eviction-hard or --eviction-soft instead. Will be removed in a future version.";

impl FlagSpec {
    /// Accepted and type-checked, not acted on: warned about at start-up.
    const fn ni(mut self) -> Self {
        self.state = State::NotImplemented;
        self
    }

    /// Refused when its value asks for something rkubelet cannot do safely.
    const fn refused(mut self) -> Self {
        self.state = State::Refused;
        self
    }

    const fn deprecated(mut self, notice: &'static str) -> Self {
        self.deprecated = Some(notice);
        self
    }

    /// Not deprecated upstream, or rkubelet's own flag.
    const fn current(mut self) -> Self {
        self.deprecated = None;
        self
    }
}

const fn cfg(
    name: &'static str,
    kind: FlagKind,
    path: &'static [&'static str],
    help: &'static str,
) -> FlagSpec {
    FlagSpec {
        name,
        short: None,
        kind,
        target: Target::Config(path),
        flag_default: "",
        help,
        state: State::Implemented,
        deprecated: Some(CONFIG_FLAG_DEPRECATED),
    }
}

const fn opt(
    name: &'static str,
    kind: FlagKind,
    flag_default: &'static str,
    help: &'static str,
) -> FlagSpec {
    FlagSpec {
        name,
        short: None,
        kind,
        target: Target::FlagOnly,
        flag_default,
        help,
        state: State::Implemented,
        deprecated: None,
    }
}

use FlagKind::*;

/// Every flag rkubelet knows (upstream's, Kubernetes 1.26 to 1.36, and rkubelet's own),
/// in the order `--help` lists them within each state.
pub const FLAGS: &[FlagSpec] = &[
    // Command-line-only options.
    opt("config", Str, "", "Path to a KubeletConfiguration file (YAML, JSON or TOML). Flags given on the command line override its values."),
    opt("config-dir", Str, "", "Folder of drop-in configuration files (*.conf), merged in name order over --config."),
    opt("kubeconfig", Str, "", "Path to a kubeconfig for the API server: connected mode (without it rkubelet runs standalone)."),
    opt("bootstrap-kubeconfig", Str, "", "Path to a kubeconfig used to obtain a client certificate (TLS bootstrap); the result is written to --kubeconfig."),
    opt("cert-dir", Str, "/var/lib/kubelet/pki", "Folder of the kubelet's TLS certificates (the client certificate from TLS bootstrap and its rotations)."),
    opt("hostname-override", Str, "", "Use this name as the node name instead of the hostname (trimmed, lower-cased)."),
    opt("node-ip", Str, "", "IP addresses of the node, comma-separated (the InternalIP addresses of its status)."),
    opt("root-dir", Str, "/var/lib/kubelet", "Directory for the kubelet's files."),
    opt("lock-file", Str, "", "Path to a lock file the kubelet holds while it runs."),
    opt("exit-on-lock-contention", Bool, "false", "Exit when another process opens the lock file."),
    opt("runonce", Bool, "false", "Start the static pods once, then exit; the API server and HTTP server are not used.").deprecated(CONFIG_FLAG_DEPRECATED),
    opt("node-labels", Str, "", "Labels to add when registering the node, key=value pairs separated by commas."),
    opt("dry-run", Bool, "false", "Print what rkubelet would do with this configuration, change nothing, and exit."),
    opt("dry-run-output", Str, "text", "Format of the --dry-run plan: text or json."),
    opt("cpu-weight-curve", Str, "quadratic", "How cgroup v2 cpu.weight is derived from cpu shares for the kubelet's cgroups: quadratic (what runc >= 1.3.2 and crun >= 1.23 write for containers) or linear (older runc and kubelets)."),
    opt("dry-run-snapshot", Str, "", "Plan against this recorded node state (TOML or JSON) instead of the live runtime."),
    opt("cloud-provider", Str, "", "The provider for cloud services; empty or external.").ni(),
    opt("cloud-config", Str, "", "Path to the cloud provider configuration file.").ni().deprecated("will be removed in 1.25 or later, in favor of removing cloud provider code from Kubelet."),
    opt("container-runtime", Str, "remote", "The container runtime to use; only remote exists.").ni().deprecated("will be removed in 1.27 as the only valid value is 'remote'"),
    opt("runtime-cgroups", Str, "", "Cgroup the container runtime is expected to run in.").ni(),
    opt("pod-infra-container-image", Str, DEFAULT_POD_SANDBOX_IMAGE, "Specified image will not be pruned by the image garbage collector. CRI implementations have their own configuration to set this image.").deprecated("will be removed in 1.27. Image garbage collector will get sandbox image information from CRI."),
    opt("image-credential-provider-config", Str, "", "Credential provider plugin configuration file or folder.").ni(),
    opt("image-credential-provider-bin-dir", Str, "", "Folder of credential provider plugin binaries.").ni(),
    opt("azure-container-registry-config", Str, "", "Azure container registry configuration file.").ni().deprecated("Use --image-credential-provider-config and --image-credential-provider-bin-dir to setup acr credential provider instead. Will be removed in a future release."),
    opt("master-service-namespace", Str, "default", "Namespace whose master services are injected into pods.").ni().deprecated("This flag will be removed in a future version."),
    opt("minimum-container-ttl-duration", Duration, "0s", "Minimum age of a finished container before garbage collection.").ni().deprecated(GC_DEPRECATED),
    opt("maximum-dead-containers-per-container", Int, "1", "Old instances kept per container.").ni().deprecated(GC_DEPRECATED),
    opt("maximum-dead-containers", Int, "-1", "Old container instances kept in all.").ni().deprecated(GC_DEPRECATED),
    opt("register-schedulable", Bool, "true", "Register the node as schedulable.").deprecated("will be removed in a future version"),
    opt("keep-terminated-pod-volumes", Bool, "false", "Keep terminated pods' volumes mounted.").ni().deprecated("will be removed in a future version"),
    opt("experimental-mounter-path", Str, "", "Path of the mount binary.").ni().deprecated("will be removed in 1.25 or later. in favor of using CSI."),
    opt("experimental-allocatable-ignore-eviction", Bool, "false", "Leave hard eviction thresholds out of node allocatable.").ni().deprecated("will be removed in 1.25 or later."),
    // Flags that set a KubeletConfiguration field.
    cfg("pod-manifest-path", Str, &["staticPodPath"], "Path to a static pod manifest file or a folder of them."),
    cfg("manifest-url", Str, &["staticPodURL"], "URL to fetch static pod manifests from."),
    cfg("manifest-url-header", ColonMultiMap, &["staticPodURLHeader"], "HTTP headers for --manifest-url, key:value pairs separated by commas; may repeat."),
    cfg("file-check-frequency", Duration, &["fileCheckFrequency"], "How often the manifest path is re-read."),
    cfg("http-check-frequency", Duration, &["httpCheckFrequency"], "How often the manifest URL is re-read."),
    cfg("sync-frequency", Duration, &["syncFrequency"], "Longest time between syncs of a running pod."),
    cfg("container-runtime-endpoint", Str, &["containerRuntimeEndpoint"], "CRI endpoint: unix:///path/to/socket, or fake:// for the embedded simulated runtime."),
    cfg("image-service-endpoint", Str, &["imageServiceEndpoint"], "CRI image service endpoint; the runtime endpoint when empty."),
    cfg("runtime-request-timeout", Duration, &["runtimeRequestTimeout"], "Timeout of every runtime request except long-running ones."),
    cfg("pod-logs-dir", Str, &["podLogsDir"], "Folder of pod logs (rkubelet's flag; upstream has the field only).").current(),
    cfg("cgroup-driver", Str, &["cgroupDriver"], "Driver used to manage cgroups: cgroupfs or systemd."),
    cfg("cgroup-root", Str, &["cgroupRoot"], "Root cgroup for pods."),
    cfg("cgroups-per-qos", Bool, &["cgroupsPerQOS"], "Create the QoS cgroup hierarchy (kubepods, burstable, besteffort)."),
    cfg("kube-reserved", EqualsMap, &["kubeReserved"], "Resources reserved for Kubernetes components: cpu, memory, ephemeral-storage, pid (e.g. cpu=200m,memory=500Mi)."),
    cfg("system-reserved", EqualsMap, &["systemReserved"], "Resources reserved for system daemons: cpu, memory, ephemeral-storage, pid."),
    cfg("reserved-cpus", Str, &["reservedSystemCPUs"], "CPUs reserved for system and Kubernetes daemons (e.g. 0-1,6); overrides the cpu of --system-reserved and --kube-reserved."),
    cfg("enforce-node-allocatable", List, &["enforceNodeAllocatable"], "Levels of node allocatable to enforce: pods, system-reserved, kube-reserved, their -compressible forms, or none."),
    cfg("eviction-hard", LessThanMap, &["evictionHard"], "Hard eviction thresholds (e.g. memory.available<1Gi), subtracted from node allocatable. Replaces the defaults unless mergeDefaultEvictionSettings is true."),
    cfg("healthz-bind-address", Str, &["healthzBindAddress"], "Address of the healthz server."),
    cfg("healthz-port", Int, &["healthzPort"], "Port of the healthz server; 0 disables it."),
    cfg("oom-score-adj", Int, &["oomScoreAdj"], "OOM score adjustment of the kubelet process, in [-1000, 1000]."),
    cfg("feature-gates", FeatureGates, &["featureGates"], "Feature gates, Name=true|false pairs separated by commas; merged key by key over the file's."),
    cfg("max-pods", Int, &["maxPods"], "Most pods this node runs."),
    cfg("pod-max-pids", Int, &["podPidsLimit"], "Most processes per pod (pids.max of each pod cgroup); -1 is unlimited."),
    cfg("pod-pids-limit", Int, &["podPidsLimit"], "Same as --pod-max-pids, named after the podPidsLimit field (rkubelet's flag).").current(),
    cfg("cpu-cfs-quota", Bool, &["cpuCFSQuota"], "Enforce CPU limits with CFS quota."),
    cfg("cpu-cfs-quota-period", Duration, &["cpuCFSQuotaPeriod"], "CFS quota period (needs the CustomCPUCFSQuotaPeriod feature gate to change)."),
    cfg("cluster-domain", Str, &["clusterDomain"], "Cluster DNS domain added to pods' search paths."),
    cfg("cluster-dns", List, &["clusterDNS"], "DNS server addresses given to pods."),
    cfg("resolv-conf", Str, &["resolvConf"], "Resolver configuration file pods with the Default DNS policy inherit; empty disables it."),
    cfg("logging-format", Str, &["logging", "format"], "Log format: text or json."),
    cfg("log-flush-frequency", Duration, &["logging", "flushFrequency"], "Longest time between log flushes.").current(),
    FlagSpec {
        name: "v",
        short: Some('v'),
        kind: Int,
        target: Target::Config(&["logging", "verbosity"]),
        flag_default: "",
        help: "Log verbosity: 0-1 info, 2-4 debug, 5 and more trace.",
        state: State::Implemented,
        deprecated: None,
    },
    // Config-backed flags rkubelet accepts without acting on them.
    cfg("enable-server", Bool, &["enableServer"], "Serve the kubelet's API (port, 10250)."),
    cfg("address", Str, &["address"], "Address the kubelet's API serves on."),
    cfg("port", Int, &["port"], "Port the kubelet's API serves on (TLS)."),
    cfg("read-only-port", Int, &["readOnlyPort"], "Port of the unauthenticated read-only API; 0 (the default here) disables it."),
    cfg("anonymous-auth", Bool, &["authentication", "anonymous", "enabled"], "Allow anonymous requests to the kubelet's API (default false in rkubelet)."),
    cfg("authentication-token-webhook", Bool, &["authentication", "webhook", "enabled"], "Authenticate bearer tokens with the TokenReview API."),
    cfg("authentication-token-webhook-cache-ttl", Duration, &["authentication", "webhook", "cacheTTL"], "How long webhook authentication answers are cached."),
    cfg("client-ca-file", Str, &["authentication", "x509", "clientCAFile"], "CA bundle for client certificates."),
    cfg("authorization-mode", Str, &["authorization", "mode"], "Authorization mode of the kubelet's API: AlwaysAllow or Webhook."),
    cfg("authorization-webhook-cache-authorized-ttl", Duration, &["authorization", "webhook", "cacheAuthorizedTTL"], "How long 'authorized' webhook answers are cached."),
    cfg("authorization-webhook-cache-unauthorized-ttl", Duration, &["authorization", "webhook", "cacheUnauthorizedTTL"], "How long 'unauthorized' webhook answers are cached."),
    cfg("tls-cert-file", Str, &["tlsCertFile"], "Serving certificate."),
    cfg("tls-private-key-file", Str, &["tlsPrivateKeyFile"], "Serving certificate's key."),
    cfg("rotate-server-certificates", Bool, &["serverTLSBootstrap"], "Request and rotate serving certificates from the API server."),
    cfg("tls-cipher-suites", List, &["tlsCipherSuites"], "Cipher suites of the kubelet's API server."),
    cfg("tls-min-version", Str, &["tlsMinVersion"], "Minimum TLS version of the kubelet's API server."),
    cfg("rotate-certificates", Bool, &["rotateCertificates"], "Rotate the client certificate."),
    cfg("registry-qps", Int, &["registryPullQPS"], "Image pulls per second; 0 is unlimited.").ni(),
    cfg("registry-burst", Int, &["registryBurst"], "Burst of image pulls.").ni(),
    cfg("event-qps", Int, &["eventRecordQPS"], "Events created per second; 0 for no limit."),
    cfg("event-burst", Int, &["eventBurst"], "Burst of events."),
    cfg("enable-debugging-handlers", Bool, &["enableDebuggingHandlers"], "Serve logs, exec and attach endpoints."),
    cfg("contention-profiling", Bool, &["enableContentionProfiling"], "Block profiling, when profiling is on.").ni(),
    cfg("volume-plugin-dir", Str, &["volumePluginDir"], "Folder of third-party (flexvolume) volume plugins.").ni(),
    cfg("streaming-connection-idle-timeout", Duration, &["streamingConnectionIdleTimeout"], "Idle time before a streaming connection closes.").ni(),
    cfg("node-status-update-frequency", Duration, &["nodeStatusUpdateFrequency"], "How often node status is computed and posted when it changed."),
    cfg("minimum-image-ttl-duration", Duration, &["imageMinimumGCAge"], "Minimum age of an unused image before garbage collection."),
    cfg("image-gc-high-threshold", Int, &["imageGCHighThresholdPercent"], "Disk usage percent above which image garbage collection always runs."),
    cfg("image-gc-low-threshold", Int, &["imageGCLowThresholdPercent"], "Disk usage percent image garbage collection frees down to."),
    cfg("volume-stats-agg-period", Duration, &["volumeStatsAggPeriod"], "How often volume disk usage is computed.").ni(),
    cfg("kubelet-cgroups", Str, &["kubeletCgroups"], "Cgroup to run the kubelet in.").ni(),
    cfg("system-cgroups", Str, &["systemCgroups"], "Cgroup for non-kernel processes not yet in a cgroup.").ni(),
    cfg("provider-id", Str, &["providerID"], "The node's identifier in the machine database.").current(),
    cfg("kube-reserved-cgroup", Str, &["kubeReservedCgroup"], "Cgroup of the Kubernetes node components, for kube-reserved enforcement.").ni(),
    cfg("system-reserved-cgroup", Str, &["systemReservedCgroup"], "Cgroup of the system daemons, for system-reserved enforcement.").ni(),
    cfg("qos-reserved", EqualsMap, &["qosReserved"], "Percentage of memory requests reserved per QoS tier (e.g. memory=50%).").ni(),
    cfg("cpu-manager-policy", Str, &["cpuManagerPolicy"], "CPU manager policy: none or static."),
    cfg("cpu-manager-policy-options", EqualsMap, &["cpuManagerPolicyOptions"], "CPU manager policy options, key=value pairs."),
    cfg("cpu-manager-reconcile-period", Duration, &["cpuManagerReconcilePeriod"], "CPU manager reconciliation period."),
    cfg("memory-manager-policy", Str, &["memoryManagerPolicy"], "Memory manager policy: None or Static. Refused when Static: rkubelet has no memory manager.").refused(),
    cfg("reserved-memory", ReservedMemory, &["reservedMemory"], "Memory reserved per NUMA node (e.g. 0:memory=1Gi,hugepages-1M=2Gi). Refused when given: rkubelet has no memory manager.").refused(),
    cfg("topology-manager-policy", Str, &["topologyManagerPolicy"], "Topology manager policy: none, best-effort, restricted or single-numa-node."),
    cfg("topology-manager-scope", Str, &["topologyManagerScope"], "Topology manager scope: container or pod."),
    cfg("topology-manager-policy-options", EqualsMap, &["topologyManagerPolicyOptions"], "Topology manager policy options, key=value pairs."),
    cfg("hairpin-mode", Str, &["hairpinMode"], "Hairpin NAT setup: promiscuous-bridge, hairpin-veth or none.").ni(),
    cfg("pod-cidr", Str, &["podCIDR"], "Pod IP range in standalone mode.").ni(),
    cfg("enable-controller-attach-detach", Bool, &["enableControllerAttachDetach"], "Let the attach/detach controller manage volumes.").ni(),
    cfg("make-iptables-util-chains", Bool, &["makeIPTablesUtilChains"], "Ensure the iptables utility chains exist; rkubelet creates none.").ni(),
    cfg("iptables-masquerade-bit", Int, &["iptablesMasqueradeBit"], "Has no effect upstream either.").ni().deprecated("This flag has no effect and will be removed in a future version."),
    cfg("iptables-drop-bit", Int, &["iptablesDropBit"], "Has no effect upstream either.").ni().deprecated("This flag has no effect and will be removed in a future version."),
    cfg("container-log-max-size", Str, &["containerLogMaxSize"], "Size at which a container log is rotated (e.g. 10Mi)."),
    cfg("container-log-max-files", Int, &["containerLogMaxFiles"], "Log files kept per container (at least 2)."),
    cfg("allowed-unsafe-sysctls", List, &["allowedUnsafeSysctls"], "Unsafe sysctls (or patterns ending in *) pods may set; each must be known to be namespaced."),
    cfg("seccomp-default", Bool, &["seccompDefault"], "Use the RuntimeDefault seccomp profile for containers that name none (Unconfined otherwise, as upstream v1.26).").current(),
    cfg("node-status-max-images", Int, &["nodeStatusMaxImages"], "Most images reported in node status; -1 is no cap."),
    cfg("kernel-memcg-notification", Bool, &["kernelMemcgNotification"], "Kernel memcg notifications for memory eviction (cgroup v1); on unless set to false (upstream: off)."),
    cfg("local-storage-capacity-isolation", Bool, &["localStorageCapacityIsolation"], "Local ephemeral storage isolation."),
    cfg("max-open-files", Int, &["maxOpenFiles"], "Files the kubelet process may open.").ni(),
    cfg("kube-api-content-type", Str, &["contentType"], "Content type of requests to the API server.").ni(),
    cfg("kube-api-qps", Int, &["kubeAPIQPS"], "Requests per second to the API server."),
    cfg("kube-api-burst", Int, &["kubeAPIBurst"], "Burst of requests to the API server."),
    cfg("serialize-image-pulls", Bool, &["serializeImagePulls"], "Pull one image at a time.").ni(),
    cfg("max-parallel-image-pulls", Int, &["maxParallelImagePulls"], "Most image pulls at once (rkubelet's flag; upstream has the field only).").ni().current(),
    cfg("eviction-soft", LessThanMap, &["evictionSoft"], "Soft eviction thresholds (e.g. memory.available<1.5Gi); each needs a grace period."),
    cfg("eviction-soft-grace-period", EqualsMap, &["evictionSoftGracePeriod"], "Grace periods of the soft thresholds (e.g. memory.available=1m30s)."),
    cfg("eviction-minimum-reclaim", EqualsMap, &["evictionMinimumReclaim"], "Least amount to reclaim once eviction starts (e.g. imagefs.available=2Gi)."),
    cfg("eviction-pressure-transition-period", Duration, &["evictionPressureTransitionPeriod"], "How long to wait before leaving an eviction pressure condition."),
    cfg("eviction-max-pod-grace-period", Int, &["evictionMaxPodGracePeriod"], "Longest grace period given to pods evicted on a soft threshold."),
    cfg("pods-per-core", Int, &["podsPerCore"], "Most pods per core; 0 disables the limit.").ni(),
    cfg("fail-cgroupv1", Bool, &["failCgroupV1"], "Refuse to start on a cgroup v1 host.").ni().current(),
    cfg("fail-swap-on", Bool, &["failSwapOn"], "Refuse to start when swap is on.").ni(),
    cfg("register-node", Bool, &["registerNode"], "Register the node with the API server."),
    cfg("register-with-taints", Taints, &["registerWithTaints"], "Taints to register the node with (key=value:Effect, comma-separated)."),
    opt(
        "vmodule",
        Str,
        "",
        "comma-separated list of pattern=N settings for file-filtered logging (only works for text log format)",
    ),
    opt("log-json-split-stream", Bool, "false", "JSON logs: info to stdout, errors to stderr.").ni().deprecated(CONFIG_FLAG_DEPRECATED),
    opt("log-json-info-buffer-size", Str, "0", "JSON logs: size of the info stream's buffer.").ni().deprecated(CONFIG_FLAG_DEPRECATED),
    opt("log-text-split-stream", Bool, "false", "Text logs: info to stdout, errors to stderr.").ni().deprecated(CONFIG_FLAG_DEPRECATED),
    opt("log-text-info-buffer-size", Str, "0", "Text logs: size of the info stream's buffer.").ni().deprecated(CONFIG_FLAG_DEPRECATED),
    opt("housekeeping-interval", Duration, "10s", "How often the eviction manager observes the node (upstream: cAdvisor's housekeeping; its eviction manager runs every 10s)."),
    opt("application-metrics-count-limit", Int, "100", "cAdvisor: application metrics stored per container.").ni().deprecated(CADVISOR_DEPRECATED),
    opt("boot-id-file", Str, "/proc/sys/kernel/random/boot_id", "cAdvisor: files to read the boot id from.").ni().deprecated(CADVISOR_DEPRECATED),
    opt("container-hints", Str, "/etc/cadvisor/container_hints.json", "cAdvisor: container hints file.").ni().deprecated(CADVISOR_DEPRECATED),
    opt("containerd", Str, "/run/containerd/containerd.sock", "cAdvisor: containerd endpoint.").ni().deprecated(CADVISOR_DEPRECATED),
    opt("containerd-namespace", Str, "k8s.io", "cAdvisor: containerd namespace.").ni().deprecated(CADVISOR_DEPRECATED),
    opt("enable-load-reader", Bool, "false", "cAdvisor: CPU load reader.").ni().deprecated(CADVISOR_DEPRECATED),
    opt("event-storage-age-limit", Str, "default=0", "cAdvisor: how long events are kept, per type.").ni().deprecated(CADVISOR_DEPRECATED),
    opt("event-storage-event-limit", Str, "default=0", "cAdvisor: most events kept, per type.").ni().deprecated(CADVISOR_DEPRECATED),
    opt("global-housekeeping-interval", Duration, "1m0s", "cAdvisor: global housekeeping interval.").ni().deprecated(CADVISOR_DEPRECATED),
    opt("log-cadvisor-usage", Bool, "false", "cAdvisor: log the cAdvisor container's usage.").ni().deprecated(CADVISOR_DEPRECATED),
    opt("machine-id-file", Str, "/etc/machine-id,/var/lib/dbus/machine-id", "cAdvisor: files to read the machine id from.").ni().deprecated(CADVISOR_DEPRECATED),
    opt("storage-driver-user", Str, "root", "cAdvisor: storage driver user.").ni().deprecated(CADVISOR_DEPRECATED),
    opt("storage-driver-password", Str, "root", "cAdvisor: storage driver password.").ni().deprecated(CADVISOR_DEPRECATED),
    opt("storage-driver-host", Str, "localhost:8086", "cAdvisor: storage driver host.").ni().deprecated(CADVISOR_DEPRECATED),
    opt("storage-driver-db", Str, "cadvisor", "cAdvisor: storage driver database.").ni().deprecated(CADVISOR_DEPRECATED),
    opt("storage-driver-table", Str, "stats", "cAdvisor: storage driver table.").ni().deprecated(CADVISOR_DEPRECATED),
    opt("storage-driver-secure", Bool, "false", "cAdvisor: storage driver over TLS.").ni().deprecated(CADVISOR_DEPRECATED),
    opt("storage-driver-buffer-duration", Duration, "1m0s", "cAdvisor: storage driver buffering.").ni().deprecated(CADVISOR_DEPRECATED),
    // Refused when the value asks for what rkubelet cannot do safely (see `states`).
    cfg("protect-kernel-defaults", Bool, &["protectKernelDefaults"], "Fail when kernel tunables differ from the kubelet's defaults. Refused when true: rkubelet does not check them.").refused(),
];

/// The flag with this long name.
pub fn flag(name: &str) -> Option<&'static FlagSpec> {
    FLAGS.iter().find(|f| f.name == name)
}

/// Go's `strconv.ParseBool`.
pub fn parse_go_bool(text: &str) -> Option<bool> {
    match text {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

fn invalid(spec: &FlagSpec, value: &str, reason: impl std::fmt::Display) -> ConfigError {
    ConfigError::InvalidFlag {
        flag: spec.name.to_string(),
        value: value.to_string(),
        reason: reason.to_string(),
    }
}

/// The value a flag's text stands for, as it would appear in a configuration file.
pub fn flag_value(spec: &FlagSpec, text: &str) -> Result<Value, ConfigError> {
    match spec.kind {
        Str => Ok(Value::String(text.to_string())),
        Bool => parse_go_bool(text).map(Value::Bool).ok_or_else(|| {
            invalid(
                spec,
                text,
                format!("strconv.ParseBool: parsing {text:?}: invalid syntax"),
            )
        }),
        Int => text.trim().parse::<i64>().map(Value::from).map_err(|_| {
            invalid(
                spec,
                text,
                format!("strconv.ParseInt: parsing {text:?}: invalid syntax"),
            )
        }),
        Duration => GoDuration::parse(text)
            .map(|_| Value::String(text.to_string()))
            .map_err(|e| invalid(spec, text, e)),
        LessThanMap => eviction::parse_lt_map(text)
            .map(string_map)
            .map_err(|e| invalid(spec, text, e)),
        EqualsMap => reserved::parse_kv_map(&format!("--{}", spec.name), text)
            .map(string_map)
            .map_err(|e| invalid(spec, text, e)),
        List => Ok(Value::Array(
            split_list(text)
                .map(|s| Value::String(s.to_string()))
                .collect(),
        )),
        FeatureGates => parse_feature_gates(text)
            .map(|gates| {
                Value::Object(
                    gates
                        .into_iter()
                        .map(|(k, v)| (k, Value::Bool(v)))
                        .collect(),
                )
            })
            .map_err(|reason| invalid(spec, text, reason)),
        Taints => parse_taints(text)
            .map(Value::Array)
            .map_err(|reason| invalid(spec, text, reason)),
        ColonMultiMap => parse_colon_multimap(text).map_err(|reason| invalid(spec, text, reason)),
        ReservedMemory => parse_reserved_memory(text).map_err(|reason| invalid(spec, text, reason)),
    }
}

fn split_list(text: &str) -> impl Iterator<Item = &str> {
    text.split(',').map(str::trim).filter(|s| !s.is_empty())
}

fn string_map(map: BTreeMap<String, String>) -> Value {
    Value::Object(
        map.into_iter()
            .map(|(k, v)| (k, Value::String(v)))
            .collect(),
    )
}

/// `A=true,B=false`, with upstream's wording for a missing `=` or a bad boolean.
pub fn parse_feature_gates(text: &str) -> Result<BTreeMap<String, bool>, String> {
    let mut gates = BTreeMap::new();
    for pair in split_list(text) {
        let Some((name, value)) = pair.split_once('=') else {
            return Err(format!("missing bool value for {pair}"));
        };
        let name = name.trim();
        let value = value.trim();
        let enabled = parse_go_bool(value).ok_or_else(|| {
            format!("invalid value of {name}={value}, err: strconv.ParseBool: parsing {value:?}: invalid syntax")
        })?;
        gates.insert(name.to_string(), enabled);
    }
    Ok(gates)
}

/// `0:memory=1Gi,hugepages-1M=2Gi;1:memory=2Gi` into `reservedMemory`'s
/// `[{numaNode, limits}]`, with upstream's `ReservedMemoryVar` checks and words.
pub fn parse_reserved_memory(text: &str) -> Result<Value, String> {
    let mut out = Vec::new();
    for reservation in text.split(';').filter(|r| !r.is_empty()) {
        let incorrect = || {
            format!("the reserved memory has incorrect format, expected numaNodeID:type=quantity[,type=quantity...], got {reservation}")
        };
        let parts: Vec<&str> = reservation.split(':').collect();
        let [node, limits] = parts[..] else {
            return Err(incorrect());
        };
        let node: i32 = node.parse().map_err(|_| {
            format!("failed to convert the NUMA node ID, exptected integer, got {node}")
        })?;
        let mut map = Map::new();
        for limit in limits.split(',') {
            let Some((name, quantity)) = limit.split_once('=').filter(|(_, q)| !q.contains('='))
            else {
                return Err(format!(
                    "the reserved limit has incorrect value, expected type=quantatity, got {limit}"
                ));
            };
            if name != "memory" && !name.starts_with("hugepages-") {
                return Err(format!(
                    "memory type conversion error, unknown type: {name:?}"
                ));
            }
            Quantity::parse(quantity).map_err(|e| {
                format!("failed to parse the quantity, expected quantatity, got {quantity}: {e}")
            })?;
            map.insert(name.to_string(), Value::String(quantity.to_string()));
        }
        let mut entry = Map::new();
        entry.insert("numaNode".into(), Value::from(node));
        entry.insert("limits".into(), Value::Object(map));
        out.push(Value::Object(entry));
    }
    Ok(Value::Array(out))
}

/// `a:hello,b:again,b:more` into `{"a": ["hello"], "b": ["again", "more"]}`.
pub fn parse_colon_multimap(text: &str) -> Result<Value, String> {
    let mut map: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for pair in split_list(text) {
        let (key, value) = pair
            .split_once(':')
            .ok_or_else(|| format!("malformed pair, expect string:string, got {pair:?}"))?;
        map.entry(key.trim().to_string())
            .or_default()
            .push(Value::String(value.trim().to_string()));
    }
    Ok(Value::Object(
        map.into_iter().map(|(k, v)| (k, Value::Array(v))).collect(),
    ))
}

const TAINT_EFFECTS: [&str; 3] = ["NoSchedule", "PreferNoSchedule", "NoExecute"];

/// `key=value:Effect` or `key:Effect`, comma-separated.
pub fn parse_taints(text: &str) -> Result<Vec<Value>, String> {
    split_list(text)
        .map(|spec| {
            let (key_value, effect) = spec
                .rsplit_once(':')
                .ok_or_else(|| format!("invalid taint spec: {spec}"))?;
            if !TAINT_EFFECTS.contains(&effect) {
                return Err(format!(
                    "invalid taint effect: {effect}, unsupported taint effect"
                ));
            }
            let (key, value) = key_value.split_once('=').unwrap_or((key_value, ""));
            if key.is_empty() {
                return Err(format!("invalid taint spec: {spec}"));
            }
            let mut taint = Map::new();
            taint.insert("key".into(), Value::String(key.into()));
            if !value.is_empty() {
                taint.insert("value".into(), Value::String(value.into()));
            }
            taint.insert("effect".into(), Value::String(effect.into()));
            Ok(Value::Object(taint))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_names_are_unique() {
        let mut names: Vec<_> = FLAGS.iter().map(|f| f.name).collect();
        names.sort_unstable();
        let before = names.len();
        names.dedup();
        assert_eq!(before, names.len());
    }

    #[test]
    fn converts_each_kind_of_flag() {
        let cases: &[(&str, &str, Value)] = &[
            ("cgroup-driver", "systemd", Value::from("systemd")),
            ("cgroups-per-qos", "false", Value::from(false)),
            ("cgroups-per-qos", "T", Value::from(true)),
            ("max-pods", "42", Value::from(42)),
            ("sync-frequency", "1m30s", Value::from("1m30s")),
            (
                "eviction-hard",
                "memory.available<1Gi,nodefs.available<5%",
                serde_json::json!({"memory.available": "1Gi", "nodefs.available": "5%"}),
            ),
            (
                "kube-reserved",
                "cpu=500m,memory=1Gi",
                serde_json::json!({"cpu": "500m", "memory": "1Gi"}),
            ),
            (
                "enforce-node-allocatable",
                "pods,kube-reserved",
                serde_json::json!(["pods", "kube-reserved"]),
            ),
            (
                "feature-gates",
                "A=true,B=false",
                serde_json::json!({"A": true, "B": false}),
            ),
            (
                "register-with-taints",
                "dedicated=infra:NoSchedule,gpu:NoExecute",
                serde_json::json!([
                    {"key": "dedicated", "value": "infra", "effect": "NoSchedule"},
                    {"key": "gpu", "effect": "NoExecute"}
                ]),
            ),
        ];
        for (name, text, want) in cases {
            let spec = flag(name).expect("known flag");
            assert_eq!(
                &flag_value(spec, text).expect(name),
                want,
                "--{name}={text}"
            );
        }
    }

    /// Upstream's ColonSeparatedMultimapStringString: pairs split at the first colon,
    /// trimmed, values accumulating per key; the CLI joins repeated flags with commas.
    #[test]
    fn manifest_url_headers_accumulate_per_key() {
        let spec = flag("manifest-url-header").expect("known flag");
        assert_eq!(spec.state, State::Implemented);
        assert_eq!(spec.target, Target::Config(&["staticPodURLHeader"]));
        assert_eq!(
            flag_value(spec, "a:hello, b:again,,b:more,c:x:y").expect("parses"),
            serde_json::json!({"a": ["hello"], "b": ["again", "more"], "c": ["x:y"]})
        );
        let message = flag_value(spec, "a:b,oops")
            .expect_err("no colon")
            .to_string();
        assert!(
            message.contains("--manifest-url-header") && message.contains("malformed pair"),
            "{message}"
        );
    }

    #[test]
    fn bad_values_name_the_flag_and_value() {
        let cases = [
            ("max-pods", "abc", "strconv.ParseInt"),
            ("cgroups-per-qos", "maybe", "strconv.ParseBool"),
            ("sync-frequency", "10", "missing unit"),
            ("feature-gates", "A=yes", "invalid value of A=yes"),
            (
                "register-with-taints",
                "k=v:Sometimes",
                "invalid taint effect",
            ),
        ];
        for (name, text, reason) in cases {
            let spec = flag(name).expect("known flag");
            let message = flag_value(spec, text).expect_err(name).to_string();
            assert!(message.contains(&format!("--{name}")), "{message}");
            assert!(message.contains(text), "{message}");
            assert!(message.contains(reason), "{message}");
        }
    }

    #[test]
    fn every_config_flag_targets_a_known_field() {
        let top =
            super::super::fields::struct_fields::<super::super::model::KubeletConfiguration>();
        for spec in FLAGS {
            if let Target::Config(path) = spec.target {
                assert!(top.contains(&path[0]), "--{} targets {:?}", spec.name, path);
            }
        }
    }
}
