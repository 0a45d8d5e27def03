//! The operator charts installed by the real Helm 4 into a cluster that says no: testenv with
//! TLS, bearer tokens, RBAC and Pod Security, and its simulation of three nodes running the
//! pods. Helm acts as an administrator (the kubeconfig's token, in `system:masters`); the
//! release namespace enforces (and warns about) the `restricted` Pod Security level, so the
//! Deployment's pods are only created when they meet it.
//!
//! Each test starts its own server: aws-operator's install, upgrade, a second version beside the
//! first, and uninstall of both; kvm-operator's install and uninstall. The simulation makes pods Ready as a kubelet would once their containers
//! run; it runs no image and no probe (the image test of each operator runs the entrypoint to
//! `/readyz`).
//!
//! Helm is the binary `make venv` installs (`$HELM`, else `.venv/bin/helm`); without it these
//! tests fail, as the chart tests do.

use std::collections::BTreeSet;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::{Discovery, Scope, verbs};
use packaging::{HelmOutput, chart_dir, helm_template, parse_objects};
use serde_json::{Value, json};
use testenv::{SimConfig, TestEnv};

const CHART: &str = "aws-operator";
/// The release and namespace `packaging::helm_template` renders for, so the live objects can be
/// compared with a render of the same chart and values.
const RELEASE: &str = "aws-operator";
const NAMESPACE: &str = "giantswarm";
const VALUES: &str = "ci/minimal-values.yaml";
/// How long the cluster may take to reach a state the test waits for.
const WAIT: Duration = Duration::from_secs(60);

/// A fresh secure cluster with three simulated nodes and the release namespace, which enforces
/// and warns about `restricted`.
async fn cluster() -> Result<TestEnv> {
    let env = TestEnv::builder().secure().simulation(SimConfig::with_nodes(3)).start().await?;
    let namespaces: Api<Namespace> = Api::all(env.client());
    let ns: Namespace = serde_json::from_value(json!({
        "metadata": {
            "name": NAMESPACE,
            "labels": {
                "pod-security.kubernetes.io/enforce": "restricted",
                "pod-security.kubernetes.io/enforce-version": "latest",
                "pod-security.kubernetes.io/warn": "restricted",
                "pod-security.kubernetes.io/warn-version": "latest",
            },
        },
    }))?;
    namespaces.create(&PostParams::default(), &ns).await?;
    env.sim().context("the simulation is on")?.wait_idle().await?;
    Ok(env)
}

/// Helm with `args`, run in `dir` against `env` as its administrator, off the async runtime
/// (the server shares it).
async fn helm(env: &TestEnv, dir: &Path, args: &[&str]) -> Result<HelmOutput> {
    let kubeconfig = env.kubeconfig_path().to_path_buf();
    let dir = dir.to_path_buf();
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        packaging::helm_against(&kubeconfig, &dir, &args)
    })
    .await?
    .map_err(Into::into)
}

/// `helm install` (or `upgrade`) of the chart in `dir` as `release`, waiting for its objects
/// to be ready. Fails when the API server warned about Pod Security.
async fn install(env: &TestEnv, dir: &Path, verb: &str, release: &str, extra: &[&str]) -> Result<HelmOutput> {
    let mut args = vec![verb, release, ".", "--namespace", NAMESPACE, "--values", VALUES, "--wait", "--timeout", "2m"];
    args.extend_from_slice(extra);
    let out = helm(env, dir, &args).await?;
    if out.stderr.contains("PodSecurity") {
        bail!("helm {verb} {release}: the API server warned about Pod Security:\n{}", out.stderr);
    }
    Ok(out)
}

