//! Pure: what a drift detection found, as the status records it, and what remediation puts
//! back.
//!
//! CloudFormation compares each resource with its template ([`ResourceReport`]); this module
//! turns its answer into the cluster's `status.drift` ([`record`], bounded, with values that could
//! hold secrets redacted), the `Drifted` condition ([`condition`]) and the events' text
//! ([`summary`]), and decides which drifted resources the operator writes back through their
//! service's API and how ([`remedy`]). Nothing here calls AWS or Kubernetes; the tests run from
//! fixtures.

use apis::aws::{
    AWSCluster, DriftStatus, PropertyDrift, ResourceDrift, StackAccount, StackDrift, StackStatus as StackEntry,
};
use kube::ResourceExt;
use serde_json::Value;

/// AWSCluster annotation: `"true"` asks the detector to put drifted resources back.
pub const REMEDIATE_ANNOTATION: &str = "aws-operator.giantswarm.io/remediate-drift";
/// The condition type.
pub const DRIFTED: &str = "Drifted";
/// Drifted resources listed per stack in the status; the rest are counted.
pub const MAX_RESOURCES: usize = 10;
/// Property differences listed per resource in the status; the rest are counted.
pub const MAX_DIFFERENCES: usize = 10;
/// Characters kept of a property value in the status.
pub const MAX_VALUE_CHARS: usize = 256;
/// What a redacted value reads.
pub const REDACTED: &str = "(redacted)";

/// One property difference, as CloudFormation reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    /// `PropertyPath`, e.g. `/SecurityGroupIngress/2`.
    pub path: String,
    /// `ExpectedValue` (JSON for objects).
    pub expected: String,
    /// `ActualValue` (JSON for objects).
    pub actual: String,
    /// `ADD`, `REMOVE` or `NOT_EQUAL`.
    pub kind: String,
}

/// One drifted resource, as CloudFormation reports it. Its properties may hold secrets (a
/// launch template's user data): kept in memory for remediation only, never recorded as they
/// are ([`record`] redacts).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceReport {
    /// `LogicalResourceId`.
    pub logical_id: String,
    /// `ResourceType`.
    pub resource_type: String,
    /// `PhysicalResourceId`.
    pub physical_id: Option<String>,
    /// `MODIFIED` or `DELETED`.
    pub status: String,
    /// `ExpectedProperties`, parsed (`Value::Null` when absent or not JSON).
    pub expected: Value,
    /// `PropertyDifferences`.
    pub differences: Vec<Difference>,
}

/// A stack of a cluster, as its owner's status records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StackRef {
    /// The stack name.
    pub name: String,
    /// `tccp`, `tcnp`, ….
    pub kind: String,
    /// The account it lives in.
    pub account: StackAccount,
    /// In the middle of an operation: not checked this time.
    pub busy: bool,
}

