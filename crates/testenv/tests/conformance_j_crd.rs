//! Checklist section J: CustomResourceDefinitions: acceptance, status, naming conflicts,
//! structural schemas (pruning, defaulting, validation), several versions, updates and
//! deletion, printer columns.

mod common;

use std::time::Duration;

use common::*;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use kube::api::{Api, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use serde_json::{Value, json};

const WIDGETS_V1: &str = "/apis/example.com/v1/namespaces/default/widgets";
const WIDGETS_V1BETA1: &str = "/apis/example.com/v1beta1/namespaces/default/widgets";
const THINGS: &str = "/apis/example.com/v1/namespaces/default/things";

fn condition<'a>(crd: &'a Value, ty: &str) -> &'a Value {
    crd["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == ty))
        .unwrap_or_else(|| panic!("no {ty} condition in {}", crd["status"]))
}

fn crd_with(name_plural: &str, kind: &str, versions: Value) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{name_plural}.example.com")},
        "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": name_plural, "kind": kind}, "versions": versions}
    })
}

fn version(name: &str, served: bool, storage: bool, schema: Value) -> Value {
    json!({"name": name, "served": served, "storage": storage, "schema": {"openAPIV3Schema": schema}})
}

fn simple_schema() -> Value {
    json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"x": {"type": "string"}}}}})
}

fn widgets_crd() -> Value {
    crd_with(
        "widgets",
        "Widget",
        json!([version("v1", true, true, simple_schema()), version("v1beta1", true, false, simple_schema())]),
    )
}

/// A CRD whose schema exercises defaulting and validation: `things.example.com`, kind `Thing`.
fn things_crd() -> Value {
    let schema = json!({
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "required": ["name"],
                "properties": {
                    "name": {"type": "string", "minLength": 1, "maxLength": 10, "pattern": "^[a-z]+$"},
                    "size": {"type": "string", "default": "medium", "enum": ["small", "medium", "large"]},
                    "replicas": {"type": "integer", "minimum": 0, "maximum": 10, "default": 1},
                    "ratio": {"type": "number", "exclusiveMinimum": true, "minimum": 0},
                    "when": {"type": "string", "format": "date-time"},
                    "items": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 2, "x-kubernetes-list-type": "set"},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}, "maxProperties": 2},
                    "nullableWithDefault": {"type": "string", "nullable": true, "default": "d"},
                    "withDefault": {"type": "string", "default": "d"},
                    "plain": {"type": "string"},
                    "port": {"x-kubernetes-int-or-string": true},
                    "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "template": {"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true},
                    "choice": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}, "oneOf": [{"required": ["a"]}, {"required": ["b"]}]}
                }
            }
        }
    });
    crd_with("things", "Thing", json!([version("v1", true, true, schema)]))
}

fn thing(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": name}, "spec": spec})
}

#[tokio::test]
async fn j1_kube_derive_crds_are_accepted_and_defaulted() {
    let (env, http) = start().await;
    let crds: Api<CustomResourceDefinition> = Api::all(env.client());
    let created = crds.create(&PostParams::default(), &Foo::crd()).await.expect("kube-derive CRD accepted");
    assert_eq!(created.metadata.name.as_deref(), Some("foos.example.com"));
    let names = &created.spec.names;
    assert_eq!(names.singular.as_deref(), Some("foo"));
    assert_eq!(names.list_kind.as_deref(), Some("FooList"));
    assert_eq!(created.spec.conversion.as_ref().map(|c| c.strategy.as_str()), Some("None"));
    // A hand-written one without singular/listKind/conversion gets the defaults.
    let r = http.post(CRDS, &crd_with("gadgets", "Gadget", json!([version("v1", true, true, simple_schema())]))).await;
    r.expect(201);
    let c = r.json();
    assert_eq!(c["spec"]["names"]["singular"], "gadget");
    assert_eq!(c["spec"]["names"]["listKind"], "GadgetList");
    assert_eq!(c["spec"]["conversion"], json!({"strategy": "None"}));
}

