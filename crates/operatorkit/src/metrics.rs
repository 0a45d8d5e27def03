//! Prometheus metrics, registered in a registry the operator injects (never a global one).
//!
//! The names follow operatorkit (reference §4.12), with real counters where Go used resetting
//! gauges:
//!
//! | Metric | Type | Labels | Meaning |
//! | --- | --- | --- | --- |
//! | `operatorkit_controller_errors_total` | counter | `controller` | failed reconciles |
//! | `operatorkit_controller_event` | histogram (seconds) | `controller`, `event` (`update`/`delete`) | duration of successful reconciles |
//! | `operatorkit_controller_last_reconciled` | gauge (unix seconds) | `controller` | end of the last successful reconcile |
//! | `operatorkit_controller_operation` | histogram (seconds) | `resource`, `operation` | duration of wrapped resource operations ([`Metered`](crate::wrapper::Metered)) |
//! | `operatorkit_controller_operation_errors_total` | counter | `resource`, `operation` | failed wrapped operations |
//! | `operatorkit_controller_creation_timestamp` | gauge (unix seconds) | `controller`, `kind`, `name`, `namespace` | per watched object, computed at scrape time from the cache |
//! | `operatorkit_controller_deletion_timestamp` | gauge (unix seconds) | `controller`, `kind`, `name`, `namespace` | per watched object being deleted |
//! | `operatorkit_controller_queue_depth` | gauge | `controller` | objects with a pending reconcile request that has not started |
//! | `operatorkit_controller_reconciles_in_flight` | gauge | `controller` | reconciles running now |
//! | `operatorkit_controller_no_resource_set_total` | counter | `controller` | reconciles of objects that no resource set handles (another operator version owns them) |
//! | `operatorkit_controller_unroutable_total` | counter | `controller`, `reason` | reconciles of objects whose Release could not be resolved |
//!
//! Differences from Go, and why:
//! * `operatorkit_controller_event` gains a `controller` label: the Go registry was per process
//!   and one controller's durations hid another's.
//! * The operation count is the histogram's `operatorkit_controller_operation_count` series.
//!   Go also exported a counter `operatorkit_controller_operation_total`, but OpenMetrics forbids
//!   two metric families with the same name (`operatorkit_controller_operation`); the
//!   histogram's `_count` carries the same number.
//! * The timestamp gauges read the controller's reflector cache instead of listing the kind from
//!   the API server on every scrape.
//!
//! Every labelled family is registered through [`register`], which serves its `# HELP` and
//! `# TYPE` lines before its first sample: a dashboard or alert can name the metric from the
//! first scrape, and a test can check that it exists (the client library leaves out families
//! without samples).

use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Labels `{controller}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ControllerLabels {
    pub controller: String,
}

/// Labels `{controller, event}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct EventLabels {
    pub controller: String,
    pub event: &'static str,
}

/// Labels `{controller, reason}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ReasonLabels {
    pub controller: String,
    pub reason: &'static str,
}

/// Labels `{resource, operation}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct OperationLabels {
    pub resource: String,
    pub operation: &'static str,
}

/// A metric whose `# HELP` and `# TYPE` lines are served even before it has a sample.
#[derive(Debug)]
pub struct Declared<M>(pub M);

impl<M: prometheus_client::encoding::EncodeMetric> prometheus_client::encoding::EncodeMetric for Declared<M> {
    fn encode(&self, encoder: prometheus_client::encoding::MetricEncoder) -> Result<(), std::fmt::Error> {
        self.0.encode(encoder)
    }

    fn metric_type(&self) -> MetricType {
        self.0.metric_type()
    }

    fn is_empty(&self) -> bool {
        false
    }
}

/// Register `metric` in `registry` as [`Declared`]: named on `/metrics` from the first scrape.
pub fn register<M>(registry: &mut Registry, name: &str, help: &str, metric: M)
where
    M: prometheus_client::registry::Metric,
{
    registry.register(name, help, Declared(metric));
}

/// Buckets from 1 ms to about 65 s.
fn duration_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

/// One watched object's timestamps, for the scrape-time gauges.
#[derive(Clone, Debug)]
pub(crate) struct ObjectTimes {
    pub name: String,
    pub namespace: String,
    pub created: Option<f64>,
    pub deleted: Option<f64>,
}

