//! Checklist section N: a cluster that says no. Opt-in TLS, bearer-token authentication
//! (static tokens and ServiceAccount tokens from TokenRequest), RBAC with kube-apiserver's 401
//! and 403 bodies, the access and identity reviews, Pod Security admission, and the in-cluster
//! path of `kube::Config::incluster()`.

mod common;

use std::time::Duration;

use common::{Http, Resp};
use http::Method;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, ListParams};
use serde_json::{Value, json};
use testenv::{TestEnv, UserInfo};

const NS: &str = "team";
const SA_USER: &str = "system:serviceaccount:team:robot";

/// A server with authentication and RBAC (plain HTTP, so raw requests can be compared).
async fn rbac_env() -> (TestEnv, Http, String) {
    let env = TestEnv::builder().rbac(true).start().await.expect("testenv starts");
    let http = Http::new(&env);
    let admin = env.handle().admin_token().expect("an admin token");
    (env, http, admin)
}

async fn send(http: &Http, method: Method, path: &str, token: Option<&str>, body: Option<&Value>) -> Resp {
    let auth = token.map(|t| format!("Bearer {t}"));
    let mut headers = vec![("content-type", "application/json")];
    if let Some(a) = &auth {
        headers.push(("authorization", a.as_str()));
    }
    http.send(method, path, &headers, body.map(|b| b.to_string().into_bytes())).await
}

/// As the administrator: namespace `team`, ServiceAccount `robot`, and a Role letting it read
/// ConfigMaps, update the one named `lock`, and patch pod status.
async fn setup_robot(http: &Http, admin: &str) {
    let posts = [
        ("/api/v1/namespaces", json!({"metadata": {"name": NS}})),
        ("/api/v1/namespaces/team/serviceaccounts", json!({"metadata": {"name": "robot"}})),
        (
            "/apis/rbac.authorization.k8s.io/v1/namespaces/team/roles",
            json!({"metadata": {"name": "reader"}, "rules": [
                {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]},
                {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["lock"], "verbs": ["update"]},
                {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["patch"]},
                {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["list"]},
            ]}),
        ),
        (
            "/apis/rbac.authorization.k8s.io/v1/namespaces/team/rolebindings",
            json!({"metadata": {"name": "robot-reads"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
                   "subjects": [{"kind": "ServiceAccount", "name": "robot", "namespace": NS}]}),
        ),
        ("/api/v1/namespaces/team/configmaps", json!({"metadata": {"name": "lock"}, "data": {"holder": "a"}})),
    ];
    for (path, body) in posts {
        send(http, Method::POST, path, Some(admin), Some(&body)).await.expect(201);
    }
}

/// A token for `team/robot` from the TokenRequest subresource.
async fn robot_token(http: &Http, admin: &str) -> String {
    let r =
        send(http, Method::POST, "/api/v1/namespaces/team/serviceaccounts/robot/token", Some(admin), Some(&json!({})))
            .await;
    r.expect(201);
    r.json()["status"]["token"].as_str().expect("a token").to_string()
}

fn forbidden_body(message: &str, details: Value) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": message, "reason": "Forbidden", "details": details, "code": 403})
}

#[tokio::test]
async fn n1_requests_without_valid_credentials_get_401_with_kube_apiservers_body() {
    let (env, http, admin) = rbac_env().await;
    let unauthorized = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                              "message": "Unauthorized", "reason": "Unauthorized", "code": 401});
    for token in [None, Some("not-a-token"), Some("eyJhbGciOiJFUzI1NiJ9.e30.AAAA")] {
        let r = send(&http, Method::GET, "/api/v1/namespaces/default/configmaps", token, None).await;
        assert_eq!(r.status, 401, "{token:?}: {}", r.text());
        assert_eq!(r.json(), unauthorized);
    }
    // Discovery and health need credentials too when anonymous requests are off.
    assert_eq!(send(&http, Method::GET, "/apis", None, None).await.status, 401);
    // The admin token works, and so does a ServiceAccount token, until the account goes away.
    send(&http, Method::GET, "/api/v1/namespaces/default/configmaps", Some(&admin), None).await.expect(200);
    setup_robot(&http, &admin).await;
    let token = robot_token(&http, &admin).await;
    send(&http, Method::GET, "/api/v1/namespaces/team/configmaps", Some(&token), None).await.expect(200);
    // Expiry follows the server's clock.
    env.handle().advance_clock(Duration::from_secs(3601));
    let r = send(&http, Method::GET, "/api/v1/namespaces/team/configmaps", Some(&token), None).await;
    assert_eq!(r.json(), unauthorized, "an expired token is refused");
    let fresh = robot_token(&http, &admin).await;
    send(&http, Method::GET, "/api/v1/namespaces/team/configmaps", Some(&fresh), None).await.expect(200);
    send(&http, Method::DELETE, "/api/v1/namespaces/team/serviceaccounts/robot", Some(&admin), None).await.expect(200);
    let r = send(&http, Method::GET, "/api/v1/namespaces/team/configmaps", Some(&fresh), None).await;
    assert_eq!(r.status, 401, "a deleted account's token is refused: {}", r.text());
}