#[tokio::test]
async fn j1_invalid_crds_are_422() {
    let (_env, http) = start().await;
    let mut wrong_name = crd_with("gadgets", "Gadget", json!([version("v1", true, true, simple_schema())]));
    wrong_name["metadata"]["name"] = json!("gizmos.example.com");
    let two_storage = crd_with(
        "gadgets",
        "Gadget",
        json!([version("v1", true, true, simple_schema()), version("v2", true, true, simple_schema())]),
    );
    let no_storage = crd_with("gadgets", "Gadget", json!([version("v1", true, false, simple_schema())]));
    let none_served = crd_with("gadgets", "Gadget", json!([version("v1", false, true, simple_schema())]));
    let no_schema = crd_with("gadgets", "Gadget", json!([{"name": "v1", "served": true, "storage": true}]));
    for (what, crd) in [
        ("name", wrong_name),
        ("two storage", two_storage),
        ("no storage", no_storage),
        ("none served", none_served),
        ("no schema", no_schema),
    ] {
        let r = http.post(CRDS, &crd).await;
        let s = assert_reason(&r, 422, "Invalid");
        assert_eq!(s["details"]["kind"], "CustomResourceDefinition", "{what}");
        assert_eq!(s["details"]["group"], "apiextensions.k8s.io", "{what}");
    }
    http.get(&format!("{CRDS}/gadgets.example.com")).await.expect(404);
}

#[tokio::test]
async fn j2_crd_status_is_set_when_created() {
    let (env, http) = start().await;
    let r = http.post(CRDS, &foo_crd()).await;
    r.expect(201);
    // The status is there at once (in the response or right after it).
    let crd = http.get(&format!("{CRDS}/foos.example.com")).await.json();
    let names = condition(&crd, "NamesAccepted");
    assert_eq!(names["status"], "True");
    assert_eq!(names["reason"], "NoConflicts");
    assert_eq!(names["message"], "no conflicts found");
    assert!(names["lastTransitionTime"].is_string());
    let established = condition(&crd, "Established");
    assert_eq!(established["status"], "True");
    assert_eq!(established["reason"], "InitialNamesAccepted");
    assert_eq!(established["message"], "the initial names have been accepted");
    assert!(established["lastTransitionTime"].is_string());
    assert_eq!(crd["status"]["acceptedNames"]["plural"], "foos");
    assert_eq!(crd["status"]["acceptedNames"]["kind"], "Foo");
    assert_eq!(crd["status"]["acceptedNames"]["shortNames"], json!(["fo"]));
    assert_eq!(crd["status"]["storedVersions"], json!(["v1"]));
    // kube-runtime's condition helper sees it.
    let crds: Api<CustomResourceDefinition> = Api::all(env.client());
    within("is_crd_established", await_condition(crds, "foos.example.com", conditions::is_crd_established()))
        .await
        .expect("established");
}

#[tokio::test]
async fn j3_custom_resources_are_served_as_soon_as_established() {
    let (_env, http) = start().await;
    http.post(CRDS, &foo_crd()).await.expect(201);
    // No waiting: the first request after the create works.
    http.post(FOOS, &foo("f", json!({}))).await.expect(201);
    http.get(FOOS).await.expect(200);
}