/// Poll `probe` until it yields a value, failing with `what` and the last observation after
/// [`WAIT`].
async fn eventually<T, F, Fut>(what: &str, mut probe: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let start = std::time::Instant::now();
    loop {
        match probe().await {
            Ok(value) => return Ok(value),
            Err(last) if start.elapsed() > WAIT => bail!("{what}: not within {WAIT:?}; last seen: {last}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

fn name(o: &Value) -> &str {
    o["metadata"]["name"].as_str().unwrap_or_default()
}

fn one<'a>(objects: &'a [Value], kind: &str) -> Result<&'a Value> {
    let found: Vec<&Value> = objects.iter().filter(|o| o["kind"] == kind).collect();
    match found.as_slice() {
        [o] => Ok(o),
        _ => bail!("expected one {kind}, rendered {}", found.len()),
    }
}

/// The Deployment `name` is Available with all its replicas from its current template: status
/// of its generation, every replica updated, ready and available, and the `Available`
/// condition true. Returns it.
async fn available(env: &TestEnv, name: &str, replicas: i32) -> Result<Deployment> {
    let deployments: Api<Deployment> = Api::namespaced(env.client(), NAMESPACE);
    eventually(&format!("Deployment {name} Available with {replicas} replicas"), || async {
        let d = deployments.get(name).await.map_err(|e| e.to_string())?;
        let status = d.status.clone().unwrap_or_default();
        let condition = |t: &str| {
            status.conditions.iter().flatten().find(|c| c.type_ == t).map(|c| c.status.clone()).unwrap_or_default()
        };
        let done = status.observed_generation == d.metadata.generation
            && status.replicas == Some(replicas)
            && status.updated_replicas == Some(replicas)
            && status.ready_replicas == Some(replicas)
            && status.available_replicas == Some(replicas)
            && condition("Available") == "True";
        if done { Ok(d) } else { Err(format!("{status:?}")) }
    })
    .await
}

/// The pods the Deployment selects: all Running and Ready, from its current ReplicaSet.
async fn pods_of(env: &TestEnv, deployment: &Deployment) -> Result<Vec<Pod>> {
    let labels = deployment.spec.as_ref().and_then(|s| s.selector.match_labels.clone()).unwrap_or_default();
    let selector: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let pods: Api<Pod> = Api::namespaced(env.client(), NAMESPACE);
    let list = pods.list(&ListParams::default().labels(&selector.join(","))).await?;
    Ok(list.items.into_iter().filter(|p| p.metadata.deletion_timestamp.is_none()).collect())
}

fn is_ready(pod: &Pod) -> bool {
    let status = pod.status.as_ref();
    status.and_then(|s| s.phase.as_deref()) == Some("Running")
        && status
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .any(|c| c.type_ == "Ready" && c.status == "True")
}

/// The rendered Deployment is Available with its two replicas Running and Ready, on two
/// nodes; its pods.
async fn two_ready_replicas_on_two_nodes(env: &TestEnv, rendered: &[Value]) -> Result<Vec<Pod>> {
    let deployment = available(env, &deployment_name(rendered)?, 2).await?;
    let pods = pods_of(env, &deployment).await?;
    assert_eq!(pods.len(), 2, "{pods:?}");
    assert!(pods.iter().all(is_ready), "{pods:?}");
    let nodes: BTreeSet<String> =
        pods.iter().filter_map(|p| p.spec.as_ref().and_then(|s| s.node_name.clone())).collect();
    assert_eq!(nodes.len(), 2, "the replicas share a node: {nodes:?}");
    Ok(pods)
}

/// Wait until the cluster holds exactly `expected` ([`everything`]): what releases created is
/// gone, and nothing else is.
async fn only(env: &TestEnv, expected: &BTreeSet<String>) -> Result<()> {
    eventually("everything the releases created to go", || async {
        let now = everything(env).await.map_err(|e| e.to_string())?;
        if &now == expected {
            return Ok(());
        }
        let left: Vec<&String> = now.difference(expected).collect();
        let gone: Vec<&String> = expected.difference(&now).collect();
        Err(format!("left: {left:?}; gone: {gone:?}"))
    })
    .await
}

/// Every field `rendered` sets has the same value in `live` (the server may add defaults).
fn contains(live: &Value, rendered: &Value, path: &str, differences: &mut Vec<String>) {
    match (live, rendered) {
        (Value::Object(l), Value::Object(r)) => {
            for (k, v) in r {
                contains(l.get(k).unwrap_or(&Value::Null), v, &format!("{path}.{k}"), differences);
            }
        }
        (Value::Array(l), Value::Array(r)) if l.len() == r.len() => {
            for (i, (l, r)) in l.iter().zip(r).enumerate() {
                contains(l, r, &format!("{path}[{i}]"), differences);
            }
        }
        (l, r) if l == r => {}
        // 0.0 rendered is 0 once stored: JSON numbers are compared by value.
        (Value::Number(l), Value::Number(r)) if l.as_f64() == r.as_f64() => {}
        (l, r) => differences.push(format!("{path}: rendered {r}, live {l}")),
    }
}

/// The live object of a rendered one, found through discovery.
async fn live(env: &TestEnv, discovery: &Discovery, rendered: &Value) -> Result<Option<Value>> {
    let (group, version) = match rendered["apiVersion"].as_str().context("apiVersion")?.split_once('/') {
        Some((g, v)) => (g.to_string(), v.to_string()),
        None => (String::new(), rendered["apiVersion"].as_str().unwrap_or_default().to_string()),
    };
    let gvk = GroupVersionKind::gvk(&group, &version, rendered["kind"].as_str().context("kind")?);
    let (resource, caps) = discovery.resolve_gvk(&gvk).with_context(|| format!("the cluster serves no {gvk:?}"))?;
    let api: Api<DynamicObject> = match caps.scope {
        Scope::Namespaced => Api::namespaced_with(env.client(), NAMESPACE, &resource),
        Scope::Cluster => Api::all_with(env.client(), &resource),
    };
    Ok(api.get_opt(name(rendered)).await?.map(|o| serde_json::to_value(o).unwrap_or_default()))
}

/// Every object of `rendered` exists in the cluster with every field the chart sets (Helm
/// writes what it renders; only the server's additions may differ). Returns their kinds.
async fn live_as_rendered(env: &TestEnv, rendered: &[Value]) -> Result<BTreeSet<String>> {
    let discovery = Discovery::new(env.client()).run().await?;
    let mut kinds = BTreeSet::new();
    for object in rendered {
        let kind = object["kind"].as_str().unwrap_or_default();
        let live = live(env, &discovery, object)
            .await?
            .with_context(|| format!("{kind} {} was rendered but is not in the cluster", name(object)))?;
        let mut differences = Vec::new();
        contains(&live, object, kind, &mut differences);
        assert!(differences.is_empty(), "{kind} {}: {differences:#?}", name(object));
        kinds.insert(kind.to_string());
    }
    Ok(kinds)
}

/// Kind, namespace and name of every object the cluster lists, of every listable kind.
async fn everything(env: &TestEnv) -> Result<BTreeSet<String>> {
    let discovery = Discovery::new(env.client()).run().await?;
    let mut out = BTreeSet::new();
    for group in discovery.groups() {
        for (resource, caps) in group.recommended_resources() {
            if !caps.supports_operation(verbs::LIST) {
                continue;
            }
            let api: Api<DynamicObject> = Api::all_with(env.client(), &resource);
            for o in api.list(&ListParams::default()).await?.items {
                let ns = o.metadata.namespace.clone().unwrap_or_default();
                out.insert(format!(
                    "{}/{} {ns}/{}",
                    resource.group,
                    resource.kind,
                    o.metadata.name.unwrap_or_default()
                ));
            }
        }
    }
    Ok(out)
}

/// The objects a release of the chart in `dir` holds (`helm get manifest`): kind and name.
async fn manifest(env: &TestEnv, dir: &Path, release: &str) -> Result<BTreeSet<String>> {
    let out = helm(env, dir, &["get", "manifest", release, "--namespace", NAMESPACE]).await?;
    Ok(parse_objects(&out.stdout)?
        .iter()
        .map(|o| format!("{}/{}", o["kind"].as_str().unwrap_or_default(), name(o)))
        .collect())
}

/// A copy of the chart as its next release (another version), in a directory removed on drop.
fn next_version_chart() -> Result<(tempfile::TempDir, PathBuf)> {
    let dir = tempfile::tempdir()?;
    let chart = packaging::chart_copy_with_version(CHART, dir.path(), "99.0.0")?;
    Ok((dir, chart))
}

/// The Deployment's name for the chart in `dir`, as rendered.
fn deployment_name(objects: &[Value]) -> Result<String> {
    Ok(name(one(objects, "Deployment")?).to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn install_into_a_restricted_namespace_makes_the_deployment_available_with_every_object_as_rendered() -> Result<()>
{
    let env = cluster().await?;
    let out = install(&env, &chart_dir(CHART), "install", RELEASE, &[]).await?;
    assert!(out.stdout.contains("STATUS: deployed"), "{}", out.stdout);

    let rendered = helm_template(CHART, &[VALUES], &[])?;
    // Both replicas run, ready, admitted as `restricted`, spread over two nodes.
    let pods = two_ready_replicas_on_two_nodes(&env, &rendered).await?;
    for pod in &pods {
        let sa = pod.spec.as_ref().and_then(|s| s.service_account_name.clone());
        assert_eq!(sa.as_deref(), Some(name(one(&rendered, "ServiceAccount")?)));
    }

    // Every rendered object exists with what the chart says, CRDs included.
    let kinds = live_as_rendered(&env, &rendered).await?;
    for want in [
        "CustomResourceDefinition",
        "Deployment",
        "PodDisruptionBudget",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "ConfigMap",
        "Service",
        "NetworkPolicy",
    ] {
        assert!(kinds.contains(want), "the values set renders no {want}: {kinds:?}");
    }

    // The namespace does refuse what `restricted` forbids: the pods above were checked.
    let root: Pod = serde_json::from_value(json!({
        "metadata": {"name": "root"},
        "spec": {"containers": [{"name": "c", "image": "busybox", "securityContext": {"runAsUser": 0}}]},
    }))?;
    let refused = Api::<Pod>::namespaced(env.client(), NAMESPACE).create(&PostParams::default(), &root).await;
    assert!(
        matches!(&refused, Err(kube::Error::Api(s)) if s.code == 403 && s.message.contains("violates PodSecurity \"restricted:latest\"")),
        "{refused:?}"
    );

    // The budget counts the two replicas and lets one go at a time.
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(env.client(), NAMESPACE);
    let pdb = name(one(&rendered, "PodDisruptionBudget")?).to_string();
    eventually("the PodDisruptionBudget's status", || async {
        let s = pdbs.get(&pdb).await.map_err(|e| e.to_string())?.status.unwrap_or_default();
        if (s.current_healthy, s.desired_healthy, s.disruptions_allowed) == (2, 1, 1) {
            Ok(())
        } else {
            Err(format!("{s:?}"))
        }
    })
    .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upgrade_with_a_changed_value_rolls_the_deployment_and_it_is_available_again() -> Result<()> {
    let env = cluster().await?;
    let chart = chart_dir(CHART);
    install(&env, &chart, "install", RELEASE, &[]).await?;
    let name = deployment_name(&helm_template(CHART, &[VALUES], &[])?)?;
    let before = available(&env, &name, 2).await?;
    let hashes = |pods: &[Pod]| -> BTreeSet<String> {
        pods.iter()
            .filter_map(|p| p.metadata.labels.as_ref()?.get("pod-template-hash").cloned())
            .collect::<BTreeSet<_>>()
    };
    let old_hashes = hashes(&pods_of(&env, &before).await?);
    assert_eq!(old_hashes.len(), 1, "{old_hashes:?}");

    let out = install(&env, &chart, "upgrade", RELEASE, &["--set", "logLevel=debug"]).await?;
    assert!(out.stdout.contains("has been upgraded"), "{}", out.stdout);
    let after = available(&env, &name, 2).await?;
    let container = &after.spec.as_ref().context("spec")?.template.spec.as_ref().context("pod spec")?.containers[0];
    let log_level = container.env.iter().flatten().find(|e| e.name == "RUST_LOG").and_then(|e| e.value.clone());
    assert_eq!(log_level.as_deref(), Some("debug"), "the new value reached the pod template");
    assert_eq!(
        after
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("deployment.kubernetes.io/revision"))
            .map(String::as_str),
        Some("2"),
        "the Deployment rolled out a second ReplicaSet"
    );
    // Every pod is of the new template, ready; the old ReplicaSet is scaled to zero.
    let pods = eventually("only pods of the new template", || async {
        let pods = pods_of(&env, &after).await.map_err(|e| e.to_string())?;
        let h = hashes(&pods);
        if pods.len() == 2 && h.len() == 1 && h.is_disjoint(&old_hashes) && pods.iter().all(is_ready) {
            Ok(pods)
        } else {
            Err(format!("{} pods, template hashes {h:?}", pods.len()))
        }
    })
    .await?;
    let replica_sets: Api<ReplicaSet> = Api::namespaced(env.client(), NAMESPACE);
    let old = replica_sets.get(&format!("{name}-{}", old_hashes.first().context("hash")?)).await?;
    assert_eq!(old.spec.and_then(|s| s.replicas), Some(0), "the old ReplicaSet is scaled down");
    assert_eq!(pods.len(), 2);
    let status = helm(&env, &chart, &["status", RELEASE, "--namespace", NAMESPACE, "-o", "json"]).await?;
    let status: Value = serde_json::from_str(&status.stdout)?;
    assert_eq!((status["version"].as_i64(), status["info"]["status"].as_str()), (Some(2), Some("deployed")));
    Ok(())
}

/// The first version and the next installed in one namespace; returns the next's chart copy.
async fn two_versions(env: &TestEnv) -> Result<(tempfile::TempDir, PathBuf)> {
    install(env, &chart_dir(CHART), "install", RELEASE, &[]).await?;
    let (tmp, next) = next_version_chart()?;
    install(env, &next, "install", "aws-operator-next", &[]).await?;
    Ok((tmp, next))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_version_installs_beside_the_first_and_they_share_no_object() -> Result<()> {
    let env = cluster().await?;
    let (_tmp, next) = two_versions(&env).await?;
    let first = deployment_name(&helm_template(CHART, &[VALUES], &[])?)?;
    let second = deployment_name(&parse_objects(&packaging::helm_in(
        &next,
        &["template", "aws-operator-next", ".", "--namespace", NAMESPACE, "--values", VALUES],
    )?)?)?;
    assert_ne!(first, second);
    let (a, b) = (available(&env, &first, 2).await?, available(&env, &second, 2).await?);

    // No object is in both releases.
    let (mine, theirs) =
        (manifest(&env, &chart_dir(CHART), RELEASE).await?, manifest(&env, &next, "aws-operator-next").await?);
    assert!(mine.len() >= 10, "{mine:?}");
    let shared: Vec<&String> = mine.intersection(&theirs).collect();
    assert!(shared.is_empty(), "objects both releases hold: {shared:?}");
    // Each Deployment selects its own two pods; the namespace holds these four.
    let (pods_a, pods_b) = (pods_of(&env, &a).await?, pods_of(&env, &b).await?);
    let names = |pods: &[Pod]| -> BTreeSet<String> { pods.iter().filter_map(|p| p.metadata.name.clone()).collect() };
    assert_eq!((pods_a.len(), pods_b.len()), (2, 2));
    assert!(names(&pods_a).is_disjoint(&names(&pods_b)));
    assert!(pods_a.iter().chain(&pods_b).all(is_ready));
    let all: Api<Pod> = Api::namespaced(env.client(), NAMESPACE);
    assert_eq!(all.list(&ListParams::default()).await?.items.len(), 4);
    // Each version runs as its own ServiceAccount.
    let accounts: BTreeSet<Option<String>> =
        pods_a.iter().chain(&pods_b).map(|p| p.spec.as_ref().and_then(|s| s.service_account_name.clone())).collect();
    assert_eq!(accounts.len(), 2, "{accounts:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uninstall_of_both_versions_leaves_nothing_but_the_crds() -> Result<()> {
    let env = cluster().await?;
    let before = everything(&env).await?;
    let (_tmp, next) = two_versions(&env).await?;
    let installed = everything(&env).await?;
    let crds: BTreeSet<String> =
        installed.iter().filter(|k| k.starts_with("apiextensions.k8s.io/CustomResourceDefinition ")).cloned().collect();
    // The chart's own CRDs, one per file in its `crds/`.
    let shipped = std::fs::read_dir(chart_dir(CHART).join("crds"))?.count();
    assert_eq!(shipped, 7, "the chart ships 7 CRDs");
    assert_eq!(crds.len(), shipped, "{crds:?}");

    for (dir, release) in [(chart_dir(CHART), RELEASE), (next, "aws-operator-next")] {
        let out =
            helm(&env, &dir, &["uninstall", release, "--namespace", NAMESPACE, "--wait", "--timeout", "2m"]).await?;
        assert!(out.stdout.contains(&format!("release \"{release}\" uninstalled")), "{}", out.stdout);
    }
    let mut expected = before.clone();
    expected.extend(crds);
    only(&env, &expected).await?;
    let list = helm(&env, &chart_dir(CHART), &["list", "--all-namespaces", "-o", "json"]).await?;
    assert_eq!(list.stdout.trim(), "[]", "{}", list.stdout);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kvm_operator_installs_into_a_restricted_namespace_becomes_available_and_uninstalls_to_its_crds() -> Result<()>
{
    const KVM: &str = "kvm-operator";
    let env = cluster().await?;
    let before = everything(&env).await?;
    let chart = chart_dir(KVM);
    let out = install(&env, &chart, "install", KVM, &[]).await?;
    assert!(out.stdout.contains("STATUS: deployed"), "{}", out.stdout);

    let rendered = helm_template(KVM, &[VALUES], &[])?;
    two_ready_replicas_on_two_nodes(&env, &rendered).await?;
    let kinds = live_as_rendered(&env, &rendered).await?;
    for want in [
        "CustomResourceDefinition",
        "Deployment",
        "PodDisruptionBudget",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Service",
        "NetworkPolicy",
    ] {
        assert!(kinds.contains(want), "the values set renders no {want}: {kinds:?}");
    }
    let installed = everything(&env).await?;
    let crds: BTreeSet<String> =
        installed.iter().filter(|k| k.starts_with("apiextensions.k8s.io/CustomResourceDefinition ")).cloned().collect();
    assert_eq!(crds.len(), 3, "{crds:?}");

    let out = helm(&env, &chart, &["uninstall", KVM, "--namespace", NAMESPACE, "--wait", "--timeout", "2m"]).await?;
    assert!(out.stdout.contains(&format!("release \"{KVM}\" uninstalled")), "{}", out.stdout);
    let mut expected = before;
    expected.extend(crds);
    only(&env, &expected).await
}