#[tokio::test]
async fn n2_token_request_answers_like_kube_apiserver() {
    let (env, http, admin) = rbac_env().await;
    setup_robot(&http, &admin).await;
    let before = env.handle().api().clock.now().as_second();
    let r = send(
        &http,
        Method::POST,
        "/api/v1/namespaces/team/serviceaccounts/robot/token",
        Some(&admin),
        Some(&json!({
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 1200}
        })),
    )
    .await;
    r.expect(201);
    let tr = r.json();
    assert_eq!(tr["kind"], "TokenRequest");
    assert_eq!(tr["apiVersion"], "authentication.k8s.io/v1");
    assert_eq!(tr["metadata"]["name"], "robot");
    assert_eq!(tr["metadata"]["namespace"], NS);
    assert_eq!(
        tr["spec"],
        json!({"audiences": ["https://kubernetes.default.svc.cluster.local"], "expirationSeconds": 1200, "boundObjectRef": null})
    );
    let token = tr["status"]["token"].as_str().unwrap();
    assert_eq!(token.split('.').count(), 3, "a JWT: {token}");
    let expires = tr["status"]["expirationTimestamp"].as_str().unwrap().parse::<jiff::Timestamp>().unwrap().as_second();
    assert!((before + 1200..=before + 1205).contains(&expires), "expires 20 minutes from now: {expires} vs {before}");
    // Too short a lifetime, and a missing account.
    let r = send(
        &http,
        Method::POST,
        "/api/v1/namespaces/team/serviceaccounts/robot/token",
        Some(&admin),
        Some(&json!({"spec": {"expirationSeconds": 60}})),
    )
    .await;
    assert_eq!(r.status, 422);
    assert_eq!(
        r.json()["message"],
        "TokenRequest.authentication.k8s.io \"robot\" is invalid: spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes"
    );
    let r = send(
        &http,
        Method::POST,
        "/api/v1/namespaces/team/serviceaccounts/ghost/token",
        Some(&admin),
        Some(&json!({})),
    )
    .await;
    assert_eq!(r.status, 404);
    assert_eq!(r.json()["message"], "serviceaccounts \"ghost\" not found");
    // The robot may not mint tokens for itself.
    let r =
        send(&http, Method::POST, "/api/v1/namespaces/team/serviceaccounts/robot/token", Some(token), Some(&json!({})))
            .await;
    assert_eq!(
        r.json(),
        forbidden_body(
            &format!(
                "serviceaccounts \"robot\" is forbidden: User \"{SA_USER}\" cannot create resource \"serviceaccounts/token\" in API group \"\" in the namespace \"team\""
            ),
            json!({"name": "robot", "kind": "serviceaccounts"})
        )
    );
}

#[tokio::test]
async fn n3_rbac_refuses_with_kube_apiservers_403_bodies() {
    let (_env, http, admin) = rbac_env().await;
    setup_robot(&http, &admin).await;
    let t = robot_token(&http, &admin).await;
    let t = Some(t.as_str());
    send(&http, Method::GET, "/api/v1/namespaces/team/configmaps", t, None).await.expect(200);
    send(&http, Method::GET, "/api/v1/namespaces/team/configmaps/lock", t, None).await.expect(200);
    send(&http, Method::GET, "/apis/apps/v1/namespaces/team/deployments", t, None).await.expect(200);

    let cases = [
        (
            Method::GET,
            "/api/v1/namespaces/team/secrets",
            format!(
                "secrets is forbidden: User \"{SA_USER}\" cannot list resource \"secrets\" in API group \"\" in the namespace \"team\""
            ),
            json!({"kind": "secrets"}),
        ),
        (
            Method::GET,
            "/apis/apps/v1/namespaces/team/deployments/web",
            format!(
                "deployments.apps \"web\" is forbidden: User \"{SA_USER}\" cannot get resource \"deployments\" in API group \"apps\" in the namespace \"team\""
            ),
            json!({"name": "web", "group": "apps", "kind": "deployments"}),
        ),
        (
            Method::GET,
            "/api/v1/namespaces/default/configmaps",
            format!(
                "configmaps is forbidden: User \"{SA_USER}\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"default\""
            ),
            json!({"kind": "configmaps"}),
        ),
        (
            Method::GET,
            "/api/v1/nodes",
            format!(
                "nodes is forbidden: User \"{SA_USER}\" cannot list resource \"nodes\" in API group \"\" at the cluster scope"
            ),
            json!({"kind": "nodes"}),
        ),
        (
            Method::GET,
            "/api/v1/namespaces/team",
            format!(
                "namespaces \"team\" is forbidden: User \"{SA_USER}\" cannot get resource \"namespaces\" in API group \"\" in the namespace \"team\""
            ),
            json!({"name": "team", "kind": "namespaces"}),
        ),
        (
            Method::DELETE,
            "/api/v1/namespaces/team/configmaps/lock",
            format!(
                "configmaps \"lock\" is forbidden: User \"{SA_USER}\" cannot delete resource \"configmaps\" in API group \"\" in the namespace \"team\""
            ),
            json!({"name": "lock", "kind": "configmaps"}),
        ),
        (Method::GET, "/metrics", format!("forbidden: User \"{SA_USER}\" cannot get path \"/metrics\""), json!({})),
    ];
    for (method, path, message, details) in cases {
        let r = send(&http, method.clone(), path, t, None).await;
        assert_eq!(r.status, 403, "{method} {path}: {}", r.text());
        assert_eq!(r.json(), forbidden_body(&message, details), "{method} {path}");
    }
    // The basic-user and discovery bootstrap roles let every authenticated user discover.
    send(&http, Method::GET, "/apis", t, None).await.expect(200);
    send(&http, Method::GET, "/api/v1", t, None).await.expect(200);
}