#[tokio::test]
async fn j3_name_conflicts_are_not_accepted_and_not_served() {
    let (_env, http) = start_with_foo().await;
    for (plural, names, reason) in [
        ("kindclash", json!({"plural": "kindclash", "singular": "kindclash", "kind": "Foo"}), "KindConflict"),
        (
            "shortclash",
            json!({"plural": "shortclash", "kind": "ShortClash", "shortNames": ["fo"]}),
            "ShortNamesConflict",
        ),
        (
            "singularclash",
            json!({"plural": "singularclash", "singular": "foo", "kind": "SingularClash"}),
            "SingularConflict",
        ),
    ] {
        let mut crd = crd_with(plural, "X", json!([version("v1", true, true, simple_schema())]));
        crd["spec"]["names"] = names;
        http.post(CRDS, &crd).await.expect(201);
        let got = http.get(&format!("{CRDS}/{plural}.example.com")).await.json();
        let accepted = condition(&got, "NamesAccepted");
        assert_eq!(accepted["status"], "False", "{plural}");
        assert_eq!(accepted["reason"], reason, "{plural}");
        assert_eq!(condition(&got, "Established")["status"], "False", "{plural}");
        assert_status(
            &http.get(&format!("/apis/example.com/v1/namespaces/default/{plural}")).await,
            404,
            "NotFound",
            "the server could not find the requested resource",
        );
    }
    // The original keeps working.
    http.post(FOOS, &foo("f", json!({}))).await.expect(201);
}

#[tokio::test]
async fn j4_unknown_fields_are_pruned_except_where_preserved() {
    let (_env, http) = start().await;
    install_crd(&http, &things_crd()).await;
    let mut body =
        thing("t", json!({"name": "abc", "bogus": 1, "free": {"anything": {"goes": [1, 2]}}, "port": "http"}));
    body["topLevelBogus"] = json!(true);
    body["metadata"]["bogusMeta"] = json!("x");
    let r = http.post(&format!("{THINGS}?fieldValidation=Ignore"), &body).await;
    r.expect(201);
    let o = r.json();
    assert!(o["spec"].get("bogus").is_none(), "{o}");
    assert!(o.get("topLevelBogus").is_none(), "{o}");
    assert!(o["metadata"].get("bogusMeta").is_none(), "metadata is coerced to ObjectMeta: {o}");
    assert_eq!(o["spec"]["free"], json!({"anything": {"goes": [1, 2]}}));
    assert_eq!(o["spec"]["port"], "http", "int-or-string keeps strings");
    let r =
        http.post(&format!("{THINGS}?fieldValidation=Ignore"), &thing("u", json!({"name": "abc", "port": 8080}))).await;
    r.expect(201);
    assert_eq!(r.json()["spec"]["port"], 8080, "and integers");
    // Stored as pruned.
    assert!(http.get(&format!("{THINGS}/t")).await.json()["spec"].get("bogus").is_none());
}

#[tokio::test]
async fn j4_embedded_resources_keep_type_meta_and_prune_their_metadata() {
    let (_env, http) = start().await;
    install_crd(&http, &things_crd()).await;
    let template =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "inner", "bogus": 1}, "data": {"k": "v"}});
    let r = http
        .post(&format!("{THINGS}?fieldValidation=Ignore"), &thing("t", json!({"name": "abc", "template": template})))
        .await;
    r.expect(201);
    let t = r.json()["spec"]["template"].clone();
    assert_eq!(t["apiVersion"], "v1");
    assert_eq!(t["kind"], "ConfigMap");
    assert_eq!(t["metadata"]["name"], "inner");
    assert!(t["metadata"].get("bogus").is_none(), "{t}");
    assert_eq!(t["data"], json!({"k": "v"}));
}

#[tokio::test]
async fn j5_defaults_apply_on_create_and_nullable_keeps_null() {
    let (_env, http) = start().await;
    install_crd(&http, &things_crd()).await;
    let r = http
        .post(
            THINGS,
            &thing("t", json!({"name": "abc", "nullableWithDefault": null, "withDefault": null, "plain": null})),
        )
        .await;
    r.expect(201);
    let spec = r.json()["spec"].clone();
    assert_eq!(spec["size"], "medium");
    assert_eq!(spec["replicas"], 1);
    assert_eq!(spec["nullableWithDefault"], Value::Null, "nullable keeps an explicit null: {spec}");
    assert!(spec.get("nullableWithDefault").is_some(), "{spec}");
    assert_eq!(spec["withDefault"], "d", "null on a non-nullable field with a default is defaulted");
    assert!(spec.get("plain").is_none(), "null on a non-nullable field without a default is pruned: {spec}");
    // Updates and patches are defaulted too.
    let r = http.merge(&format!("{THINGS}/t"), &json!({"spec": {"size": null}})).await;
    r.expect(200);
    assert_eq!(r.json()["spec"]["size"], "medium");
}

