//! The charts, rendered by the real Helm binary: lint, restricted pods, least-privilege RBAC,
//! credentials, configuration from values, monitoring only where its CRDs exist, and names that
//! let two operator versions share a namespace. What both charts must do is checked for each
//! of [`CHARTS`]; what only one does, for that one.

use std::collections::BTreeSet;

use anyhow::{Context, Result};
use packaging::{chart_dir, helm, helm_template, operator_version, parse_objects};
use serde_json::Value;

const CHART: &str = "aws-operator";
const KVM: &str = "kvm-operator";
/// Every operator chart.
const CHARTS: [&str; 2] = [CHART, KVM];
const MONITORING: [&str; 2] = ["monitoring.coreos.com/v1/ServiceMonitor", "monitoring.coreos.com/v1/PrometheusRule"];

fn values_sets(chart: &str) -> Result<Vec<String>> {
    let mut sets: Vec<String> = std::fs::read_dir(chart_dir(chart).join("ci"))?
        .map(|e| Ok(format!("ci/{}", e?.file_name().to_string_lossy())))
        .collect::<Result<_>>()?;
    sets.sort();
    assert!(sets.len() >= 4, "expected several values sets in charts/{chart}/ci, found {sets:?}");
    Ok(sets)
}

fn of_kind<'a>(objects: &'a [Value], kind: &str) -> Vec<&'a Value> {
    objects.iter().filter(|o| o["kind"] == kind).collect()
}

fn one<'a>(objects: &'a [Value], kind: &str) -> &'a Value {
    let found = of_kind(objects, kind);
    assert_eq!(found.len(), 1, "expected one {kind}, found {}", found.len());
    found[0]
}

fn name(o: &Value) -> &str {
    o["metadata"]["name"].as_str().unwrap_or_default()
}

#[test]
fn lint_strict_passes_with_every_values_set() -> Result<()> {
    for chart in CHARTS {
        for set in values_sets(chart)? {
            helm(chart, &["lint", "--strict", ".", "--values", &set]).with_context(|| format!("{chart} {set}"))?;
        }
    }
    Ok(())
}

#[test]
fn chart_version_app_version_and_crate_version_agree() -> Result<()> {
    for name in CHARTS {
        let chart: Value = serde_saphyr::from_str(&std::fs::read_to_string(chart_dir(name).join("Chart.yaml"))?)?;
        let version = operator_version(name)?;
        assert_eq!(chart["version"], version.as_str(), "{name}: Chart.yaml version differs from the crate's");
        assert_eq!(chart["appVersion"], version.as_str(), "{name}: Chart.yaml appVersion differs from the crate's");
    }
    Ok(())
}

#[test]
fn the_charts_share_the_library_chart_by_a_link_not_a_copy() -> Result<()> {
    for chart in CHARTS {
        let lib = chart_dir(chart).join("charts/operator-lib");
        assert!(lib.symlink_metadata()?.file_type().is_symlink(), "{}: not a symlink", lib.display());
        assert_eq!(lib.canonicalize()?, chart_dir("operator-lib").canonicalize()?);
    }
    Ok(())
}

#[test]
fn the_installation_is_required_and_bad_values_are_rejected_by_the_schema() {
    let err = helm_template(CHART, &[], &[]).unwrap_err().to_string();
    assert!(err.contains("operator.installation is required"), "{err}");
    let err = helm(
        CHART,
        &["template", CHART, ".", "--set", "operator.installation=x", "--set", "operator.region=Frankfurt"],
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("region"), "{err}");
    let err = helm(CHART, &["template", CHART, ".", "--set", "operator.installation=x", "--set", "replica=3"])
        .unwrap_err()
        .to_string();
    assert!(err.contains("replica"), "a misspelt key must be rejected: {err}");
}