#[tokio::test]
async fn n4_resource_names_subresources_and_broken_bindings() {
    let (env, http, admin) = rbac_env().await;
    setup_robot(&http, &admin).await;
    let token = robot_token(&http, &admin).await;
    let bearer = format!("Bearer {token}");
    let t = Some(token.as_str());
    // resourceNames: update `lock` only.
    let lock = send(&http, Method::GET, "/api/v1/namespaces/team/configmaps/lock", t, None).await.json();
    let mut changed = lock.clone();
    changed["data"]["holder"] = json!("b");
    send(&http, Method::PUT, "/api/v1/namespaces/team/configmaps/lock", t, Some(&changed)).await.expect(200);
    send(
        &http,
        Method::POST,
        "/api/v1/namespaces/team/configmaps",
        Some(&admin),
        Some(&json!({"metadata": {"name": "other"}})),
    )
    .await
    .expect(201);
    let other = json!({"metadata": {"name": "other"}, "data": {"x": "1"}});
    let r = send(&http, Method::PUT, "/api/v1/namespaces/team/configmaps/other", t, Some(&other)).await;
    assert_eq!(r.status, 403, "{}", r.text());
    // A list with a name field selector names its object (RequestInfo), so a rule limited to
    // `lock` covers it: the admin grants exactly that and the robot's token sees it.
    send(
        &http,
        Method::POST,
        "/apis/rbac.authorization.k8s.io/v1/namespaces/team/roles",
        Some(&admin),
        Some(&json!({
            "metadata": {"name": "lock-secret"},
            "rules": [{"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["lock"], "verbs": ["list"]}]
        })),
    )
    .await
    .expect(201);
    send(
        &http,
        Method::POST,
        "/apis/rbac.authorization.k8s.io/v1/namespaces/team/rolebindings",
        Some(&admin),
        Some(&json!({
            "metadata": {"name": "robot-lock-secret"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "lock-secret"},
            "subjects": [{"kind": "ServiceAccount", "name": "robot"}]
        })),
    )
    .await
    .expect(201);
    send(&http, Method::GET, "/api/v1/namespaces/team/secrets?fieldSelector=metadata.name%3Dlock", t, None)
        .await
        .expect(200);
    // Subresources need their own rules: pods/status yes, pods no.
    send(
        &http,
        Method::POST,
        "/api/v1/namespaces/team/pods",
        Some(&admin),
        Some(&json!({
            "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}
        })),
    )
    .await
    .expect(201);
    let r = http
        .send(
            Method::PATCH,
            "/api/v1/namespaces/team/pods/p/status",
            &[("content-type", "application/merge-patch+json"), ("authorization", &bearer)],
            Some(json!({"status": {"message": "hi"}}).to_string().into_bytes()),
        )
        .await;
    r.expect(200);
    let r = http
        .send(
            Method::PATCH,
            "/api/v1/namespaces/team/pods/p",
            &[("content-type", "application/merge-patch+json"), ("authorization", &bearer)],
            Some(json!({"metadata": {"labels": {"a": "b"}}}).to_string().into_bytes()),
        )
        .await;
    assert_eq!(r.status, 403);
    // A binding to a missing role says so in the reason.
    send(
        &http,
        Method::POST,
        "/apis/rbac.authorization.k8s.io/v1/namespaces/team/rolebindings",
        Some(&admin),
        Some(&json!({
            "metadata": {"name": "dangling"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "missing"},
            "subjects": [{"kind": "ServiceAccount", "name": "robot"}]
        })),
    )
    .await
    .expect(201);
    let r = send(&http, Method::GET, "/api/v1/namespaces/team/secrets", t, None).await;
    assert_eq!(
        r.json()["message"],
        format!(
            "secrets is forbidden: User \"{SA_USER}\" cannot list resource \"secrets\" in API group \"\" in the namespace \"team\": RBAC: role.rbac.authorization.k8s.io \"missing\" not found"
        )
    );
    // The access log knows who did what and which rule allowed it; unused grants show.
    let log = env.handle().access_log_of(SA_USER);
    let update = log.iter().find(|r| r.attributes.verb == "update" && r.allowed).expect("the update is recorded");
    assert_eq!(update.attributes.name, "lock");
    let rule = update.rule.as_ref().expect("a rule allowed it");
    assert_eq!((rule.binding_name.as_str(), rule.role_name.as_str(), rule.rule), ("robot-reads", "reader", 1));
    assert!(log.iter().any(|r| !r.allowed && r.attributes.resource == "secrets"));
    let robot = UserInfo {
        name: SA_USER.into(),
        groups: vec![
            "system:serviceaccounts".into(),
            "system:serviceaccounts:team".into(),
            "system:authenticated".into(),
        ],
        ..UserInfo::default()
    };
    let unused: Vec<(String, usize)> = env
        .handle()
        .unused_rules(&robot)
        .into_iter()
        .filter(|g| g.source.role_name == "reader")
        .map(|g| (g.source.role_name, g.source.rule))
        .collect();
    assert_eq!(unused, vec![("reader".to_string(), 3)], "only the deployments rule was never used");
}

#[tokio::test]
async fn n5_cluster_roles_aggregate_and_cluster_bindings_apply() {
    let (env, http, admin) = rbac_env().await;
    setup_robot(&http, &admin).await;
    let t = robot_token(&http, &admin).await;
    let crs = "/apis/rbac.authorization.k8s.io/v1/clusterroles";
    send(&http, Method::POST, crs, Some(&admin), Some(&json!({
        "metadata": {"name": "monitoring"},
        "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"example.com/aggregate-to-monitoring": "true"}}]}
    }))).await.expect(201);
    send(
        &http,
        Method::POST,
        crs,
        Some(&admin),
        Some(&json!({
            "metadata": {"name": "node-reader", "labels": {"example.com/aggregate-to-monitoring": "true"}},
            "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]}]
        })),
    )
    .await
    .expect(201);
    send(
        &http,
        Method::POST,
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        Some(&admin),
        Some(&json!({
            "metadata": {"name": "robot-monitors"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "monitoring"},
            "subjects": [{"kind": "ServiceAccount", "name": "robot", "namespace": NS}]
        })),
    )
    .await
    .expect(201);
    // The aggregation controller writes the rules into the aggregated role.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let role = send(&http, Method::GET, &format!("{crs}/monitoring"), Some(&admin), None).await.json();
        if role["rules"] == json!([{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]}]) {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "monitoring never aggregated: {role}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    send(&http, Method::GET, "/api/v1/nodes", Some(&t), None).await.expect(200);
    // The bootstrap `view` role aggregates too.
    let view = send(&http, Method::GET, &format!("{crs}/view"), Some(&admin), None).await.json();
    assert!(view["rules"].as_array().is_some_and(|r| !r.is_empty()), "{view}");
    drop(env);
}

#[tokio::test]
async fn n6_access_reviews_and_whoami_over_http() {
    let (_env, http, admin) = rbac_env().await;
    setup_robot(&http, &admin).await;
    let t = robot_token(&http, &admin).await;
    let ssar = |verb: &str, resource: &str| {
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"namespace": NS, "verb": verb, "resource": resource}}})
    };
    let r = send(
        &http,
        Method::POST,
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        Some(&t),
        Some(&ssar("list", "configmaps")),
    )
    .await;
    r.expect(201);
    assert_eq!(
        r.json()["status"],
        json!({"allowed": true, "reason": "RBAC: allowed by RoleBinding \"robot-reads/team\" of Role \"reader\" to ServiceAccount \"robot/team\""})
    );
    let r = send(
        &http,
        Method::POST,
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        Some(&t),
        Some(&ssar("list", "secrets")),
    )
    .await;
    assert_eq!(r.json()["status"], json!({"allowed": false}));
    // SubjectAccessReview: the admin asks about the robot.
    let sar = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {
        "user": SA_USER, "groups": ["system:serviceaccounts"], "resourceAttributes": {"namespace": NS, "verb": "get", "resource": "configmaps"}}});
    let r =
        send(&http, Method::POST, "/apis/authorization.k8s.io/v1/subjectaccessreviews", Some(&admin), Some(&sar)).await;
    assert_eq!(r.json()["status"]["allowed"], true);
    // The robot may not ask about others.
    let r = send(&http, Method::POST, "/apis/authorization.k8s.io/v1/subjectaccessreviews", Some(&t), Some(&sar)).await;
    assert_eq!(r.status, 403);
    // whoami.
    let r = send(
        &http,
        Method::POST,
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        Some(&t),
        Some(&json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})),
    )
    .await;
    r.expect(201);
    let info = &r.json()["status"]["userInfo"];
    assert_eq!(info["username"], SA_USER);
    assert_eq!(
        info["groups"],
        json!(["system:serviceaccounts", "system:serviceaccounts:team", "system:authenticated"])
    );
    assert!(
        info["extra"]["authentication.kubernetes.io/credential-id"][0].as_str().is_some_and(|c| c.starts_with("JTI=")),
        "{info}"
    );
    // Reviews are create-only.
    let r = send(&http, Method::GET, "/apis/authentication.k8s.io/v1/selfsubjectreviews", Some(&admin), None).await;
    assert_eq!(r.status, 405);
}