#[tokio::test]
async fn j5_defaults_added_later_apply_when_reading_from_storage() {
    let (_env, http) = start().await;
    install_crd(&http, &bar_crd()).await;
    let bars = "/apis/example.com/v1/namespaces/default/bars";
    http.post(bars, &json!({"apiVersion": "example.com/v1", "kind": "Bar", "metadata": {"name": "b"}, "spec": {}}))
        .await
        .expect(201);
    let mut crd = http.get(&format!("{CRDS}/bars.example.com")).await.json();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["x"]["default"] =
        json!("from-default");
    http.put(&format!("{CRDS}/bars.example.com"), &crd).await.expect(200);
    let b = http.get(&format!("{bars}/b")).await.json();
    assert_eq!(b["spec"]["x"], "from-default", "defaulted on read");
    let list = http.get(bars).await.json();
    assert_eq!(list["items"][0]["spec"]["x"], "from-default");
}

#[tokio::test]
async fn j6_schema_type_errors_are_422_with_the_kube_message() {
    let (_env, http) = start().await;
    install_crd(&http, &things_crd()).await;
    let r = http.post(THINGS, &thing("t", json!({"name": "abc", "replicas": "string"}))).await;
    let s = assert_status(
        &r,
        422,
        "Invalid",
        "Thing.example.com \"t\" is invalid: spec.replicas: Invalid value: \"string\": spec.replicas in body must be of type integer: \"string\"",
    );
    assert_eq!(s["details"]["kind"], "Thing");
    assert_eq!(s["details"]["group"], "example.com");
    assert_eq!(s["details"]["name"], "t");
    assert_eq!(s["details"]["causes"][0]["field"], "spec.replicas");
    assert_eq!(s["details"]["causes"][0]["reason"], "FieldValueTypeInvalid");
}

#[tokio::test]
async fn j6_schema_constraints_are_enforced() {
    let (_env, http) = start().await;
    install_crd(&http, &things_crd()).await;
    for (spec, field, reason) in [
        (json!({}), "spec.name", "FieldValueRequired"),
        (json!({"name": ""}), "spec.name", "FieldValueInvalid"),
        (json!({"name": "abcdefghijk"}), "spec.name", "FieldValueTooLong"),
        (json!({"name": "ABC"}), "spec.name", "FieldValueInvalid"),
        (json!({"name": "abc", "size": "huge"}), "spec.size", "FieldValueNotSupported"),
        (json!({"name": "abc", "replicas": 11}), "spec.replicas", "FieldValueInvalid"),
        (json!({"name": "abc", "replicas": -1}), "spec.replicas", "FieldValueInvalid"),
        (json!({"name": "abc", "ratio": 0}), "spec.ratio", "FieldValueInvalid"),
        (
            json!({"name": "abc", "when": "yesterday"}),
            "spec.when",
            // kube-openapi reports format mismatches as InvalidType, which apiextensions
            // turns into field.TypeInvalid.
            "FieldValueTypeInvalid",
        ),
        (json!({"name": "abc", "items": []}), "spec.items", "FieldValueInvalid"),
        (json!({"name": "abc", "items": ["a", "b", "c"]}), "spec.items", "FieldValueTooMany"),
        (json!({"name": "abc", "items": ["a", "a"]}), "spec.items[1]", "FieldValueDuplicate"),
        (json!({"name": "abc", "labels": {"a": 1}}), "spec.labels.a", "FieldValueTypeInvalid"),
        (json!({"name": "abc", "labels": {"a": "1", "b": "2", "c": "3"}}), "spec.labels", "FieldValueTooMany"),
        (
            json!({"name": "abc", "choice": {"a": "x", "b": "y"}}),
            // kube-openapi's composition errors carry no field path: kube prints `<nil>` and
            // names the field in the message.
            "<nil>",
            "FieldValueInvalid",
        ),
    ] {
        let r = http.post(THINGS, &thing("t", spec.clone())).await;
        let s = assert_reason(&r, 422, "Invalid");
        let causes = s["details"]["causes"].as_array().cloned().unwrap_or_default();
        assert!(
            causes.iter().any(|c| c["field"] == field && c["reason"] == reason),
            "{spec}: expected {reason} on {field}, got {s}"
        );
    }
    // And a valid one passes.
    http.post(
        THINGS,
        &thing("ok", json!({"name": "abc", "ratio": 0.5, "when": "2026-01-01T00:00:00Z", "items": ["a"], "labels": {"a": "1"}, "choice": {"a": "x"}})),
    )
    .await
    .expect(201);
}