/// Reads the timestamps of one controller's cached objects.
pub(crate) type TimesSource = Box<dyn Fn() -> Vec<ObjectTimes> + Send + Sync>;

struct TimesEntry {
    controller: String,
    kind: String,
    source: TimesSource,
}

/// Computes the timestamp gauges at scrape time.
#[derive(Default)]
struct TimestampCollector {
    sources: RwLock<Vec<TimesEntry>>,
}

impl std::fmt::Debug for TimestampCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TimestampCollector").field("sources", &self.sources.read().len()).finish()
    }
}

impl Collector for TimestampCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let sources = self.sources.read();
        let snapshots: Vec<_> = sources.iter().map(|s| (s, (s.source)())).collect();
        for (metric, help, pick) in [
            (
                "controller_creation_timestamp",
                "Creation time of each watched object, in unix seconds.",
                (|t: &ObjectTimes| t.created) as fn(&ObjectTimes) -> Option<f64>,
            ),
            (
                "controller_deletion_timestamp",
                "Deletion time of each watched object being deleted, in unix seconds.",
                |t| t.deleted,
            ),
        ] {
            let mut family = encoder.encode_descriptor(metric, help, None, MetricType::Gauge)?;
            for (entry, objects) in &snapshots {
                for object in objects {
                    if let Some(value) = pick(object) {
                        let labels = [
                            ("controller", entry.controller.as_str()),
                            ("kind", entry.kind.as_str()),
                            ("name", object.name.as_str()),
                            ("namespace", object.namespace.as_str()),
                        ];
                        family.encode_family(&labels)?.encode_gauge(&value)?;
                    }
                }
            }
        }
        Ok(())
    }
}

#[derive(Debug)]
struct Inner {
    errors: Family<ControllerLabels, Counter>,
    event: Family<EventLabels, Histogram>,
    last_reconciled: Family<ControllerLabels, Gauge<f64, std::sync::atomic::AtomicU64>>,
    operation: Family<OperationLabels, Histogram>,
    operation_errors: Family<OperationLabels, Counter>,
    queue_depth: Family<ControllerLabels, Gauge>,
    in_flight: Family<ControllerLabels, Gauge>,
    no_resource_set: Family<ControllerLabels, Counter>,
    unroutable: Family<ReasonLabels, Counter>,
    timestamps: Arc<TimestampCollector>,
}

/// The operatorkit metrics of one registry. Cheap to clone; share one value between every
/// controller and wrapper of a process.
#[derive(Clone, Debug)]
pub struct Metrics {
    inner: Arc<Inner>,
}

impl Metrics {
    /// Register the metrics in `registry` under the `operatorkit_` prefix.
    pub fn new(registry: &mut Registry) -> Metrics {
        let inner = Inner {
            errors: Family::default(),
            event: Family::new_with_constructor(duration_histogram),
            last_reconciled: Family::default(),
            operation: Family::new_with_constructor(duration_histogram),
            operation_errors: Family::default(),
            queue_depth: Family::default(),
            in_flight: Family::default(),
            no_resource_set: Family::default(),
            unroutable: Family::default(),
            timestamps: Arc::new(TimestampCollector::default()),
        };
        let r = registry.sub_registry_with_prefix("operatorkit");
        register(r, "controller_errors", "Failed reconciles.", inner.errors.clone());
        register(r, "controller_event", "Duration of successful reconciles in seconds, by event.", inner.event.clone());
        register(
            r,
            "controller_last_reconciled",
            "Unix time of the end of the last successful reconcile.",
            inner.last_reconciled.clone(),
        );
        register(r, "controller_operation", "Duration of resource operations in seconds.", inner.operation.clone());
        register(r, "controller_operation_errors", "Failed resource operations.", inner.operation_errors.clone());
        register(
            r,
            "controller_queue_depth",
            "Objects with a pending reconcile request that has not started.",
            inner.queue_depth.clone(),
        );
        register(r, "controller_reconciles_in_flight", "Reconciles running now.", inner.in_flight.clone());
        register(
            r,
            "controller_no_resource_set",
            "Reconciles of objects that no resource set of this operator version handles.",
            inner.no_resource_set.clone(),
        );
        register(
            r,
            "controller_unroutable",
            "Reconciles of objects whose Release could not be resolved, by reason.",
            inner.unroutable.clone(),
        );
        r.register_collector(Box::new(inner.timestamps.clone()));
        Metrics { inner: Arc::new(inner) }
    }