#[tokio::test]
async fn n7_pod_security_rejects_and_warns_like_kube_apiserver() {
    let env = TestEnv::builder().pod_security(true).start().await.expect("testenv starts");
    let http = Http::new(&env);
    http.post(
        "/api/v1/namespaces",
        &json!({"metadata": {"name": "locked", "labels": {
        "pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/warn": "restricted"}}}),
    )
    .await
    .expect(201);
    let r = http
        .post(
            "/api/v1/namespaces/locked/pods",
            &json!({
        "metadata": {"name": "nginx"}, "spec": {"containers": [{"name": "nginx", "image": "nginx"}]}}),
        )
        .await;
    assert_eq!(r.status, 403);
    assert_eq!(
        r.json(),
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "pods \"nginx\" is forbidden: violates PodSecurity \"restricted:latest\": allowPrivilegeEscalation != false (container \"nginx\" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container \"nginx\" must set securityContext.capabilities.drop=[\"ALL\"]), runAsNonRoot != true (pod or container \"nginx\" must set securityContext.runAsNonRoot=true), seccompProfile (pod or container \"nginx\" must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\")",
        "reason": "Forbidden", "details": {"name": "nginx", "kind": "pods"}, "code": 403})
    );
    let hardened = json!({"metadata": {"name": "app"}, "spec": {
        "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{"name": "app", "image": "app", "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}}]}});
    http.post("/api/v1/namespaces/locked/pods", &hardened).await.expect(201);
    // Workloads are admitted with warnings for their templates; only pods are refused.
    let r = http.post("/apis/apps/v1/namespaces/locked/deployments", &json!({
        "metadata": {"name": "web"}, "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {
            "metadata": {"labels": {"app": "web"}}, "spec": {"hostNetwork": true, "containers": [{"name": "web", "image": "nginx"}]}}}})).await;
    r.expect(201);
    let warnings = r.header_all("warning");
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].starts_with(
            "299 - \"would violate PodSecurity \\\"restricted:latest\\\": allowPrivilegeEscalation != false"
        ),
        "{warnings:?}"
    );
    assert!(warnings[0].contains("host namespaces (hostNetwork=true)"), "{warnings:?}");
    // Baseline allows what restricted does not, but not host access.
    http.post(
        "/api/v1/namespaces",
        &json!({"metadata": {"name": "base", "labels": {"pod-security.kubernetes.io/enforce": "baseline"}}}),
    )
    .await
    .expect(201);
    http.post(
        "/api/v1/namespaces/base/pods",
        &json!({"metadata": {"name": "plain"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}),
    )
    .await
    .expect(201);
    let r = http.post("/api/v1/namespaces/base/pods", &json!({"metadata": {"name": "host"}, "spec": {
        "hostPID": true, "containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80, "hostPort": 8080}]}]}})).await;
    assert_eq!(
        r.json()["message"],
        "pods \"host\" is forbidden: violates PodSecurity \"baseline:latest\": host namespaces (hostPID=true), hostPort (container \"c\" uses hostPort 8080)"
    );
    // Without labels a namespace is privileged.
    http.post(
        "/api/v1/namespaces/default/pods",
        &json!({"metadata": {"name": "host"}, "spec": {"hostPID": true, "containers": [{"name": "c", "image": "i"}]}}),
    )
    .await
    .expect(201);
}

#[tokio::test]
async fn n8_kube_rs_over_tls_with_a_service_account_token() {
    let env = TestEnv::builder().secure().start().await.expect("testenv starts");
    assert!(env.base_url().starts_with("https://127.0.0.1:"), "{}", env.base_url());
    let kubeconfig = std::fs::read_to_string(env.kubeconfig_path()).unwrap();
    assert!(kubeconfig.contains("certificate-authority-data: ") && kubeconfig.contains("token: "), "{kubeconfig}");
    let admin = env.client();
    // A client without credentials gets 401 through TLS.
    let anonymous = env.handle().client_with_token(None).unwrap();
    let err = Api::<ConfigMap>::namespaced(anonymous, "default").list(&ListParams::default()).await.unwrap_err();
    assert!(matches!(&err, kube::Error::Api(s) if s.code == 401 && s.reason == "Unauthorized"), "{err:?}");
    setup_robot_kube(&admin).await;
    let token = env.handle().service_account_token(NS, "robot", Duration::from_secs(3600)).unwrap();
    let robot = env.handle().client_with_token(Some(&token)).unwrap();
    let cms = Api::<ConfigMap>::namespaced(robot.clone(), NS).list(&ListParams::default()).await.unwrap();
    // The test's ConfigMap and the namespace's `kube-root-ca.crt`, as in a real cluster.
    assert_eq!(cms.items.len(), 2, "{:?}", cms.items.iter().map(|c| c.metadata.name.clone()).collect::<Vec<_>>());
    let err = Api::<Secret>::namespaced(robot, NS).list(&ListParams::default()).await.unwrap_err();
    assert!(matches!(&err, kube::Error::Api(s) if s.code == 403 && s.reason == "Forbidden"), "{err:?}");
}

#[tokio::test]
async fn n11_server_side_apply_that_creates_needs_create_as_well_as_patch() {
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
    use kube::api::{Patch, PatchParams, PostParams};
    let env = TestEnv::builder().secure().start().await.expect("testenv starts");
    let admin = env.client();
    setup_robot_kube(&admin).await;
    let role = |name: &str, verbs: &[&str]| -> Role {
        serde_json::from_value(json!({"metadata": {"name": name}, "rules": [
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": verbs}]}))
        .unwrap()
    };
    let binding = |name: &str| -> RoleBinding {
        serde_json::from_value(json!({"metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": "robot", "namespace": NS}]}))
        .unwrap()
    };
    let (roles, bindings) = (Api::<Role>::namespaced(admin.clone(), NS), Api::<RoleBinding>::namespaced(admin, NS));
    roles.create(&PostParams::default(), &role("patcher", &["patch"])).await.unwrap();
    bindings.create(&PostParams::default(), &binding("patcher")).await.unwrap();
    let token = env.handle().service_account_token(NS, "robot", Duration::from_secs(3600)).unwrap();
    let cms = Api::<ConfigMap>::namespaced(env.handle().client_with_token(Some(&token)).unwrap(), NS);
    let pp = PatchParams::apply("robot");
    let applied =
        |name: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"a": "1"}});

    // An existing object: apply is a patch.
    cms.patch("settings", &pp, &Patch::Apply(applied("settings"))).await.unwrap();
    // A new one: apply creates, and patch alone does not allow that.
    let err = cms.patch("fresh", &pp, &Patch::Apply(applied("fresh"))).await.unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 403 && s.message.contains("cannot create resource \"configmaps\"")),
        "{err:?}"
    );
    let log = env.handle().access_log_of(SA_USER);
    let refused: Vec<(&str, &str)> =
        log.iter().filter(|r| !r.allowed).map(|r| (r.attributes.verb.as_str(), r.attributes.name.as_str())).collect();
    assert_eq!(refused, [("create", "fresh")]);

    roles.create(&PostParams::default(), &role("creator", &["create"])).await.unwrap();
    bindings.create(&PostParams::default(), &binding("creator")).await.unwrap();
    cms.patch("fresh", &pp, &Patch::Apply(applied("fresh"))).await.unwrap();
    let log = env.handle().access_log_of(SA_USER);
    assert!(log.iter().any(|r| r.allowed && r.attributes.verb == "create" && r.attributes.name == "fresh"), "{log:?}");
}

#[tokio::test]
async fn n12_a_binding_is_created_only_with_bind_on_its_role_or_every_permission_it_grants() {
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
    use kube::api::PostParams;
    let env = TestEnv::builder().secure().start().await.expect("testenv starts");
    let admin = env.client();
    setup_robot_kube(&admin).await;
    let cluster_role = |name: &str, rules: Value| -> ClusterRole {
        serde_json::from_value(json!({"metadata": {"name": name}, "rules": rules})).unwrap()
    };
    let roles = Api::<ClusterRole>::all(admin.clone());
    let pp = PostParams::default();
    // The robot may create ClusterRoleBindings, bind `node-pods` by name, and list pods everywhere.
    roles
        .create(&pp, &cluster_role("binder", json!([
            {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterrolebindings"], "verbs": ["create"]},
            {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"], "resourceNames": ["node-pods"], "verbs": ["bind"]},
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
        ])))
        .await
        .unwrap();
    let grant: ClusterRoleBinding = serde_json::from_value(json!({"metadata": {"name": "robot-binds"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "binder"},
        "subjects": [{"kind": "ServiceAccount", "name": "robot", "namespace": NS}]}))
    .unwrap();
    Api::<ClusterRoleBinding>::all(admin.clone()).create(&pp, &grant).await.unwrap();
    for (name, rules) in [
        ("node-pods", json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}])),
        ("pod-lister", json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}])),
        ("secret-reader", json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}])),
    ] {
        roles.create(&pp, &cluster_role(name, rules)).await.unwrap();
    }
    let token = env.handle().service_account_token(NS, "robot", Duration::from_secs(3600)).unwrap();
    let bindings = Api::<ClusterRoleBinding>::all(env.handle().client_with_token(Some(&token)).unwrap());
    let binding = |name: &str, role: &str| -> ClusterRoleBinding {
        serde_json::from_value(json!({"metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": "pods", "namespace": NS}]}))
        .unwrap()
    };

    // A role it may bind: allowed, and the access log records the bind.
    bindings.create(&pp, &binding("b1", "node-pods")).await.unwrap();
    let log = env.handle().access_log_of(SA_USER);
    assert!(
        log.iter().any(|r| r.allowed && r.attributes.verb == "bind" && r.attributes.name == "node-pods"),
        "{log:?}"
    );
    // A role whose every permission it holds: allowed without bind.
    bindings.create(&pp, &binding("b2", "pod-lister")).await.unwrap();
    // A role granting what it does not hold, and which it may not bind: refused, naming what.
    let err = bindings.create(&pp, &binding("b3", "secret-reader")).await.unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 403
            && s.message.contains("is attempting to grant RBAC permissions not currently held")
            && s.message.contains(r#"Resources:["secrets"]"#)),
        "{err:?}"
    );
    // A role that does not exist cannot be bound without bind either.
    let err = bindings.create(&pp, &binding("b4", "missing")).await.unwrap_err();
    assert!(matches!(&err, kube::Error::Api(s) if s.code == 403 && s.message.contains("not found")), "{err:?}");
}