#[tokio::test]
async fn j6_validation_applies_to_updates_and_patches() {
    let (_env, http) = start().await;
    install_crd(&http, &things_crd()).await;
    http.post(THINGS, &thing("t", json!({"name": "abc"}))).await.expect(201);
    assert_reason(&http.merge(&format!("{THINGS}/t"), &json!({"spec": {"replicas": 100}})).await, 422, "Invalid");
    assert_reason(
        &http.json_patch(&format!("{THINGS}/t"), &json!([{"op": "remove", "path": "/spec/name"}])).await,
        422,
        "Invalid",
    );
    assert_eq!(http.get(&format!("{THINGS}/t")).await.json()["spec"]["name"], "abc");
}

#[tokio::test]
async fn j8_every_served_version_reads_and_writes_one_stored_object() {
    let (_env, http) = start().await;
    install_crd(&http, &widgets_crd()).await;
    let r = http.post(WIDGETS_V1BETA1, &json!({"apiVersion": "example.com/v1beta1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"x": "1"}})).await;
    r.expect(201);
    assert_eq!(r.json()["apiVersion"], "example.com/v1beta1");
    let v1 = http.get(&format!("{WIDGETS_V1}/w")).await.json();
    assert_eq!(v1["apiVersion"], "example.com/v1");
    assert_eq!(v1["spec"]["x"], "1");
    let list = http.get(WIDGETS_V1).await.json();
    assert_eq!(list["apiVersion"], "example.com/v1");
    assert_eq!(list["items"][0]["apiVersion"], "example.com/v1");
    // A write through one version is visible through the other.
    let r = http.merge(&format!("{WIDGETS_V1}/w"), &json!({"spec": {"x": "2"}})).await.json();
    assert_eq!(r["apiVersion"], "example.com/v1");
    let beta = http.get(&format!("{WIDGETS_V1BETA1}/w")).await.json();
    assert_eq!(beta["apiVersion"], "example.com/v1beta1");
    assert_eq!(beta["spec"]["x"], "2");
    assert_eq!(rv(&beta), rv(&r));
    // A body of the wrong version is refused.
    let r = http
        .post(
            WIDGETS_V1,
            &json!({"apiVersion": "example.com/v1beta1", "kind": "Widget", "metadata": {"name": "z"}, "spec": {}}),
        )
        .await;
    assert_reason(&r, 400, "BadRequest");
}

#[tokio::test]
async fn j8_watches_of_each_version_see_every_object_in_their_version() {
    let (env, http) = start().await;
    install_crd(&http, &widgets_crd()).await;
    let from = env.handle().resource_version();
    let mut w1 = http.watch(&format!("{WIDGETS_V1}?watch=true&resourceVersion={from}")).await;
    let mut wb = http.watch(&format!("{WIDGETS_V1BETA1}?watch=true&resourceVersion={from}")).await;
    http.post(
        WIDGETS_V1,
        &json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "a"}, "spec": {}}),
    )
    .await
    .expect(201);
    http.post(
        WIDGETS_V1BETA1,
        &json!({"apiVersion": "example.com/v1beta1", "kind": "Widget", "metadata": {"name": "b"}, "spec": {}}),
    )
    .await
    .expect(201);
    for (w, version) in [(&mut w1, "example.com/v1"), (&mut wb, "example.com/v1beta1")] {
        for name in ["a", "b"] {
            let ev = w.next().await;
            assert_eq!(ev["type"], "ADDED");
            assert_eq!(ev["object"]["metadata"]["name"], name);
            assert_eq!(ev["object"]["apiVersion"], version);
        }
    }
}

