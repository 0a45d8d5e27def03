//! `kvm-operator describe` against the operator's own world (management and workload cluster,
//! see `support`): the tree of the example cluster once `Created`, with a worker whose
//! workload-cluster node is NotReady, and with a change of the workers held while a
//! workload-cluster master is cordoned. Each output is compared with a text fixture in
//! `tests/fixtures/describe/` that names the condition each line must show; ages, pod-name
//! suffixes and VM IPs are normalised. `UPDATE_FIXTURES=1` rewrites the fixtures.

mod support;

use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use node_lifecycle::describe::{DescribeArgs, Output};
use support::{ID, NS, World, eventually, kvm_config, settled};

/// `text` with what differs between runs replaced: the SINCE column's ages, the pod names'
/// generated suffixes, VM IPs; runs of spaces (the alignment, which follows the widest cell)
/// made one.
fn normalise(text: &str) -> String {
    let age = regex::Regex::new(r"  \d+[smhd](  |$)").expect("regex");
    let pod = regex::Regex::new(r"\b((master|worker)-[a-z0-9]+)-[a-z0-9]{6,10}-[a-z0-9]{5}\b").expect("regex");
    let ip = regex::Regex::new(r"\b\d+\.\d+\.\d+\.\d+\b").expect("regex");
    let spaces = regex::Regex::new(r" {2,}").expect("regex");
    text.lines()
        .map(|l| {
            let start = l.find(|c: char| !matches!(c, ' ' | '│' | '├' | '└' | '─')).unwrap_or(l.len());
            let (tree, rest) = l.split_at(start);
            let rest = age.replace_all(rest, "  <age>$1");
            let rest = pod.replace_all(&rest, "$1-<pod>");
            let rest = ip.replace_all(&rest, "<ip>");
            format!("{tree}{}", spaces.replace_all(&rest, "  ").trim_end())
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

/// Compare `text`, normalised, with fixture `name` (or write it with `UPDATE_FIXTURES=1`).
fn assert_fixture(name: &str, text: &str) {
    let got = normalise(text);
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/describe").join(name);
    if std::env::var_os("UPDATE_FIXTURES").is_some() {
        std::fs::create_dir_all(path.parent().expect("a directory")).expect("fixture directory");
        std::fs::write(&path, &got).expect("fixture written");
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(got, want, "describe output differs from {}; the output was:\n{text}", path.display());
}

async fn describe_text(w: &World, output: Output) -> anyhow::Result<String> {
    let flags = DescribeArgs { name: Some(ID.into()), namespace: Some(NS.into()), all_namespaces: false, output };
    let mut out = Vec::new();
    kvm_operator::describe::describe(&w.client, &flags, &mut out, jiff::Timestamp::now(), false).await?;
    Ok(String::from_utf8(out)?)
}

/// Wait until `describe` (normalised) shows every one of `needles` and still shows the same a
/// second later, then return its output.
async fn shows(w: &World, what: &str, needles: &[&str]) -> anyhow::Result<String> {
    let found = eventually(what, 90, || async {
        let text = describe_text(w, Output::Text).await?;
        let n = normalise(&text);
        if !needles.iter().all(|needle| n.contains(needle)) {
            return Ok(None);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        Ok((normalise(&describe_text(w, Output::Text).await?) == n).then_some(text))
    })
    .await;
    match found {
        Ok(text) => Ok(text),
        Err(e) => anyhow::bail!("{e}\nlast output:\n{}", describe_text(w, Output::Text).await.unwrap_or_default()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_shows_a_created_cluster_a_node_not_ready_and_a_held_rollout() -> anyhow::Result<()> {
    let w = World::start().await?;
    w.configs().create(&PostParams::default(), &kvm_config()).await?;
    settled(&w, apis::cluster_status::ClusterCondition::Created, "20.1.0", 8).await?;

    // Created: every node pod Ready with its VM IP, the masters and workers counted.
    let healthy =
        shows(&w, "a created cluster", &["Masters/x7k2p  True  3/3 ready", "Workers/x7k2p  True  5/5 ready"]).await?;
    assert_fixture("healthy.txt", &healthy);
    // JSON for tools: the same tree.
    let json: serde_json::Value = serde_json::from_str(&describe_text(&w, Output::Json).await?)?;
    assert_eq!(json[0]["kind"], "KVMConfig");
    assert_eq!(json[0]["children"][1]["children"].as_array().map(Vec::len), Some(5), "{json}");

    // A worker's node goes NotReady in the workload cluster: its pod's line says so.
    let pods: Api<Pod> = Api::namespaced(w.client.clone(), ID);
    let selector = "kvm-operator.giantswarm.io/pod-watcher=kvm-operator,app=worker";
    let mut workers: Vec<String> =
        pods.list(&ListParams::default().labels(selector)).await?.items.iter().map(ResourceExt::name_any).collect();
    workers.sort();
    let sick = workers.first().expect("a worker pod").clone();
    w.wc.set_ready(&sick, false)?;
    let not_ready = shows(
        &w,
        "the worker whose node is NotReady",
        &["KVMConfig/org-acme/x7k2p  False  Converging", "Workers/x7k2p  False  4/5 ready"],
    )
    .await?;
    assert_fixture("worker-node-not-ready.txt", &not_ready);
    w.wc.set_ready(&sick, true)?;
    shows(&w, "the worker ready again", &["Workers/x7k2p  True  5/5 ready"]).await?;

    // A change of the workers while a workload-cluster master is cordoned: held, and the
    // cluster's line names the master.
    let wc_nodes = w.wc_nodes();
    let master = wc_nodes
        .list(&ListParams::default().labels("role=master"))
        .await?
        .items
        .first()
        .map(ResourceExt::name_any)
        .expect("a workload-cluster master");
    wc_nodes
        .patch(&master, &PatchParams::default(), &Patch::Merge(&serde_json::json!({"spec": {"unschedulable": true}})))
        .await?;
    let config = w.configs().get(ID).await?;
    let mut spec = serde_json::to_value(&config.spec)?;
    for worker in spec["kvm"]["workers"].as_array_mut().expect("workers") {
        worker["memory"] = "9G".into();
    }
    w.configs().patch(ID, &PatchParams::default(), &Patch::Merge(&serde_json::json!({"spec": spec}))).await?;
    let held =
        shows(&w, "the workers held by the cordoned master", &["KVMConfig/org-acme/x7k2p  False", "schedulable"])
            .await?;
    assert_fixture("rollout-held.txt", &held);
    Ok(())
}
