//! Kubernetes events: the controllers' Warning events from typed errors (operatorkit v1.2.0,
//! `docs/using_kubernetes_events.md`), and [`Events`], the one way every operator on this
//! library publishes its own Normal and Warning events.
//!
//! Events go through kube-runtime's [`Recorder`] (events.k8s.io/v1): repeats of the same type,
//! reason, action, object and related object on the same object become one event with a
//! growing series count, and only the first note is kept, so whatever tells two events apart
//! must be in one of those fields. The reporting controller is the controller's name. Events of
//! cluster-scoped objects land in `default`.
//!
//! Reasons and notes are truncated to the API's limits (128 and 1024 bytes). A note is written
//! for people and must never carry a secret; the Warning of an error is its `Display` text, and
//! error types must not format secrets (see [`crate::error`]). Publishing never fails a
//! reconcile: an event that cannot be written is logged.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

/// Upstream limits on event fields.
const MAX_REASON: usize = 128;
const MAX_NOTE: usize = 1024;

/// Publishes events for one controller (its reporting name).
#[derive(Clone)]
pub struct Events {
    recorder: Recorder,
}

impl std::fmt::Debug for Events {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Events").finish_non_exhaustive()
    }
}

impl Events {
    /// Events reported by `controller`.
    pub fn new(client: Client, controller: &str) -> Self {
        Self::with_instance(client, controller, None)
    }

    /// Events reported by `controller`, from the replica `instance` (e.g. its pod name).
    pub fn with_instance(client: Client, controller: &str, instance: Option<String>) -> Self {
        Self { recorder: Recorder::new(client, Reporter { controller: controller.to_string(), instance }) }
    }

    /// A Normal event on `object`.
    pub async fn normal(&self, object: &ObjectReference, action: &str, reason: &str, note: String) {
        self.publish(object, EventType::Normal, reason, action, None, &note).await;
    }

    /// A Warning event on `object`.
    pub async fn warning(&self, object: &ObjectReference, action: &str, reason: &str, note: String) {
        self.publish(object, EventType::Warning, reason, action, None, &note).await;
    }

    /// An event on `object` with its `action` and `related` object.
    pub async fn publish(
        &self,
        object: &ObjectReference,
        type_: EventType,
        reason: &str,
        action: &str,
        related: Option<ObjectReference>,
        note: &str,
    ) {
        let event = Event {
            type_,
            reason: truncate(reason, MAX_REASON).to_string(),
            note: Some(truncate(note, MAX_NOTE).to_string()),
            action: action.to_string(),
            secondary: related,
        };
        if let Err(error) = self.recorder.publish(&event, object).await {
            tracing::warn!(%error, reason, "cannot publish an event");
        }
    }

    /// The Warning a controller publishes for a failed reconcile of `obj`.
    pub(crate) async fn warn<K>(&self, obj: &K, action: &str, reason: &str, note: &str)
    where
        K: kube::Resource<DynamicType = ()>,
    {
        self.publish(&obj.object_ref(&()), EventType::Warning, reason, action, None, note).await;
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