#[tokio::test]
async fn j8_deprecated_versions_warn_and_unserved_versions_are_404() {
    let (_env, http) = start().await;
    let mut crd = widgets_crd();
    crd["spec"]["versions"][1]["deprecated"] = json!(true);
    crd["spec"]["versions"][1]["deprecationWarning"] = json!("example.com/v1beta1 Widget is deprecated; use v1");
    install_crd(&http, &crd).await;
    let r = http.get(WIDGETS_V1BETA1).await;
    r.expect(200);
    assert!(
        r.header_all("warning").iter().any(|w| w.contains("example.com/v1beta1 Widget is deprecated; use v1")),
        "{:?}",
        r.header_all("warning")
    );
    assert!(http.get(WIDGETS_V1).await.header_all("warning").is_empty());
    let mut crd = http.get(&format!("{CRDS}/widgets.example.com")).await.json();
    crd["spec"]["versions"][1]["served"] = json!(false);
    http.put(&format!("{CRDS}/widgets.example.com"), &crd).await.expect(200);
    assert_status(
        &http.get(WIDGETS_V1BETA1).await,
        404,
        "NotFound",
        "the server could not find the requested resource",
    );
    http.get(WIDGETS_V1).await.expect(200);
}

#[tokio::test]
async fn j8_stored_versions_only_grow() {
    let (_env, http) = start().await;
    install_crd(&http, &widgets_crd()).await;
    let mut crd = http.get(&format!("{CRDS}/widgets.example.com")).await.json();
    crd["spec"]["versions"][0]["storage"] = json!(false);
    crd["spec"]["versions"][1]["storage"] = json!(true);
    let r = http.put(&format!("{CRDS}/widgets.example.com"), &crd).await;
    r.expect(200);
    let stored: Vec<String> = serde_json::from_value(
        http.get(&format!("{CRDS}/widgets.example.com")).await.json()["status"]["storedVersions"].clone(),
    )
    .unwrap();
    assert_eq!(stored, ["v1", "v1beta1"]);
}

#[tokio::test]
async fn j9_crd_updates_take_effect_for_new_requests() {
    let (_env, http) = start().await;
    install_crd(&http, &bar_crd()).await;
    let bars = "/apis/example.com/v1/namespaces/default/bars";
    http.post(bars, &json!({"apiVersion": "example.com/v1", "kind": "Bar", "metadata": {"name": "b"}, "spec": {}}))
        .await
        .expect(201);
    http.get(&format!("{bars}/b/status")).await.expect(404);
    let mut crd = http.get(&format!("{CRDS}/bars.example.com")).await.json();
    crd["spec"]["versions"][0]["subresources"] = json!({"status": {}});
    http.put(&format!("{CRDS}/bars.example.com"), &crd).await.expect(200);
    http.get(&format!("{bars}/b/status")).await.expect(200);
    let r = http.merge(&format!("{bars}/b"), &json!({"status": {"phase": "ignored"}})).await;
    r.expect(200);
    assert!(
        r.json().get("status").is_none_or(|s| s.get("phase").is_none()),
        "status is now a subresource: {}",
        r.text()
    );
}