async fn setup_robot_kube(admin: &kube::Client) {
    use kube::api::{DynamicObject, PostParams};
    use kube::discovery::ApiResource;
    let post = |group: &str, version: &str, kind: &str, plural: &str, ns: Option<&str>, body: Value| {
        let ar = ApiResource {
            group: group.into(),
            version: version.into(),
            api_version: if group.is_empty() { version.into() } else { format!("{group}/{version}") },
            kind: kind.into(),
            plural: plural.into(),
        };
        let api: Api<DynamicObject> = match ns {
            Some(ns) => Api::namespaced_with(admin.clone(), ns, &ar),
            None => Api::all_with(admin.clone(), &ar),
        };
        let mut body = body;
        body["apiVersion"] = json!(ar.api_version);
        body["kind"] = json!(kind);
        async move { api.create(&PostParams::default(), &serde_json::from_value(body).unwrap()).await.unwrap() }
    };
    post("", "v1", "Namespace", "namespaces", None, json!({"metadata": {"name": NS}})).await;
    post("", "v1", "ServiceAccount", "serviceaccounts", Some(NS), json!({"metadata": {"name": "robot"}})).await;
    post(
        "rbac.authorization.k8s.io",
        "v1",
        "Role",
        "roles",
        Some(NS),
        json!({"metadata": {"name": "reader"}, "rules": [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}]}),
    )
    .await;
    post(
        "rbac.authorization.k8s.io",
        "v1",
        "RoleBinding",
        "rolebindings",
        Some(NS),
        json!({"metadata": {"name": "robot-reads"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "robot", "namespace": NS}]}),
    )
    .await;
    post("", "v1", "ConfigMap", "configmaps", Some(NS), json!({"metadata": {"name": "settings"}})).await;
}

