//! The labels and annotations the kubelet puts on what it creates, as upstream names
//! them: how pods are found again in the runtime (after a restart too), and what
//! crictl shows.

pub const POD_NAME_LABEL: &str = "io.kubernetes.pod.name";
pub const POD_NAMESPACE_LABEL: &str = "io.kubernetes.pod.namespace";
pub const POD_UID_LABEL: &str = "io.kubernetes.pod.uid";
pub const CONTAINER_NAME_LABEL: &str = "io.kubernetes.container.name";
/// The container spec hash, as hex; read back by the CRI adapter.
pub const CONTAINER_HASH_ANNOTATION: &str = "io.kubernetes.container.hash";
pub const CONTAINER_RESTART_COUNT_ANNOTATION: &str = "io.kubernetes.container.restartCount";
pub const CONTAINER_TERMINATION_MESSAGE_PATH_ANNOTATION: &str =
    "io.kubernetes.container.terminationMessagePath";
pub const CONTAINER_TERMINATION_MESSAGE_POLICY_ANNOTATION: &str =
    "io.kubernetes.container.terminationMessagePolicy";
/// The container's ports as JSON (what `crictl inspect` and upstream's tools read).
pub const CONTAINER_PORTS_ANNOTATION: &str = "io.kubernetes.container.ports";
pub const POD_TERMINATION_GRACE_PERIOD_ANNOTATION: &str =
    "io.kubernetes.pod.terminationGracePeriod";
/// The container's `preStop` handler as JSON, so it runs even when the pod's spec is gone
/// (a pod deleted while the kubelet was down).
pub const CONTAINER_PRE_STOP_HANDLER_ANNOTATION: &str = "io.kubernetes.container.preStopHandler";
/// rkubelet's own: the instance's crash-loop back-off step (quick failures before it in
/// the current streak), so the back-off is derived from the runtime's record rather
/// than kept in memory (see `backoff`). Read back by the CRI adapter.
pub const CONTAINER_BACKOFF_STEP_ANNOTATION: &str = "io.rkubelet.container.backOffStep";