#[tokio::test]
async fn j9_deleting_a_crd_deletes_its_resources_honouring_their_finalizers() {
    let (_env, http) = start_with_foo().await;
    create_foo(&http, "plain", json!({})).await;
    let mut held = foo("held", json!({}));
    held["metadata"]["finalizers"] = json!(["example.com/hold"]);
    http.post(FOOS, &held).await.expect(201);
    let r = http.delete(&format!("{CRDS}/foos.example.com")).await;
    r.expect(200);
    let crd = r.json();
    assert!(
        crd["metadata"]["finalizers"]
            .as_array()
            .unwrap()
            .contains(&json!("customresourcecleanup.apiextensions.k8s.io")),
        "{crd}"
    );
    assert!(crd["metadata"]["deletionTimestamp"].is_string());
    // The held resource blocks the CRD; meanwhile creates are refused.
    eventually(Duration::from_secs(10), "the plain Foo to be deleted", || {
        let http = http.clone();
        async move { (http.get(&format!("{FOOS}/plain")).await.status == 404).then_some(()) }
    })
    .await;
    let crd = http.get(&format!("{CRDS}/foos.example.com")).await.json();
    assert_eq!(condition(&crd, "Terminating")["status"], "True");
    let r = http.post(FOOS, &foo("new", json!({}))).await;
    assert_status(&r, 405, "MethodNotAllowed", "create not allowed while custom resource definition is terminating");
    assert!(http.get(&format!("{FOOS}/held")).await.json()["metadata"]["deletionTimestamp"].is_string());
    // Release it: the CRD goes, and discovery forgets the group.
    http.merge(&format!("{FOOS}/held"), &json!({"metadata": {"finalizers": null}})).await.expect(200);
    eventually(Duration::from_secs(10), "the CRD to be deleted", || {
        let http = http.clone();
        async move { (http.get(&format!("{CRDS}/foos.example.com")).await.status == 404).then_some(()) }
    })
    .await;
    http.get("/apis/example.com/v1").await.expect(404);
    let groups = http.get("/apis").await.json();
    assert!(!groups["groups"].as_array().unwrap().iter().any(|g| g["name"] == "example.com"), "{groups}");
}

#[tokio::test]
async fn j10_printer_columns_make_the_table() {
    let (_env, http) = start_with_foo().await;
    create_foo(&http, "f", json!({"replicas": 2, "color": "red"})).await;
    create_foo(&http, "g", json!({})).await;
    let r = http.get_accept(FOOS, "application/json;as=Table;v=v1;g=meta.k8s.io").await;
    r.expect(200);
    let t = r.json();
    assert_eq!(t["kind"], "Table", "{t}");
    let cols: Vec<(String, String, i64)> = t["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_string(),
                c["type"].as_str().unwrap().to_string(),
                c["priority"].as_i64().unwrap_or(0),
            )
        })
        .collect();
    assert_eq!(
        cols,
        [
            ("Name".into(), "string".into(), 0),
            ("Replicas".into(), "integer".into(), 0),
            ("Color".into(), "string".into(), 1)
        ]
    );
    assert_eq!(t["columnDefinitions"][0]["format"], "name");
    assert_eq!(t["rows"][0]["cells"], json!(["f", 2, "red"]));
    assert_eq!(t["rows"][1]["cells"], json!(["g", null, null]), "missing values are null");
    assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
    assert_eq!(t["rows"][0]["object"]["metadata"]["name"], "f");
}

#[tokio::test]
async fn j10_versions_without_columns_show_a_humanised_age() {
    let (env, http) = start().await;
    install_crd(&http, &bar_crd()).await;
    let bars = "/apis/example.com/v1/namespaces/default/bars";
    http.post(bars, &json!({"apiVersion": "example.com/v1", "kind": "Bar", "metadata": {"name": "b"}, "spec": {}}))
        .await
        .expect(201);
    env.handle().advance_clock(Duration::from_secs(5 * 60 + 10));
    let t = http.get_accept(&format!("{bars}/b"), "application/json;as=Table;v=v1;g=meta.k8s.io").await.json();
    let cols: Vec<&str> =
        t["columnDefinitions"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(cols, ["Name", "Age"]);
    assert_eq!(t["columnDefinitions"][1]["type"], "date");
    // duration.HumanDuration: below ten minutes, minutes and seconds.
    assert_eq!(t["rows"][0]["cells"], json!(["b", "5m10s"]));
}