/// The in-cluster path: the test binary runs itself again in a private mount namespace where
/// `/var/run/secrets/kubernetes.io/serviceaccount` holds the files testenv wrote, with the
/// service environment set, and that child connects through `kube::Config::incluster()`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn n9_an_operator_connects_in_cluster_with_its_service_account() {
    let env = TestEnv::builder().secure().start().await.expect("testenv starts");
    setup_robot_kube(&env.client()).await;
    let root = tempfile::tempdir().unwrap();
    let files = env.handle().write_incluster_files(root.path(), NS, "robot").unwrap();
    assert_eq!(std::fs::read_to_string(files.dir.join("namespace")).unwrap(), NS);
    let exe = std::env::current_exe().unwrap();
    let mut cmd = tokio::process::Command::new("unshare");
    cmd.args([
        "--mount",
        "--propagation",
        "private",
        "--",
        "sh",
        "-c",
        "mount --bind \"$1/var/run\" /var/run && shift && exec \"$@\"",
        "sh",
    ])
    .arg(root.path())
    .arg(&exe)
    .args(["incluster_child", "--exact", "--include-ignored", "--nocapture", "--test-threads=1"])
    .env("TESTENV_INCLUSTER_CHILD", "1")
    .envs(files.env())
    .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(120), cmd.output())
        .await
        .expect("the child finishes")
        .expect("unshare runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed:\nstdout: {stdout}\nstderr: {stderr}");
    // The test's ConfigMap and the namespace's `kube-root-ca.crt`, as in a real cluster.
    assert!(stdout.contains("incluster: listed 2 configmaps in team"), "{stdout}");
    assert!(stdout.contains("incluster: secrets refused with 403 Forbidden"), "{stdout}");
    // The server saw the robot, not the administrator.
    assert!(env.handle().access_log_of(SA_USER).iter().any(|r| r.attributes.resource == "configmaps" && r.allowed));
}