/// The stacks of a cluster from the stack entries of its AWSCluster, control plane and node
/// pools: each once, without the deleted ones.
pub fn stacks_of<'a>(entries: impl IntoIterator<Item = &'a StackEntry>) -> Vec<StackRef> {
    let mut out: Vec<StackRef> = Vec::new();
    for e in entries {
        if e.status.starts_with("DELETE_") || out.iter().any(|s| s.name == e.name) {
            continue;
        }
        out.push(StackRef {
            name: e.name.clone(),
            kind: e.kind.clone(),
            account: e.account,
            busy: e.status.ends_with("_IN_PROGRESS"),
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// Whether `cluster` asks for remediation.
pub fn remediation_requested(cluster: &AWSCluster) -> bool {
    cluster.annotations().get(REMEDIATE_ANNOTATION).is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

/// Whether a property name names something that may hold a secret: user data (the node
/// configs, with their keys before Ignition fetches the rest), and anything called a password,
/// a secret, a token or a private key.
pub fn sensitive(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    ["userdata", "ignition", "password", "secret", "token", "privatekey", "private_key"].iter().any(|s| key.contains(s))
}

/// A property value as recorded: JSON with the values of [`sensitive`] keys redacted, at most
/// [`MAX_VALUE_CHARS`] characters.
pub fn recorded_value(text: &str) -> String {
    fn scrub(value: &mut Value) {
        match value {
            Value::Object(map) => {
                for (key, v) in map.iter_mut() {
                    if sensitive(key) {
                        *v = Value::String(REDACTED.into());
                    } else {
                        scrub(v);
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(scrub),
            _ => {}
        }
    }
    let text = match serde_json::from_str::<Value>(text) {
        Ok(mut v @ (Value::Object(_) | Value::Array(_))) => {
            scrub(&mut v);
            v.to_string()
        }
        _ => text.to_string(),
    };
    if text.chars().count() <= MAX_VALUE_CHARS {
        return text;
    }
    let mut short: String = text.chars().take(MAX_VALUE_CHARS - 1).collect();
    short.push('…');
    short
}

/// One stack's drift as the status records it: at most [`MAX_RESOURCES`] resources with at most
/// [`MAX_DIFFERENCES`] differences each; no properties (they may hold secrets, and the
/// differences say what matters); differences of [`sensitive`] properties redacted.
pub fn record(stack: &StackRef, detection_id: &str, drifted: u32, reports: &[ResourceReport]) -> StackDrift {
    let mut reports: Vec<&ResourceReport> = reports.iter().collect();
    reports.sort_by(|a, b| a.logical_id.cmp(&b.logical_id));
    let resources = reports
        .iter()
        .take(MAX_RESOURCES)
        .map(|r| {
            let differences = r
                .differences
                .iter()
                .take(MAX_DIFFERENCES)
                .map(|d| {
                    let secret = d.path.split('/').any(sensitive);
                    let value = |v: &str| if secret { REDACTED.to_string() } else { recorded_value(v) };
                    PropertyDrift {
                        path: d.path.clone(),
                        expected: value(&d.expected),
                        actual: value(&d.actual),
                        difference_type: d.kind.clone(),
                    }
                })
                .collect();
            ResourceDrift {
                logical_id: r.logical_id.clone(),
                resource_type: r.resource_type.clone(),
                physical_id: r.physical_id.clone().filter(|p| !p.is_empty()),
                status: r.status.clone(),
                differences,
                omitted_differences: u32::try_from(r.differences.len().saturating_sub(MAX_DIFFERENCES)).unwrap_or(0),
            }
        })
        .collect();
    StackDrift {
        name: stack.name.clone(),
        kind: stack.kind.clone(),
        detection_id: detection_id.to_string(),
        drifted_resources: drifted.max(u32::try_from(reports.len()).unwrap_or(u32::MAX)),
        resources,
        omitted_resources: u32::try_from(reports.len().saturating_sub(MAX_RESOURCES)).unwrap_or(0),
    }
}

/// The `Drifted` condition of a result: status, reason, message.
pub fn condition(drift: &DriftStatus) -> (bool, &'static str, String) {
    let resources: u32 = drift.stacks.iter().map(|s| s.drifted_resources).sum();
    if drift.stacks.is_empty() {
        return (false, "InSync", "every stack checked matches its template".into());
    }
    let stacks: Vec<String> = drift.stacks.iter().map(|s| format!("{} ({})", s.name, s.drifted_resources)).collect();
    let plural = if resources == 1 { "" } else { "s" };
    (
        true,
        "StacksDrifted",
        format!(
            "{resources} resource{plural} changed outside CloudFormation in {}; see status.drift, and annotate {REMEDIATE_ANNOTATION}=true to put them back",
            stacks.join(", ")
        ),
    )
}

/// What drifted, for telling two results apart: stack, resource, status and differences.
pub fn fingerprint(drift: &DriftStatus) -> Vec<(String, String, String, Vec<PropertyDrift>)> {
    drift
        .stacks
        .iter()
        .flat_map(|s| {
            s.resources.iter().map(|r| (s.name.clone(), r.logical_id.clone(), r.status.clone(), r.differences.clone()))
        })
        .collect()
}

/// A short list of what drifted, for events.
pub fn summary(drift: &DriftStatus) -> String {
    let mut parts = Vec::new();
    for s in &drift.stacks {
        for r in &s.resources {
            let what = r.differences.iter().map(|d| format!("{} {}", d.difference_type, d.path)).collect::<Vec<_>>();
            let id = r.physical_id.as_deref().map(|p| format!(" {p}")).unwrap_or_default();
            let detail = if what.is_empty() { String::new() } else { format!(": {}", what.join(", ")) };
            parts.push(format!("{} {} ({}{id}) {}{detail}", s.name, r.logical_id, r.resource_type, r.status));
        }
    }
    parts.join("; ")
}

/// The drift of one stack alone, for its own event.
pub fn alone(stack: &StackDrift) -> DriftStatus {
    DriftStatus { last_detection_time: None, stacks: vec![stack.clone()] }
}

// --- remediation ---------------------------------------------------------------------------------

/// One service call that puts part of a drifted resource back.
#[derive(Debug, Clone, PartialEq)]
pub enum Fix {
    /// Authorise (`authorize`) or revoke a security-group rule, written as a template writes it.
    Rule {
        /// The security group id.
        group: String,
        /// The rule, as the template (or the console's change) writes it.
        rule: Value,
        /// An egress rule (else ingress).
        egress: bool,
        /// Authorise (a rule removed by hand) or revoke (one added by hand).
        authorize: bool,
        /// Where the rule came from, for an error: the property path, or empty for a standalone
        /// rule resource.
        path: String,
    },
    /// Create (or, `replace`, replace) the route the template describes.
    Route {
        /// The route's expected properties.
        expected: Value,
        /// The route is there but points elsewhere.
        replace: bool,
    },
    /// Set an Auto Scaling group's sizes back; `None` leaves one as it is.
    GroupSizes {
        /// The group name.
        group: String,
        /// `MinSize`.
        min: Option<i32>,
        /// `MaxSize`.
        max: Option<i32>,
        /// `DesiredCapacity`.
        desired: Option<i32>,
    },
}

/// How one drifted resource is put back: the calls in order, then what the resource is once they
/// all succeed: `Ok(true)` put back whole, `Ok(false)` a drift the operator does not put back
/// (in whole or in part), `Err` a problem met after the calls before it (they still run).
#[derive(Debug, Clone, PartialEq)]
pub struct Remedy {
    /// The calls, in order; the first that fails ends the remediation of the resource.
    pub fixes: Vec<Fix>,
    /// What the resource is once every call succeeded.
    pub then: Result<bool, String>,
}

impl Remedy {
    fn left(then: Result<bool, String>) -> Self {
        Self { fixes: Vec::new(), then }
    }
}

/// How the operator puts back drifted resource `r`: security-group rules added or removed by
/// hand, a standalone ingress rule deleted, a route deleted or redirected, an Auto Scaling
/// group's sizes. Anything else is left alone (recreating it is a stack operation).
pub fn remedy(r: &ResourceReport) -> Remedy {
    let expected = &r.expected;
    match (r.resource_type.as_str(), r.status.as_str()) {
        ("AWS::EC2::SecurityGroup", "MODIFIED") => {
            let Some(group) = r.physical_id.as_deref() else {
                return Remedy::left(Err("the group has no physical id".into()));
            };
            let mut fixes = Vec::new();
            let mut all = true;
            for d in &r.differences {
                let egress = d.path.starts_with("/SecurityGroupEgress/");
                if !egress && !d.path.starts_with("/SecurityGroupIngress/") {
                    all = false;
                    continue;
                }
                let (value, authorize) = match d.kind.as_str() {
                    "ADD" => (&d.actual, false),
                    "REMOVE" => (&d.expected, true),
                    _ => {
                        all = false;
                        continue;
                    }
                };
                match serde_json::from_str::<Value>(value) {
                    Ok(rule) => fixes.push(Fix::Rule {
                        group: group.to_string(),
                        rule,
                        egress,
                        authorize,
                        path: d.path.clone(),
                    }),
                    Err(e) => return Remedy { fixes, then: Err(format!("{}: {e}", d.path)) },
                }
            }
            Remedy { fixes, then: Ok(all) }
        }
        ("AWS::EC2::SecurityGroupIngress", "DELETED") => {
            let Some(group) = expected.get("GroupId").and_then(Value::as_str) else {
                return Remedy::left(Err("the rule names no GroupId".into()));
            };
            let fix = Fix::Rule {
                group: group.to_string(),
                rule: expected.clone(),
                egress: false,
                authorize: true,
                path: String::new(),
            };
            Remedy { fixes: vec![fix], then: Ok(true) }
        }
        ("AWS::EC2::Route", "DELETED" | "MODIFIED") => Remedy {
            fixes: vec![Fix::Route { expected: expected.clone(), replace: r.status == "MODIFIED" }],
            then: Ok(true),
        },
        ("AWS::AutoScaling::AutoScalingGroup", "MODIFIED") => {
            let Some(name) = r.physical_id.as_deref() else {
                return Remedy::left(Err("the group has no physical id".into()));
            };
            let size = |key: &str| {
                let changed = r.differences.iter().any(|d| d.path == format!("/{key}"));
                let value = expected.get(key).and_then(|v| v.as_i64().or_else(|| v.as_str()?.parse().ok()));
                if changed { value.and_then(|v| i32::try_from(v).ok()) } else { None }
            };
            let (min, max, desired) = (size("MinSize"), size("MaxSize"), size("DesiredCapacity"));
            let fixes = if min.is_some() || max.is_some() || desired.is_some() {
                vec![Fix::GroupSizes { group: name.to_string(), min, max, desired }]
            } else {
                Vec::new()
            };
            let all =
                r.differences.iter().all(|d| ["/MinSize", "/MaxSize", "/DesiredCapacity"].contains(&d.path.as_str()));
            Remedy { fixes, then: Ok(all) }
        }
        _ => Remedy::left(Ok(false)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, kind: &str, status: &str, account: StackAccount) -> StackEntry {
        StackEntry {
            name: name.into(),
            kind: kind.into(),
            account,
            status: status.into(),
            reason: None,
            last_transition_time: None,
            attempts: None,
            pending_update: None,
            applied_plan: None,
        }
    }

    fn stack(name: &str, kind: &str) -> StackRef {
        StackRef { name: name.into(), kind: kind.into(), account: StackAccount::Tenant, busy: false }
    }

    fn report(logical: &str, status: &str, differences: Vec<Difference>) -> ResourceReport {
        ResourceReport {
            logical_id: logical.into(),
            resource_type: "AWS::EC2::SecurityGroup".into(),
            physical_id: Some(format!("sg-{logical}")),
            status: status.into(),
            expected: Value::Null,
            differences,
        }
    }

    fn difference(path: &str, expected: &str, actual: &str, kind: &str) -> Difference {
        Difference { path: path.into(), expected: expected.into(), actual: actual.into(), kind: kind.into() }
    }

    #[test]
    fn the_stacks_of_a_cluster_are_listed_once_without_deleted_ones_and_busy_ones_marked() {
        let entries = [
            entry("cluster-q7m2x-tccp", "tccp", "UPDATE_COMPLETE", StackAccount::Tenant),
            entry("cluster-q7m2x-tccpf", "tccpf", "CREATE_COMPLETE", StackAccount::ControlPlane),
            entry("cluster-q7m2x-tcnp-p4kz1", "tcnp", "UPDATE_IN_PROGRESS", StackAccount::Tenant),
            entry("cluster-q7m2x-tcnp-old01", "tcnp", "DELETE_COMPLETE", StackAccount::Tenant),
            entry("cluster-q7m2x-tccp", "tccp", "UPDATE_COMPLETE", StackAccount::Tenant),
        ];
        let stacks = stacks_of(&entries);
        let seen: Vec<_> = stacks.iter().map(|s| (s.name.as_str(), s.account, s.busy)).collect();
        assert_eq!(
            seen,
            [
                ("cluster-q7m2x-tccp", StackAccount::Tenant, false),
                ("cluster-q7m2x-tccpf", StackAccount::ControlPlane, false),
                ("cluster-q7m2x-tcnp-p4kz1", StackAccount::Tenant, true),
            ]
        );
    }

    #[test]
    fn a_drifted_rule_is_recorded_with_its_difference() {
        let rule = r#"{"CidrIp":"203.0.113.0/24","FromPort":22,"IpProtocol":"tcp","ToPort":22}"#;
        let reports = [report(
            "MasterSecurityGroup",
            "MODIFIED",
            vec![difference("/SecurityGroupIngress/3", "null", rule, "ADD")],
        )];
        let got = record(&stack("cluster-q7m2x-tccp", "tccp"), "d-1", 1, &reports);
        assert_eq!(
            (got.name.as_str(), got.kind.as_str(), got.detection_id.as_str()),
            ("cluster-q7m2x-tccp", "tccp", "d-1")
        );
        assert_eq!(got.drifted_resources, 1);
        let r = &got.resources[0];
        assert_eq!(
            (r.logical_id.as_str(), r.physical_id.as_deref(), r.status.as_str()),
            ("MasterSecurityGroup", Some("sg-MasterSecurityGroup"), "MODIFIED")
        );
        assert_eq!(
            r.differences,
            [PropertyDrift {
                path: "/SecurityGroupIngress/3".into(),
                expected: "null".into(),
                actual: rule.into(),
                difference_type: "ADD".into()
            }]
        );
        let status = DriftStatus { last_detection_time: None, stacks: vec![got] };
        let (drifted, reason, message) = condition(&status);
        assert!(drifted);
        assert_eq!(reason, "StacksDrifted");
        assert!(
            message.starts_with("1 resource changed outside CloudFormation in cluster-q7m2x-tccp (1)"),
            "{message}"
        );
        assert_eq!(
            condition(&DriftStatus::default()),
            (false, "InSync", "every stack checked matches its template".into())
        );
    }

    #[test]
    fn secrets_never_reach_the_status() {
        let template = r#"{"ImageId":"ami-1","UserData":"c2VjcmV0IGtleQ==","TagSpecifications":[{"Tags":[{"Key":"a","Value":"b"}]}],"Nested":{"DbPassword":"hunter2"}}"#;
        let reports = [report(
            "LaunchTemplate",
            "MODIFIED",
            vec![
                difference("/LaunchTemplateData/UserData", "c2VjcmV0IGtleQ==", "b3RoZXIgc2VjcmV0", "NOT_EQUAL"),
                difference("/LaunchTemplateData", template, "null", "REMOVE"),
            ],
        )];
        let got = record(&stack("cluster-q7m2x-tcnp-p4kz1", "tcnp"), "d-2", 1, &reports);
        let text = serde_json::to_string(&got).expect("serialisable");
        for secret in ["c2VjcmV0IGtleQ==", "b3RoZXIgc2VjcmV0", "hunter2"] {
            assert!(!text.contains(secret), "{secret} leaked: {text}");
        }
        let d = &got.resources[0].differences;
        assert_eq!((d[0].expected.as_str(), d[0].actual.as_str()), (REDACTED, REDACTED));
        assert!(d[1].expected.contains("ami-1"), "the rest is kept: {}", d[1].expected);
    }

    #[test]
    fn the_record_is_bounded() {
        let many: Vec<Difference> = (0..25)
            .map(|i| difference(&format!("/SecurityGroupIngress/{i}"), "null", &"x".repeat(1000), "ADD"))
            .collect();
        let reports: Vec<ResourceReport> =
            (0..15).map(|i| report(&format!("Group{i:02}"), "MODIFIED", many.clone())).collect();
        let got = record(&stack("cluster-q7m2x-tccp", "tccp"), "d-3", 15, &reports);
        assert_eq!((got.resources.len(), got.omitted_resources, got.drifted_resources), (MAX_RESOURCES, 5, 15));
        let r = &got.resources[0];
        assert_eq!((r.differences.len(), r.omitted_differences), (MAX_DIFFERENCES, 15));
        assert_eq!(r.differences[0].actual.chars().count(), MAX_VALUE_CHARS);
        assert!(r.differences[0].actual.ends_with('…'));
    }

    #[test]
    fn remediation_is_asked_for_with_true_only() {
        let cluster = |value: Option<&str>| {
            let mut c: AWSCluster = serde_json::from_value(serde_json::json!({
                "apiVersion": "infrastructure.giantswarm.io/v1alpha3", "kind": "AWSCluster",
                "metadata": {"name": "q7m2x", "namespace": "org-acme"},
                "spec": {
                    "cluster": {"description": "t", "dns": {"domain": "k8s.example.com"}},
                    "provider": {"credentialSecret": {"name": "c", "namespace": "giantswarm"}, "region": "eu-central-1"}
                }
            }))
            .expect("cluster");
            if let Some(v) = value {
                c.annotations_mut().insert(REMEDIATE_ANNOTATION.into(), v.into());
            }
            c
        };
        assert!(remediation_requested(&cluster(Some("true"))));
        assert!(remediation_requested(&cluster(Some(" True "))));
        assert!(!remediation_requested(&cluster(Some("false"))));
        assert!(!remediation_requested(&cluster(None)));
    }

    #[test]
    fn a_rule_added_by_hand_is_revoked_and_one_removed_is_authorised_again() {
        let added = r#"{"CidrIp":"203.0.113.0/24","FromPort":22,"IpProtocol":"tcp","ToPort":22}"#;
        let removed = r#"{"CidrIp":"10.0.0.0/16","FromPort":443,"IpProtocol":"tcp","ToPort":443}"#;
        let r = report(
            "MasterSecurityGroup",
            "MODIFIED",
            vec![
                difference("/SecurityGroupIngress/3", "null", added, "ADD"),
                difference("/SecurityGroupEgress/0", removed, "null", "REMOVE"),
            ],
        );
        let got = remedy(&r);
        assert_eq!(
            got.fixes,
            [
                Fix::Rule {
                    group: "sg-MasterSecurityGroup".into(),
                    rule: serde_json::from_str(added).unwrap(),
                    egress: false,
                    authorize: false,
                    path: "/SecurityGroupIngress/3".into()
                },
                Fix::Rule {
                    group: "sg-MasterSecurityGroup".into(),
                    rule: serde_json::from_str(removed).unwrap(),
                    egress: true,
                    authorize: true,
                    path: "/SecurityGroupEgress/0".into()
                },
            ]
        );
        assert_eq!(got.then, Ok(true));
    }

    #[test]
    fn a_group_change_besides_its_rules_is_left_and_a_malformed_rule_stops_after_the_ones_before() {
        let rule = r#"{"CidrIp":"203.0.113.0/24","FromPort":22,"IpProtocol":"tcp","ToPort":22}"#;
        let r = report(
            "MasterSecurityGroup",
            "MODIFIED",
            vec![
                difference("/GroupDescription", "a", "b", "NOT_EQUAL"),
                difference("/SecurityGroupIngress/1", "null", rule, "NOT_EQUAL"),
                difference("/SecurityGroupIngress/3", "null", rule, "ADD"),
            ],
        );
        let got = remedy(&r);
        assert_eq!(got.fixes.len(), 1);
        assert_eq!(got.then, Ok(false));
        let broken = report(
            "MasterSecurityGroup",
            "MODIFIED",
            vec![
                difference("/SecurityGroupIngress/3", "null", rule, "ADD"),
                difference("/SecurityGroupIngress/4", "null", "{not json", "ADD"),
                difference("/SecurityGroupIngress/5", "null", rule, "ADD"),
            ],
        );
        let got = remedy(&broken);
        assert_eq!(got.fixes.len(), 1, "the rule before the malformed one is still put back");
        assert!(got.then.as_ref().is_err_and(|e| e.starts_with("/SecurityGroupIngress/4: ")), "{:?}", got.then);
        let anonymous = ResourceReport { physical_id: None, ..r };
        assert_eq!(remedy(&anonymous), Remedy { fixes: Vec::new(), then: Err("the group has no physical id".into()) });
    }

    #[test]
    fn routes_rules_and_group_sizes_go_back_as_the_template_says_and_the_rest_is_left() {
        let route = serde_json::json!({"RouteTableId": "rtb-1", "DestinationCidrBlock": "10.1.0.0/16", "VpcPeeringConnectionId": "pcx-1"});
        let deleted = ResourceReport {
            resource_type: "AWS::EC2::Route".into(),
            expected: route.clone(),
            ..report("PeeringRoute", "DELETED", Vec::new())
        };
        assert_eq!(remedy(&deleted).fixes, [Fix::Route { expected: route.clone(), replace: false }]);
        let redirected = ResourceReport { status: "MODIFIED".into(), ..deleted };
        assert_eq!(remedy(&redirected).fixes, [Fix::Route { expected: route, replace: true }]);

        let ingress = serde_json::json!({"GroupId": "sg-9", "IpProtocol": "tcp", "FromPort": 443, "ToPort": 443, "SourceSecurityGroupId": "sg-8"});
        let rule = ResourceReport {
            resource_type: "AWS::EC2::SecurityGroupIngress".into(),
            expected: ingress.clone(),
            ..report("IngressFromWorkers", "DELETED", Vec::new())
        };
        assert_eq!(
            remedy(&rule),
            Remedy {
                fixes: vec![Fix::Rule {
                    group: "sg-9".into(),
                    rule: ingress,
                    egress: false,
                    authorize: true,
                    path: String::new()
                }],
                then: Ok(true)
            }
        );

        let group = ResourceReport {
            resource_type: "AWS::AutoScaling::AutoScalingGroup".into(),
            physical_id: Some("cluster-q7m2x-tcnp-p4kz1-asg".into()),
            expected: serde_json::json!({"MinSize": "3", "MaxSize": 10, "DesiredCapacity": "3"}),
            ..report("NodePoolAutoScalingGroup", "MODIFIED", vec![difference("/MinSize", "3", "1", "NOT_EQUAL")])
        };
        let got = remedy(&group);
        assert_eq!(
            got.fixes,
            [Fix::GroupSizes { group: "cluster-q7m2x-tcnp-p4kz1-asg".into(), min: Some(3), max: None, desired: None }]
        );
        assert_eq!(got.then, Ok(true));

        let template = ResourceReport {
            resource_type: "AWS::EC2::LaunchTemplate".into(),
            ..report("NodePoolLaunchTemplate", "MODIFIED", Vec::new())
        };
        assert_eq!(remedy(&template), Remedy { fixes: Vec::new(), then: Ok(false) });
    }
}