#[test]
fn the_pod_meets_the_restricted_pod_security_standard() -> Result<()> {
    for (chart, values) in CHARTS.into_iter().map(|c| Ok((c, values_sets(c)?))).collect::<Result<Vec<_>>>()? {
        for values in values {
            let set = format!("{chart} {values}");
            let objects = helm_template(chart, &[&values], &[])?;
            let deploy = one(&objects, "Deployment");
            let pod = &deploy["spec"]["template"]["spec"];
            assert_eq!(pod["securityContext"]["runAsNonRoot"], true, "{set}");
            assert_eq!(pod["securityContext"]["runAsUser"], 65532, "{set}");
            assert_eq!(pod["securityContext"]["seccompProfile"]["type"], "RuntimeDefault", "{set}");
            assert!(pod["hostNetwork"].is_null() && pod["hostPID"].is_null(), "{set}");
            for c in pod["containers"].as_array().unwrap() {
                let sc = &c["securityContext"];
                assert_eq!(sc["allowPrivilegeEscalation"], false, "{set}");
                assert_eq!(sc["readOnlyRootFilesystem"], true, "{set}");
                assert_eq!(sc["capabilities"]["drop"], serde_json::json!(["ALL"]), "{set}");
                assert!(sc["capabilities"]["add"].is_null(), "{set}");
                assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz", "{set}");
                assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz", "{set}");
                assert!(c["resources"]["requests"]["memory"].is_string(), "{set}: memory request");
                assert!(c["resources"]["limits"]["memory"].is_string(), "{set}: memory limit");
            }
            for v in pod["volumes"].as_array().unwrap() {
                assert!(v["hostPath"].is_null(), "{set}: hostPath volume {v}");
            }
            assert!(!pod["topologySpreadConstraints"].as_array().unwrap().is_empty(), "{set}");
        }
    }
    let objects = helm_template(CHART, &["ci/minimal-values.yaml"], &[])?;
    assert_eq!(one(&objects, "Deployment")["spec"]["replicas"], 2, "two replicas by default");
    let env = |objs: &[Value], name: &str| {
        one(objs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["env"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name)
            .map(|e| e["value"].clone())
    };
    assert_eq!(env(&objects, "AWS_OPERATOR_LEADER_ELECTION"), Some(Value::from("true")), "two replicas elect a leader");
    let single = helm_template(CHART, &["ci/minimal-footprint-values.yaml"], &[])?;
    assert_eq!(env(&single, "AWS_OPERATOR_LEADER_ELECTION"), Some(Value::from("false")));
    // Without leader election the Role keeps only the rollout slots' rule (a cluster's
    // maxRollingNodePools needs them whatever the chart's values) and the request budget's
    // member Lease rule (versions side by side share the budget whatever the chart's values).
    let rules = one(&single, "Role")["rules"].as_array().unwrap().clone();
    assert_eq!(rules.len(), 2, "no leader Lease rule without leader election: {rules:?}");
    assert_eq!(rules[0]["verbs"], serde_json::json!(["list", "create", "update", "delete"]));
    assert_eq!(rules[1]["verbs"], serde_json::json!(["get", "list", "create", "update", "delete"]));
    let pdb = one(&objects, "PodDisruptionBudget");
    assert_eq!(pdb["spec"]["selector"], one(&objects, "Deployment")["spec"]["selector"]);

    let kvm = helm_template(KVM, &["ci/minimal-values.yaml"], &[])?;
    assert_eq!(one(&kvm, "Deployment")["spec"]["replicas"], 2, "two replicas by default");
    assert_eq!(env(&kvm, "KVM_OPERATOR_LEADER_ELECTION"), Some(Value::from("true")), "two replicas elect a leader");
    let single = helm_template(KVM, &["ci/minimal-footprint-values.yaml"], &[])?;
    assert_eq!(env(&single, "KVM_OPERATOR_LEADER_ELECTION"), Some(Value::from("false")));
    assert!(of_kind(&single, "Role").is_empty(), "no Lease Role without leader election");
    assert_eq!(one(&kvm, "PodDisruptionBudget")["spec"]["selector"], one(&kvm, "Deployment")["spec"]["selector"]);
    Ok(())
}

/// The verbs on `secrets` of the chart's roles, after checking that no rule has a wildcard,
/// `escalate` or `impersonate`, that `bind` is only granted on the ClusterRoles named by
/// `bindable`, that Secrets get rules of their own, that the Lease Role names its Lease, and that
/// every binding names the chart's ServiceAccount and role.
fn check_rbac(chart: &str, objects: &[Value], bindable: &[&str]) -> Result<BTreeSet<String>> {
    let mut secret_verbs = BTreeSet::new();
    let mut bound = BTreeSet::new();
    for role in of_kind(objects, "ClusterRole").into_iter().chain(of_kind(objects, "Role")) {
        for rule in role["rules"].as_array().unwrap() {
            for field in ["apiGroups", "resources", "verbs"] {
                for item in rule[field].as_array().unwrap() {
                    let item = item.as_str().unwrap();
                    assert!(!item.contains('*'), "{} {}: wildcard in {field}: {rule}", role["kind"], name(role));
                }
            }
            for verb in rule["verbs"].as_array().unwrap() {
                let verb = verb.as_str().unwrap();
                assert!(!["escalate", "impersonate"].contains(&verb), "{}: {verb} is never needed", name(role));
                if verb == "bind" {
                    // Binding a role is allowed by name, for the roles the operator binds.
                    assert_eq!(rule["resources"], serde_json::json!(["clusterroles"]), "{rule}");
                    assert_eq!(rule["verbs"], serde_json::json!(["bind"]), "{rule}");
                    let names = rule["resourceNames"].as_array().cloned().unwrap_or_default();
                    assert!(!names.is_empty(), "{chart}: bind without names: {rule}");
                    for n in &names {
                        assert!(bindable.contains(&n.as_str().unwrap_or_default()), "{chart}: bind on {rule}");
                    }
                    bound.extend(names.iter().filter_map(|n| n.as_str().map(str::to_string)));
                }
            }
            if rule["resources"].as_array().unwrap().iter().any(|r| r == "secrets") {
                assert_eq!(rule["resources"].as_array().unwrap().len(), 1, "secrets get a rule of their own: {rule}");
                secret_verbs.extend(rule["verbs"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()));
            }
        }
    }
    // The leader-election Role names its Lease (the operator's default, `<operator>-<version>`)
    // for everything but create; aws-operator's rollout slots (and kvm-operator's, with a
    // cluster limit), whose Lease names depend on the clusters, are one rule without names,
    // granting no more than list, create, update and delete; when sharded, the shard Leases
    // (named after the pods) are another, with no more than their holders and the sharder need.
    // aws-operator's request budget is one more: each replica holds a member Lease named after
    // its pod, lists the others and deletes those unrenewed for long.
    let lease = format!("{chart}-{}", operator_version(chart)?);
    let role = one(objects, "Role");
    let slots = serde_json::json!(["list", "create", "update", "delete"]);
    let budget = serde_json::json!(["get", "list", "create", "update", "delete"]);
    let mut budget_rules = 0;
    for rule in role["rules"].as_array().unwrap() {
        assert_eq!(rule["resources"], serde_json::json!(["leases"]));
        if rule["verbs"] == slots && rule.get("resourceNames").is_none() {
            continue;
        }
        if chart == CHART && rule["verbs"] == budget && rule.get("resourceNames").is_none() {
            budget_rules += 1;
            continue;
        }
        if rule["verbs"] == serde_json::json!(["get", "list", "watch", "update"]) && sharded(objects) {
            assert!(rule.get("resourceNames").is_none(), "{rule}");
        } else if rule["verbs"] != serde_json::json!(["create"]) {
            assert_eq!(rule["resourceNames"], serde_json::json!([lease]));
        }
    }
    assert_eq!(budget_rules, usize::from(chart == CHART), "{chart}: the request budget's member Lease rule");
    let expected: BTreeSet<String> = bindable.iter().map(|b| b.to_string()).collect();
    assert_eq!(bound, expected, "{chart}: the roles the operator may bind");
    // Every binding names the chart's ServiceAccount and role.
    let sa = name(one(objects, "ServiceAccount")).to_string();
    for b in of_kind(objects, "ClusterRoleBinding").into_iter().chain(of_kind(objects, "RoleBinding")) {
        assert_eq!(b["subjects"][0]["name"], sa.as_str());
        assert_eq!(b["roleRef"]["name"], name(b));
    }
    Ok(secret_verbs)
}

/// Whether the Deployment turns sharding on.
fn sharded(objects: &[Value]) -> bool {
    let container = &one(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0];
    container["env"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["name"].as_str().is_some_and(|n| n.ends_with("_OPERATOR_SHARDING")) && e["value"] == "true")
}

#[test]
fn sharding_is_a_value_with_the_replica_count_and_the_shard_lease_rule() -> Result<()> {
    for (chart, env) in [(CHART, "AWS_OPERATOR_SHARDING"), (KVM, "KVM_OPERATOR_SHARDING")] {
        let objects = helm_template(chart, &["ci/sharding-values.yaml"], &[])?;
        let deploy = one(&objects, "Deployment");
        assert_eq!(deploy["spec"]["replicas"], 3, "{chart}");
        let container = &deploy["spec"]["template"]["spec"]["containers"][0];
        let args: Vec<&str> = container["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
        assert!(args.contains(&"--sharding-mode=labels"), "{chart}: {args:?}");
        let vars = container["env"].as_array().unwrap();
        let var = |name: &str| vars.iter().find(|e| e["name"] == name).cloned().unwrap_or(Value::Null);
        assert_eq!(var(env)["value"], "true", "{chart}");
        // The shard Lease is named after the pod.
        assert_eq!(var("POD_NAME")["valueFrom"]["fieldRef"]["fieldPath"], "metadata.name", "{chart}");
        let role = one(&objects, "Role");
        let shard_rule = role["rules"].as_array().unwrap().iter().any(|r| {
            r["verbs"] == serde_json::json!(["get", "list", "watch", "update"]) && r.get("resourceNames").is_none()
        });
        assert!(shard_rule, "{chart}: the Role lets replicas hold and follow shard Leases: {role}");
        let workloads = format!("kvm-operator-workloads-{}", operator_version(KVM)?.replace('.', "-"));
        let bindable: Vec<&str> =
            if chart == KVM { vec!["kvm-operator", "kvm-operator-psp", &workloads] } else { vec![] };
        check_rbac(chart, &objects, &bindable)?;
        // Off by default: no shard Lease rule.
        let plain = helm_template(chart, &["ci/minimal-values.yaml"], &[])?;
        assert!(!sharded(&plain), "{chart}");
        let shard_rules = one(&plain, "Role")["rules"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["verbs"] == serde_json::json!(["get", "list", "watch", "update"]))
            .count();
        assert_eq!(shard_rules, 0, "{chart}");
    }
    Ok(())
}

#[test]
fn rbac_is_least_privilege() -> Result<()> {
    let objects = helm_template(CHART, &["ci/minimal-values.yaml"], &[])?;
    // The operator reads credential and certificate Secrets, holds them with a finalizer
    // (patch), creates a cluster's CAs, certificates and encryption-provider config where absent
    // and renews the certificates it issued (patch), and its drain executor watches their
    // metadata to rebuild a workload-cluster client whose Secret changed; it never updates or
    // deletes one.
    let secret_verbs = check_rbac(CHART, &objects, &[])?;
    assert_eq!(secret_verbs, BTreeSet::from(["create", "get", "list", "patch", "watch"].map(String::from)));

    // kvm-operator also writes each node's Secret (its Ignition) by server-side apply; it binds
    // the node pods to the two ClusterRoles of its values, and itself to its workload role in
    // each cluster's namespace, and only those.
    let workloads = format!("kvm-operator-workloads-{}", operator_version(KVM)?.replace('.', "-"));
    let kvm = helm_template(KVM, &["ci/minimal-values.yaml"], &[])?;
    let secret_verbs = check_rbac(KVM, &kvm, &["kvm-operator", "kvm-operator-psp", &workloads])?;
    assert_eq!(secret_verbs, BTreeSet::from(["create", "get", "list", "patch", "watch"].map(String::from)));
    let other = helm_template(KVM, &["ci/full-values.yaml"], &[])?;
    check_rbac(KVM, &other, &["ci-node-pods", "ci-node-pods-restricted", &workloads])?;
    // No workload can be created, changed or removed through a cluster-wide grant: those
    // rights are in the workload role, which the chart binds nowhere (the operator binds it in
    // its clusters' namespaces).
    let workload_kinds =
        ["deployments", "pods", "services", "persistentvolumeclaims", "ingresses", "serviceaccounts", "endpoints"];
    for role in of_kind(&kvm, "ClusterRole") {
        let role_name = name(role);
        let bound = of_kind(&kvm, "ClusterRoleBinding").iter().any(|b| b["roleRef"]["name"] == role_name);
        for rule in role["rules"].as_array().unwrap() {
            let writes = rule["verbs"]
                .as_array()
                .unwrap()
                .iter()
                .any(|v| ["create", "patch", "update", "delete"].contains(&v.as_str().unwrap()));
            let workload =
                rule["resources"].as_array().unwrap().iter().any(|r| workload_kinds.contains(&r.as_str().unwrap()));
            assert!(!(bound && writes && workload), "{role_name} grants workload writes cluster-wide: {rule}");
        }
        assert_eq!(bound, role_name != workloads, "{role_name}: only the workload role is left unbound");
    }
    Ok(())
}

#[test]
fn credentials_are_irsa_or_a_secret_and_never_in_plain_sight() -> Result<()> {
    let irsa = helm_template(CHART, &["ci/irsa-values.yaml"], &[])?;
    assert_eq!(
        one(&irsa, "ServiceAccount")["metadata"]["annotations"]["eks.amazonaws.com/role-arn"],
        "arn:aws:iam::123456789012:role/aws-operator"
    );
    assert!(of_kind(&irsa, "Secret").is_empty());

    let yaml = packaging::helm_template_yaml(CHART, &["ci/secret-values.yaml"], &[])?;
    let objects = parse_objects(&yaml)?;
    let secret = one(&objects, "Secret");
    let container = &one(&objects, "Deployment")["spec"]["template"]["spec"]["containers"][0];
    let env = container["env"].as_array().unwrap();
    for key in ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"] {
        let e = env.iter().find(|e| e["name"] == key).with_context(|| format!("{key} in env"))?;
        assert_eq!(e["valueFrom"]["secretKeyRef"]["name"], name(secret));
        assert_eq!(e["valueFrom"]["secretKeyRef"]["key"], key);
    }
    // The secret key appears in the Secret and nowhere else.
    for o in objects.iter().filter(|o| o["kind"] != "Secret") {
        assert!(!o.to_string().contains("ci-secret-access-key-not-real"), "{} {} holds the key", o["kind"], name(o));
    }

    let existing = helm_template(CHART, &["ci/minimal-footprint-values.yaml"], &[])?;
    assert!(of_kind(&existing, "Secret").is_empty());
    assert!(existing.iter().any(|o| o.to_string().contains("\"aws-operator-credentials\"")));
    Ok(())
}

#[test]
fn operator_configuration_comes_from_values() -> Result<()> {
    let objects = helm_template(CHART, &["ci/irsa-values.yaml"], &[])?;
    let deploy = one(&objects, "Deployment");
    let container = &deploy["spec"]["template"]["spec"]["containers"][0];
    let args: Vec<&str> = container["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    for want in [
        "daemon",
        "--installation=ci",
        "--region=eu-west-1",
        "--control-plane-role-arn=arn:aws:iam::123456789012:role/aws-operator-control-plane",
        "--credential-namespaces=giantswarm,credentials",
        "--tenant-role-external-id=ci-installation",
        "--ipam-range=10.2.0.0/16",
        "--subnet-mask-bits=25",
        "--route-tables=ci-private-0,ci-private-1",
        "--ami-file=/etc/aws-operator/ami.json",
        "--terminate-unhealthy-nodes=false",
        "--unhealthy-node-threshold-seconds=1200",
        "--unhealthy-node-cooldown-seconds=300",
        "--unhealthy-node-resync-seconds=60",
        "--max-rolling-clusters=2",
        "--drift-detection-interval-seconds=7200",
        "--drift-detections-per-account-per-minute=4",
        "--aws-read-requests-per-second=12.5",
        "--aws-write-requests-per-second=3",
        "--aws-request-burst-seconds=2",
        "--aws-request-budget-lease-seconds=20",
        "--ssh-users=alice:ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIa alice",
        "--sso-public-key=ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIs sso-ca",
        "--registry-mirrors=https://mirror.example.com",
        "--s3-bucket-tagging=false",
        "--access-log-expiration-days=30",
        "--public-api-allowlist-enabled=true",
        "--public-api-allowlist-cidrs=203.0.113.0/24,198.51.100.7/32",
        "--private-api-allowlist-enabled=true",
    ] {
        assert!(args.contains(&want), "{want} missing from {args:?}");
    }
    assert!(!args.iter().any(|a| a.starts_with("--private-api-allowlist-cidrs")), "{args:?}");
    assert!(args.contains(&"--pause-image=gsoci.azurecr.io/giantswarm/pause:3.10"), "{args:?}");
    // The Docker Hub token comes from its Secret, never as a flag.
    assert!(!args.iter().any(|a| a.starts_with("--dockerhub-token")), "{args:?}");
    assert_eq!(
        dockerhub_env(container, "AWS_OPERATOR_DOCKERHUB_TOKEN"),
        serde_json::json!({"name": "ci-dockerhub", "key": "token"})
    );
    assert_eq!(
        container["image"],
        "ghcr.io/giantswarm-rs/aws-operator@sha256:0000000000000000000000000000000000000000000000000000000000000000"
    );
    let cm = one(&objects, "ConfigMap");
    let amis: Value = serde_json::from_str(cm["data"]["ami.json"].as_str().unwrap())?;
    assert_eq!(amis["3815.2.0"]["eu-west-1"], "ami-0123456789abcdef0");
    let mount = container["volumeMounts"].as_array().unwrap().iter().find(|m| m["name"] == "amis").unwrap();
    assert_eq!(mount["mountPath"], "/etc/aws-operator");
    // A changed AMI map rolls the pods.
    let other = helm_template(CHART, &["ci/minimal-values.yaml"], &[])?;
    let annotation = |objs: &[Value]| {
        one(objs, "Deployment")["spec"]["template"]["metadata"]["annotations"]["checksum/amis"].clone()
    };
    assert_ne!(annotation(&objects), annotation(&other));
    let version = operator_version(CHART)?;
    let plain = one(&other, "Deployment")["spec"]["template"]["spec"]["containers"][0]["image"].clone();
    assert_eq!(
        plain,
        format!("ghcr.io/giantswarm-rs/aws-operator:{version}").as_str(),
        "the image tag is the crate version"
    );
    Ok(())
}

#[test]
fn kvm_operator_needs_dns_servers_and_bad_values_are_rejected_by_the_schema() {
    let err = helm_template(KVM, &[], &[]).unwrap_err().to_string();
    assert!(err.contains("operator.dnsServers is required"), "{err}");
    let err = helm(
        KVM,
        &["template", KVM, ".", "--set", "operator.dnsServers={10.0.0.1}", "--set", "operator.pollSeconds=0"],
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("pollSeconds"), "{err}");
    let err = helm(
        KVM,
        &["template", KVM, ".", "--set", "operator.dnsServers={10.0.0.1}", "--set", "operator.clusterRole=x"],
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("clusterRole"), "a misspelt key must be rejected: {err}");
}

/// The `secretKeyRef` of environment variable `name` of `container`.
fn dockerhub_env(container: &Value, name: &str) -> Value {
    let env = container["env"].as_array().expect("an environment");
    let var = env.iter().find(|e| e["name"] == name).unwrap_or_else(|| panic!("{name} missing from {env:?}"));
    assert!(var.get("value").is_none(), "{var}");
    var["valueFrom"]["secretKeyRef"].clone()
}

#[test]
fn kvm_operator_configuration_comes_from_values() -> Result<()> {
    let objects = helm_template(KVM, &["ci/full-values.yaml"], &[])?;
    let container = &one(&objects, "Deployment")["spec"]["template"]["spec"]["containers"][0];
    let args: Vec<&str> = container["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    for want in [
        "daemon",
        "--dns-servers=1.1.1.1,8.8.8.8",
        "--ntp-servers=0.pool.ntp.org,1.pool.ntp.org",
        "--cluster-role-general=ci-node-pods",
        "--cluster-role-psp=ci-node-pods-restricted",
        "--http-proxy=http://proxy.ci:3128",
        "--no-proxy=10.0.0.0/8,.svc",
        "--registry-mirrors=mirror.ci.example",
        "--sso-public-key=ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKEFAK ci",
        "--certificates-namespace=giantswarm-certs",
        "--drain-timeout-seconds=1800",
        "--max-rolling-clusters=2",
        "--pause-image=registry.ci.example/giantswarm/pause:3.10",
    ] {
        assert!(args.contains(&want), "{want} missing from {args:?}");
    }
    assert!(!args.iter().any(|a| a.starts_with("--dockerhub-token")), "{args:?}");
    assert_eq!(
        dockerhub_env(container, "KVM_OPERATOR_DOCKERHUB_TOKEN"),
        serde_json::json!({"name": "ci-dockerhub", "key": "auth"})
    );
    // A cluster limit: the Role grants the rollout slots' Leases.
    let slots = serde_json::json!(["list", "create", "update", "delete"]);
    assert!(one(&objects, "Role")["rules"].as_array().unwrap().iter().any(|r| r["verbs"] == slots));
    assert_eq!(
        container["image"],
        "ghcr.io/giantswarm-rs/kvm-operator@sha256:0000000000000000000000000000000000000000000000000000000000000000"
    );
    let minimal = helm_template(KVM, &["ci/minimal-values.yaml"], &[])?;
    let container = &one(&minimal, "Deployment")["spec"]["template"]["spec"]["containers"][0];
    let args: Vec<&str> = container["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    for want in
        ["--dns-servers=10.96.0.10", "--cluster-role-general=kvm-operator", "--cluster-role-psp=kvm-operator-psp"]
    {
        assert!(args.contains(&want), "{want} missing from {args:?}");
    }
    assert!(
        !args.iter().any(|a| a.starts_with("--http-proxy") || a.starts_with("--certificates-namespace")),
        "{args:?}"
    );
    let version = operator_version(KVM)?;
    assert_eq!(container["image"], format!("ghcr.io/giantswarm-rs/kvm-operator:{version}").as_str());
    // The kvm-operator's pod needs no configuration file and no credentials.
    assert!(of_kind(&minimal, "ConfigMap").is_empty() && of_kind(&minimal, "Secret").is_empty());
    Ok(())
}

#[test]
fn monitoring_objects_only_where_their_crds_are_served() -> Result<()> {
    let source = |path: &str| std::fs::read_to_string(packaging::repo_root().join(path));
    // The sources registering each chart's metrics: operatorkit's, node-lifecycle's drain
    // executor's, and the operator's own.
    let common = [source("crates/operatorkit/src/metrics.rs")?, source("crates/node-lifecycle/src/drain/mod.rs")?];
    let charts = [
        (
            CHART,
            vec![
                "AWSOperatorReconcileErrors",
                "AWSOperatorStackFailed",
                "AWSOperatorDrainTimeouts",
                "AWSOperatorNoLeader",
                "AWSOperatorStacksDrifted",
            ],
            source("operators/aws-operator/src/context.rs")? + &source("operators/aws-operator/src/drift/mod.rs")?,
        ),
        (KVM, vec!["KVMOperatorReconcileErrors", "KVMOperatorDrainTimeouts", "KVMOperatorNoLeader"], String::new()),
    ];
    for (chart, wanted, own) in charts {
        let without = helm_template(chart, &["ci/minimal-values.yaml"], &[])?;
        assert!(of_kind(&without, "ServiceMonitor").is_empty() && of_kind(&without, "PrometheusRule").is_empty());
        assert_eq!(one(&without, "Service")["spec"]["ports"][0]["name"], "metrics");

        let with = helm_template(chart, &["ci/minimal-values.yaml"], &MONITORING)?;
        one(&with, "ServiceMonitor");
        let rule = one(&with, "PrometheusRule");
        let rules = rule["spec"]["groups"][0]["rules"].as_array().unwrap();
        let alerts: BTreeSet<&str> = rules.iter().map(|r| r["alert"].as_str().unwrap()).collect();
        for want in wanted {
            assert!(alerts.contains(want), "{chart}: {want} missing from {alerts:?}");
        }
        // Every metric an alert reads is one the operator registers.
        let sources = format!("{}\n{own}", common.join("\n"));
        for r in rules {
            let expr = r["expr"].as_str().unwrap();
            for metric in expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).filter(|w| {
                ["operatorkit_", "aws_operator_", "node_lifecycle_"].iter().any(|prefix| w.starts_with(prefix))
            }) {
                let registered = ["_total", "_count", "_sum", "_bucket"]
                    .iter()
                    .fold(metric, |m, suffix| m.strip_suffix(suffix).unwrap_or(m));
                let short = registered.trim_start_matches("operatorkit_").trim_start_matches("node_lifecycle_");
                assert!(
                    sources.contains(&format!("\"{registered}\"")) || sources.contains(&format!("\"{short}\"")),
                    "{chart}: alert {} reads {metric}, which the operator does not register",
                    r["alert"]
                );
            }
            // Each alert only sees this version's series.
            assert!(expr.contains(&format!("service=\"{}\"", name(rule))), "{expr}");
        }
    }
    Ok(())
}

#[test]
fn the_crds_ship_with_the_chart() -> Result<()> {
    let charts = [
        (
            CHART,
            vec![
                "awsclusters.infrastructure.giantswarm.io",
                "awsconfigs.provider.giantswarm.io",
                "awscontrolplanes.infrastructure.giantswarm.io",
                "awsmachinedeployments.infrastructure.giantswarm.io",
                "networkpools.infrastructure.giantswarm.io",
                "releases.release.giantswarm.io",
                "drainerconfigs.core.giantswarm.io",
            ],
        ),
        (
            KVM,
            vec![
                "kvmconfigs.provider.giantswarm.io",
                "releases.release.giantswarm.io",
                "drainerconfigs.core.giantswarm.io",
            ],
        ),
    ];
    for (chart, wanted) in charts {
        let objects = helm_template(chart, &["ci/minimal-values.yaml"], &[])?;
        let crds: BTreeSet<&str> = of_kind(&objects, "CustomResourceDefinition").into_iter().map(name).collect();
        assert_eq!(crds, wanted.into_iter().collect::<BTreeSet<_>>(), "{chart}");
    }
    Ok(())
}

#[test]
fn two_versions_install_side_by_side_without_sharing_a_name_or_a_pod() -> Result<()> {
    for chart in CHARTS {
        two_versions_side_by_side(chart).with_context(|| chart.to_string())?;
    }
    Ok(())
}

fn two_versions_side_by_side(chart: &str) -> Result<()> {
    // The CRDs are the one thing versions share (Helm installs them once and never replaces them).
    let current: Vec<Value> = helm_template(chart, &["ci/minimal-values.yaml"], &MONITORING)?
        .into_iter()
        .filter(|o| o["kind"] != "CustomResourceDefinition")
        .collect();
    let tmp = std::env::temp_dir().join(format!("chart-side-by-side-{chart}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp)?;
    let other_chart = packaging::chart_copy_with_version(chart, &tmp, "99.0.0")?;
    let other = packaging::helm_in(
        &other_chart,
        &[
            "template",
            &format!("{chart}-next"),
            ".",
            "--namespace",
            "giantswarm",
            "--values",
            "ci/minimal-values.yaml",
            "--api-versions",
            MONITORING[0],
            "--api-versions",
            MONITORING[1],
        ],
    )?;
    let other = parse_objects(&other)?;
    std::fs::remove_dir_all(&tmp)?;
    let key = |o: &Value| format!("{}/{}", o["kind"].as_str().unwrap(), name(o));
    let a: BTreeSet<String> = current.iter().map(key).collect();
    let b: BTreeSet<String> = other.iter().map(key).collect();
    let shared: Vec<&String> = a.intersection(&b).collect();
    assert!(shared.is_empty(), "objects both versions would own: {shared:?}");
    let version = operator_version(chart)?.replace('.', "-");
    for o in &current {
        assert!(name(o).ends_with(&version), "{} lacks the version in its name", key(o));
    }
    // Neither version's selectors pick the other's pods.
    let pod_labels = |objs: &[Value]| one(objs, "Deployment")["spec"]["template"]["metadata"]["labels"].clone();
    let selects =
        |selector: &Value, labels: &Value| selector.as_object().unwrap().iter().all(|(k, v)| labels.get(k) == Some(v));
    for (mine, theirs) in [(&current, &other), (&other, &current)] {
        let labels = pod_labels(theirs);
        for o in mine.iter() {
            let selector = match o["kind"].as_str().unwrap() {
                "Deployment" | "PodDisruptionBudget" => &o["spec"]["selector"]["matchLabels"],
                "Service" => &o["spec"]["selector"],
                "NetworkPolicy" => &o["spec"]["podSelector"]["matchLabels"],
                _ => continue,
            };
            assert!(!selects(selector, &labels), "{} selects the other version's pods", key(o));
        }
    }
    Ok(())
}