    pub(crate) fn reconcile_failed(&self, controller: &str) {
        self.inner.errors.get_or_create(&ControllerLabels { controller: controller.to_string() }).inc();
    }

    pub(crate) fn reconcile_succeeded(&self, controller: &str, event: &'static str, took: Duration) {
        self.inner
            .event
            .get_or_create(&EventLabels { controller: controller.to_string(), event })
            .observe(took.as_secs_f64());
        let now = jiff::Timestamp::now().as_millisecond() as f64 / 1000.0;
        self.inner.last_reconciled.get_or_create(&ControllerLabels { controller: controller.to_string() }).set(now);
    }

    pub(crate) fn operation(&self, resource: &str, operation: &'static str, took: Duration, failed: bool) {
        let labels = OperationLabels { resource: resource.to_string(), operation };
        self.inner.operation.get_or_create(&labels).observe(took.as_secs_f64());
        if failed {
            self.inner.operation_errors.get_or_create(&labels).inc();
        }
    }

    pub(crate) fn set_queue_depth(&self, controller: &str, depth: usize) {
        self.inner
            .queue_depth
            .get_or_create(&ControllerLabels { controller: controller.to_string() })
            .set(i64::try_from(depth).unwrap_or(i64::MAX));
    }

    pub(crate) fn in_flight(&self, controller: &str) -> Gauge {
        self.inner.in_flight.get_or_create_owned(&ControllerLabels { controller: controller.to_string() })
    }

    pub(crate) fn no_resource_set(&self, controller: &str) {
        self.inner.no_resource_set.get_or_create(&ControllerLabels { controller: controller.to_string() }).inc();
    }

    pub(crate) fn unroutable(&self, controller: &str, reason: &'static str) {
        self.inner.unroutable.get_or_create(&ReasonLabels { controller: controller.to_string(), reason }).inc();
    }

    pub(crate) fn add_timestamp_source(&self, controller: &str, kind: &str, source: TimesSource) {
        self.inner.timestamps.sources.write().push(TimesEntry {
            controller: controller.to_string(),
            kind: kind.to_string(),
            source,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::text::encode;

    #[test]
    fn metrics_encode_with_operatorkit_names() {
        let mut registry = Registry::default();
        let m = Metrics::new(&mut registry);
        m.reconcile_failed("c");
        m.reconcile_succeeded("c", "update", Duration::from_millis(3));
        m.operation("stack", "EnsureCreated", Duration::from_millis(2), true);
        m.set_queue_depth("c", 4);
        m.in_flight("c").inc();
        m.no_resource_set("c");
        m.unroutable("c", "ReleaseNotFound");
        m.add_timestamp_source(
            "c",
            "ConfigMap",
            Box::new(|| {
                vec![ObjectTimes { name: "a".into(), namespace: "ns".into(), created: Some(10.0), deleted: None }]
            }),
        );
        let mut out = String::new();
        encode(&mut out, &registry).unwrap();
        for expected in [
            "operatorkit_controller_errors_total{controller=\"c\"} 1",
            "operatorkit_controller_event_count{controller=\"c\",event=\"update\"} 1",
            "operatorkit_controller_last_reconciled{controller=\"c\"}",
            "operatorkit_controller_operation_count{resource=\"stack\",operation=\"EnsureCreated\"} 1",
            "operatorkit_controller_operation_errors_total{resource=\"stack\",operation=\"EnsureCreated\"} 1",
            "operatorkit_controller_queue_depth{controller=\"c\"} 4",
            "operatorkit_controller_reconciles_in_flight{controller=\"c\"} 1",
            "operatorkit_controller_no_resource_set_total{controller=\"c\"} 1",
            "operatorkit_controller_unroutable_total{controller=\"c\",reason=\"ReleaseNotFound\"} 1",
            "operatorkit_controller_creation_timestamp{controller=\"c\",kind=\"ConfigMap\",name=\"a\",namespace=\"ns\"} 10.0",
        ] {
            assert!(out.contains(expected), "missing {expected:?} in\n{out}");
        }
        assert!(!out.contains("operatorkit_controller_deletion_timestamp{"), "no object is being deleted");
    }
}