/// The child half of `n9`: does nothing unless started by it.
#[tokio::test]
#[ignore = "run by n9 in a private mount namespace"]
async fn incluster_child() {
    if std::env::var_os("TESTENV_INCLUSTER_CHILD").is_none() {
        return;
    }
    let config = kube::Config::incluster().expect("in-cluster config");
    assert_eq!(config.default_namespace, NS);
    let client = kube::Client::try_from(config).expect("client");
    let cms = Api::<ConfigMap>::default_namespaced(client.clone())
        .list(&ListParams::default())
        .await
        .expect("list configmaps");
    println!("incluster: listed {} configmaps in {NS}", cms.items.len());
    match Api::<Secret>::default_namespaced(client).list(&ListParams::default()).await {
        Err(kube::Error::Api(s)) if s.code == 403 => println!("incluster: secrets refused with 403 {}", s.reason),
        other => panic!("listing secrets should be forbidden: {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// kubectl against a secure testenv: `create token`, `auth whoami`, `auth can-i`, refusals.
// Each flow runs with the system kubectl (v1.32) and the newer one (`$KUBECTL_NEW`).
// ---------------------------------------------------------------------------------------------

mod kubectl_support;

async fn kubectl_flow(client: kubectl_support::Client) {
    let Some(bin) = client.binary() else {
        eprintln!("skipped: KUBECTL_NEW is not set (make test sets it after `make venv`)");
        return;
    };
    let env = TestEnv::builder().secure().start().await.expect("testenv starts");
    let k = kubectl_support::Kubectl::new(bin, &env);
    setup_robot_kube(&env.client()).await;

    // The administrator of the kubeconfig.
    let me: Value = serde_json::from_str(&k.ok(&["auth", "whoami", "-o", "json"]).await).expect("whoami JSON");
    assert_eq!(me["status"]["userInfo"]["username"], "testenv-admin", "{me}");
    assert_eq!(k.ok(&["auth", "can-i", "delete", "nodes"]).await.trim(), "yes");

    // A token for the robot, and the robot's view of the cluster.
    let token = k.ok(&["create", "token", "robot", "-n", NS, "--duration=20m"]).await.trim().to_string();
    assert_eq!(token.split('.').count(), 3, "a JWT: {token}");
    let as_robot = |args: &[&str]| {
        let mut all = vec!["--token", token.as_str()];
        all.extend_from_slice(args);
        all.iter().map(|s| s.to_string()).collect::<Vec<String>>()
    };
    let run = |args: Vec<String>| {
        let k = &k;
        async move {
            let refs: Vec<&str> = args.iter().map(String::as_str).collect();
            k.run(&refs).await
        }
    };
    let out = run(as_robot(&["auth", "whoami", "-o", "json"])).await;
    assert!(out.success(), "{}", out.stderr);
    let me: Value = serde_json::from_str(&out.stdout).expect("whoami JSON");
    assert_eq!(me["status"]["userInfo"]["username"], SA_USER, "{me}");
    let out = run(as_robot(&["auth", "can-i", "list", "configmaps", "-n", NS])).await;
    assert_eq!((out.code, out.stdout.trim()), (Some(0), "yes"), "{}", out.stderr);
    let out = run(as_robot(&["auth", "can-i", "list", "secrets", "-n", NS])).await;
    assert_eq!((out.code, out.stdout.trim()), (Some(1), "no"), "{}", out.stderr);
    let out = run(as_robot(&["auth", "can-i", "create", "deployments.apps", "-n", NS])).await;
    assert_eq!(out.stdout.trim(), "no", "{}", out.stderr);
    let out = run(as_robot(&["get", "configmaps", "-n", NS])).await;
    assert!(out.success() && out.stdout.contains("settings"), "{}{}", out.stdout, out.stderr);
    let out = run(as_robot(&["get", "secrets", "-n", NS])).await;
    assert!(!out.success());
    assert!(
        out.stderr.contains(&format!("Error from server (Forbidden): secrets is forbidden: User \"{SA_USER}\" cannot list resource \"secrets\" in API group \"\" in the namespace \"team\"")),
        "{}",
        out.stderr
    );
    // A bad token is refused before anything else.
    let out = k.run(&["--token", "nope", "get", "configmaps"]).await;
    assert!(!out.success());
    assert!(out.stderr.contains("Unauthorized") || out.stderr.contains("must be logged in"), "{}", out.stderr);

    // Pod Security: a plain pod in a restricted namespace is refused with upstream's message.
    k.ok(&["create", "namespace", "locked"]).await;
    k.ok(&["label", "namespace", "locked", "pod-security.kubernetes.io/enforce=restricted"]).await;
    let pod = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: nginx\n  namespace: locked\nspec:\n  containers:\n  - name: nginx\n    image: nginx\n";
    let err = k.fails(&["apply", "-f", "-"], pod).await;
    assert!(
        err.contains(
            "pods \"nginx\" is forbidden: violates PodSecurity \"restricted:latest\": allowPrivilegeEscalation != false"
        ),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn n10_kubectl_1_32_tokens_whoami_can_i_and_refusals() {
    kubectl_flow(kubectl_support::Client::System).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn n10_kubectl_new_tokens_whoami_can_i_and_refusals() {
    kubectl_flow(kubectl_support::Client::New).await;
}

// ---------------------------------------------------------------------------------------------
// Client certificates (kube-apiserver's `--client-ca-file`), with the system kubectl.
// ---------------------------------------------------------------------------------------------

/// A CA, and a way to issue client certificates from it: `(certificate PEM, key PEM)`.
struct ClientCa {
    pem: String,
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
}

impl ClientCa {
    fn new(name: &str) -> ClientCa {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::default();
        params.distinguished_name.push(rcgen::DnType::CommonName, name);
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.key_usages = vec![rcgen::KeyUsagePurpose::KeyCertSign, rcgen::KeyUsagePurpose::DigitalSignature];
        let pem = params.self_signed(&key).unwrap().pem();
        ClientCa { pem, issuer: rcgen::Issuer::new(params, key) }
    }

    /// A certificate for `user` in `group` (rcgen writes one organization per subject).
    fn issue(&self, user: &str, group: &str, usage: rcgen::ExtendedKeyUsagePurpose) -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::default();
        params.distinguished_name.push(rcgen::DnType::CommonName, user);
        params.distinguished_name.push(rcgen::DnType::OrganizationName, group);
        params.extended_key_usages = vec![usage];
        (params.signed_by(&key, &self.issuer).unwrap().pem(), key.serialize_pem())
    }
}

/// A kubectl whose kubeconfig presents the client certificate `cert`.
fn kubectl_as(env: &TestEnv, dir: &tempfile::TempDir, name: &str, cert: &(String, String)) -> kubectl_support::Kubectl {
    let path = dir.path().join(name);
    let config = env.handle().kubeconfig_with_certificate(&cert.0, &cert.1);
    assert!(config.contains("client-certificate-data: ") && config.contains("client-key-data: "), "{config}");
    assert!(!config.contains("token"), "{config}");
    std::fs::write(&path, config).unwrap();
    kubectl_support::Kubectl::with_kubeconfig(kubectl_support::Client::System.binary().expect("kubectl"), path)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn n13_client_certificates_of_the_client_ca_authenticate_as_subject_and_organizations() {
    let ca = ClientCa::new("cluster-ca");
    let env = TestEnv::builder().rbac(true).client_ca(ca.pem.clone()).start().await.expect("testenv starts");
    assert!(env.base_url().starts_with("https://"), "a client CA implies TLS: {}", env.base_url());
    setup_robot_kube(&env.client()).await;
    // The group `readers` may read ConfigMaps in `team`, nothing else.
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "readers", "namespace": NS},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "readers"}]});
    let admin_kubectl = kubectl_support::Kubectl::new(kubectl_support::Client::System.binary().unwrap(), &env);
    admin_kubectl.ok_stdin(&["apply", "-f", "-"], &binding.to_string()).await;

    let dir = tempfile::tempdir().unwrap();
    let alice =
        kubectl_as(&env, &dir, "alice", &ca.issue("alice", "readers", rcgen::ExtendedKeyUsagePurpose::ClientAuth));
    let me: Value = serde_json::from_str(&alice.ok(&["auth", "whoami", "-o", "json"]).await).expect("whoami JSON");
    assert_eq!(me["status"]["userInfo"]["username"], "alice", "{me}");
    assert_eq!(me["status"]["userInfo"]["groups"], json!(["readers", "system:authenticated"]), "{me}");
    let id = me["status"]["userInfo"]["extra"]["authentication.kubernetes.io/credential-id"][0].as_str().unwrap_or("");
    assert!(id.starts_with("X509SHA256=") && id.len() == 11 + 64, "{me}");
    assert!(alice.ok(&["get", "configmaps", "-n", NS]).await.contains("settings"));
    let out = alice.run(&["get", "secrets", "-n", NS]).await;
    assert!(
        out.stderr.contains("Error from server (Forbidden): secrets is forbidden: User \"alice\" cannot list resource \"secrets\" in API group \"\" in the namespace \"team\""),
        "{}",
        out.stderr
    );
    assert!(!out.success());

    // A certificate of another CA, even one naming system:masters, is no one: kubectl does not
    // present it (the server names its client CA), and the server answers 401.
    let other = ClientCa::new("cluster-ca");
    let forged = other.issue("mallory", "system:masters", rcgen::ExtendedKeyUsagePurpose::ClientAuth);
    let mallory = kubectl_as(&env, &dir, "mallory", &forged);
    let out = mallory.run(&["get", "configmaps", "-n", NS]).await;
    assert!(!out.success(), "{}", out.stdout);
    assert!(out.stderr.contains("Unauthorized") || out.stderr.contains("must be logged in"), "{}", out.stderr);
    // A client that presents it regardless (rustls does) completes the handshake and gets 401,
    // as from kube-apiserver, which checks the chain after the handshake.
    let err = kube_client(&env, &forged).await.list_configmaps().await;
    assert!(matches!(&err, Err(kube::Error::Api(s)) if s.code == 401 && s.reason == "Unauthorized"), "{err:?}");
    // So does a certificate of the client CA that is not for client authentication.
    let server_only = ca.issue("bob", "readers", rcgen::ExtendedKeyUsagePurpose::ServerAuth);
    let err = kube_client(&env, &server_only).await.list_configmaps().await;
    assert!(matches!(&err, Err(kube::Error::Api(s)) if s.code == 401), "{err:?}");

    // Tokens keep working beside certificates.
    let token = env.handle().admin_token().expect("an admin token");
    let me: Value =
        serde_json::from_str(&mallory.ok(&["--token", &token, "auth", "whoami", "-o", "json"]).await).expect("JSON");
    assert_eq!(me["status"]["userInfo"]["username"], "testenv-admin", "{me}");
}

/// A kube-rs client presenting `cert`.
async fn kube_client(env: &TestEnv, cert: &(String, String)) -> kube::Client {
    let yaml = env.handle().kubeconfig_with_certificate(&cert.0, &cert.1);
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&yaml).expect("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &kube::config::KubeConfigOptions::default())
        .await
        .expect("config");
    kube::Client::try_from(config).expect("client")
}

trait ListConfigMaps {
    async fn list_configmaps(self) -> Result<Vec<ConfigMap>, kube::Error>;
}

impl ListConfigMaps for kube::Client {
    async fn list_configmaps(self) -> Result<Vec<ConfigMap>, kube::Error> {
        Ok(Api::<ConfigMap>::namespaced(self, NS).list(&ListParams::default()).await?.items)
    }
}
