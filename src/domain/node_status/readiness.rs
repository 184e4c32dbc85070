//! Whether the node is ready, from what the kubelet knows about its runtime (upstream's
//! `runtimeState` and the `ReadyCondition` setter's error list).

use std::time::Duration;

/// One runtime condition as the CRI `Status` call reports it (`RuntimeReady`,
/// `NetworkReady`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RuntimeCondition {
    pub type_: String,
    pub status: bool,
    pub reason: String,
    pub message: String,
}

impl RuntimeCondition {
    /// Upstream's `RuntimeCondition.String()`.
    fn describe(&self) -> String {
        format!(
            "{}={} reason:{} message:{}",
            self.type_, self.status, self.reason, self.message
        )
    }
}

/// What the kubelet last learnt from the runtime's `Status` calls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeState {
    /// Monotonic time of the last status check that found the runtime ready; `None` before
    /// the first one.
    pub last_sync: Option<Duration>,
    /// Set when the runtime answered but was not ready.
    pub runtime_error: Option<String>,
    pub network_error: Option<String>,
}

/// Upstream's `ErrNetworkUnknown`: the network state before the first status check.
pub const NETWORK_UNKNOWN: &str = "network state unknown";

impl Default for RuntimeState {
    fn default() -> Self {
        RuntimeState {
            last_sync: None,
            runtime_error: None,
            network_error: Some(NETWORK_UNKNOWN.into()),
        }
    }
}

/// The outcome of one runtime status check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StatusCheck {
    /// The call failed (the runtime is unreachable or errored): nothing changes, so the
    /// runtime turns "down" once the last good check is older than the threshold.
    Failed,
    /// The runtime answered with its conditions.
    Answered(Vec<RuntimeCondition>),
}

impl RuntimeState {
    /// The state after a status check at monotonic time `now` (upstream's
    /// `updateRuntimeUp`).
    pub fn observe(&mut self, check: &StatusCheck, now: Duration) {
        let StatusCheck::Answered(conditions) = check else {
            return;
        };
        let find = |t: &str| conditions.iter().find(|c| c.type_ == t);
        self.network_error = match find("NetworkReady") {
            Some(c) if c.status => None,
            other => Some(format!(
                "container runtime network not ready: {}",
                other.map_or("<nil>".into(), RuntimeCondition::describe)
            )),
        };
        match find("RuntimeReady") {
            Some(c) if c.status => {
                self.runtime_error = None;
                self.last_sync = Some(now);
            }
            other => {
                self.runtime_error = Some(format!(
                    "container runtime not ready: {}",
                    other.map_or("<nil>".into(), RuntimeCondition::describe)
                ));
            }
        }
    }

    /// The reasons the node is not ready at monotonic time `now`; empty when it is ready.
    /// `threshold` is how long the runtime may go without a good status check before it
    /// counts as down.
    pub fn errors(&self, now: Duration, threshold: Duration) -> Vec<String> {
        let mut errors = Vec::new();
        match self.last_sync {
            None => errors.push("container runtime status check may not have completed yet".into()),
            Some(last) if now.saturating_sub(last) >= threshold => {
                errors.push("container runtime is down".into());
            }
            Some(_) => {}
        }
        errors.extend(self.runtime_error.clone());
        errors.extend(self.network_error.clone());
        errors
    }
}

/// Go's `utilerrors.NewAggregate(errs).Error()`: one message alone, several deduplicated
/// in brackets.
pub fn aggregate_message(errors: &[String]) -> String {
    let mut seen: Vec<&str> = Vec::new();
    for e in errors {
        if !seen.contains(&e.as_str()) {
            seen.push(e);
        }
    }
    match seen.as_slice() {
        [] => String::new(),
        [one] => (*one).to_string(),
        many => format!("[{}]", many.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const THRESHOLD: Duration = Duration::from_secs(30);

    fn ready(t: &str) -> RuntimeCondition {
        RuntimeCondition {
            type_: t.into(),
            status: true,
            ..RuntimeCondition::default()
        }
    }

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn before_the_first_check_the_runtime_is_not_known() {
        let state = RuntimeState::default();
        assert_eq!(
            aggregate_message(&state.errors(secs(0), THRESHOLD)),
            "[container runtime status check may not have completed yet, network state unknown]"
        );
    }

    #[test]
    fn a_ready_runtime_then_silence_is_down_after_the_threshold() {
        let mut state = RuntimeState::default();
        let both = StatusCheck::Answered(vec![ready("RuntimeReady"), ready("NetworkReady")]);
        state.observe(&both, secs(10));
        assert!(state.errors(secs(39), THRESHOLD).is_empty());
        state.observe(&StatusCheck::Failed, secs(15));
        assert_eq!(
            state.errors(secs(40), THRESHOLD),
            ["container runtime is down"]
        );
        state.observe(&both, secs(41));
        assert!(state.errors(secs(41), THRESHOLD).is_empty());
    }

    #[test]
    fn not_ready_conditions_are_reported_in_upstreams_words() {
        let mut state = RuntimeState::default();
        let network = RuntimeCondition {
            type_: "NetworkReady".into(),
            status: false,
            reason: "NetworkPluginNotReady".into(),
            message: "Network plugin returns error: cni plugin not initialized".into(),
        };
        state.observe(
            &StatusCheck::Answered(vec![ready("RuntimeReady"), network]),
            secs(1),
        );
        assert_eq!(
            aggregate_message(&state.errors(secs(2), THRESHOLD)),
            "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized"
        );
        state.observe(&StatusCheck::Answered(vec![]), secs(3));
        assert_eq!(
            state.errors(secs(4), THRESHOLD),
            [
                "container runtime not ready: <nil>",
                "container runtime network not ready: <nil>"
            ]
        );
    }

    #[test]
    fn aggregate_deduplicates() {
        let e = |s: &str| s.to_string();
        assert_eq!(aggregate_message(&[]), "");
        assert_eq!(aggregate_message(&[e("a"), e("a")]), "a");
        assert_eq!(aggregate_message(&[e("a"), e("b"), e("a")]), "[a, b]");
    }
}
