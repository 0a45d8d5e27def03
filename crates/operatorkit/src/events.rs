//! Kubernetes Warning events from typed errors (operatorkit v1.2.0, `docs/using_kubernetes_events.md`).
//!
//! Only failures produce events: type `Warning`, reason = the error's kind, note = its
//! description, published with kube-runtime's [`Recorder`] (events.k8s.io/v1; repeats of the
//! same reason on the same object become one event with a growing series count). The reporting
//! controller is the controller's name. Events of cluster-scoped objects land in `default`.
//!
//! The note is the error's `Display` text, truncated to the API's 1 kB limit; error types must
//! not format secrets (see [`crate::error`]).

use kube::Client;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

/// Upstream limits on event fields.
const MAX_REASON: usize = 128;
const MAX_NOTE: usize = 1024;

/// Publishes Warning events for one controller.
#[derive(Clone)]
pub(crate) struct Warnings {
    recorder: Recorder,
}

impl std::fmt::Debug for Warnings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Warnings").finish_non_exhaustive()
    }
}

impl Warnings {
    pub(crate) fn new(client: Client, controller: &str, instance: Option<String>) -> Self {
        Self { recorder: Recorder::new(client, Reporter { controller: controller.to_string(), instance }) }
    }

    /// Publish a Warning on `obj`; failures to publish are logged, never returned: an event is a
    /// courtesy and must not fail the reconcile.
    pub(crate) async fn warn<K>(&self, obj: &K, action: &str, reason: &str, note: &str)
    where
        K: kube::Resource<DynamicType = ()>,
    {
        let event = Event {
            type_: EventType::Warning,
            reason: truncate(reason, MAX_REASON).to_string(),
            note: Some(truncate(note, MAX_NOTE).to_string()),
            action: action.to_string(),
            secondary: None,
        };
        if let Err(error) = self.recorder.publish(&event, &obj.object_ref(&())).await {
            tracing::warn!(%error, reason, "cannot publish a Warning event");
        }
    }
}

/// At most `max` bytes of `s`, cut at a character boundary.
fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::truncate;

    #[test]
    fn truncation_respects_character_boundaries() {
        assert_eq!(truncate("abc", 5), "abc");
        assert_eq!(truncate("abcdef", 3), "abc");
        assert_eq!(truncate("aé", 2), "a", "é is two bytes and must not be split");
    }
}
