//! Cluster simulation: Endpoints of Services with a selector; Services without one are left
//! to whoever writes their Endpoints (kvm-operator does).

mod sim_support;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Endpoints, Pod, Service};
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;
use sim_support::{deployment, eventually, pod, rolled_out, start};
use testenv::SimConfig;

fn service(v: serde_json::Value) -> Service {
    serde_json::from_value(v).unwrap()
}

fn ips(list: &Option<Vec<k8s_openapi::api::core::v1::EndpointAddress>>) -> Vec<String> {
    let mut ips: Vec<String> = list.iter().flatten().map(|a| a.ip.clone()).collect();
    ips.sort();
    ips
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selector_services_get_endpoints_of_ready_and_unready_pods() {
    let env = start(SimConfig::with_nodes(2)).await;
    let services: Api<Service> = Api::default_namespaced(env.client());
    let web = json!({"metadata": {"name": "web", "labels": {"tier": "front"}}, "spec": {
        "selector": {"app": "web"},
        "ports": [{"name": "http", "port": 80, "targetPort": "http"}],
    }});
    services.create(&PostParams::default(), &service(web)).await.unwrap();
    let deployments: Api<Deployment> = Api::default_namespaced(env.client());
    deployments.create(&PostParams::default(), &deployment("web", 2, json!({}))).await.unwrap();
    rolled_out(&env, "web").await;
    let pods: Api<Pod> = Api::default_namespaced(env.client());
    let unready = json!({
        "metadata": {"labels": {"app": "web"}, "annotations": {"sim.testenv.giantswarm.io/readiness": "Never"}},
        "spec": {"containers": [{"name": "web", "image": "nginx", "ports": [{"name": "http", "containerPort": 8080}]}]},
    });
    pods.create(&PostParams::default(), &pod("warming", unready)).await.unwrap();

    let endpoints: Api<Endpoints> = Api::default_namespaced(env.client());
    let ep = eventually("endpoints with two ready and one unready address", || async {
        let ep = endpoints.get("web").await.ok()?;
        let s = ep.subsets.as_ref()?.first()?.clone();
        (ips(&s.addresses).len() == 2 && ips(&s.not_ready_addresses).len() == 1).then_some(ep)
    })
    .await;
    assert_eq!(ep.metadata.labels.as_ref().unwrap()["tier"], "front", "Endpoints carry the Service's labels");
    let subset = &ep.subsets.as_ref().unwrap()[0];
    let port = &subset.ports.as_ref().unwrap()[0];
    assert_eq!(
        (port.name.as_deref(), port.port, port.protocol.as_deref()),
        (Some("http"), 8080, Some("TCP")),
        "named targetPort resolved"
    );
    let warming = pods.get("warming").await.unwrap();
    assert_eq!(ips(&subset.not_ready_addresses), [warming.status.unwrap().pod_ip.unwrap()]);
    let address = &subset.addresses.as_ref().unwrap()[0];
    let target = address.target_ref.as_ref().unwrap();
    assert_eq!((target.kind.as_deref(), target.namespace.as_deref()), (Some("Pod"), Some("default")));
    assert!(address.node_name.is_some());

    // A deleted pod leaves; a deleted Service takes its Endpoints along.
    pods.delete("warming", &DeleteParams::default()).await.unwrap();
    eventually("the unready address to go", || async {
        let ep = endpoints.get("web").await.ok()?;
        ep.subsets?.iter().all(|s| s.not_ready_addresses.is_none()).then_some(())
    })
    .await;
    services.delete("web", &DeleteParams::default()).await.unwrap();
    eventually("the endpoints to go", || async { endpoints.get_opt("web").await.ok()?.is_none().then_some(()) }).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn services_without_a_selector_are_left_alone() {
    let env = start(SimConfig::with_nodes(1)).await;
    let services: Api<Service> = Api::default_namespaced(env.client());
    for name in ["worker", "master"] {
        let svc = json!({"metadata": {"name": name}, "spec": {"ports": [{"port": 443}]}});
        services.create(&PostParams::default(), &service(svc)).await.unwrap();
    }
    // Endpoints written by an operator, pointing at VM addresses, not at pods.
    let endpoints: Api<Endpoints> = Api::default_namespaced(env.client());
    let written: Endpoints = serde_json::from_value(json!({
        "metadata": {"name": "worker"},
        "subsets": [{"addresses": [{"ip": "10.1.2.3"}], "ports": [{"port": 443}]}],
    }))
    .unwrap();
    let written = endpoints.create(&PostParams::default(), &written).await.unwrap();
    // Pods that would match nothing anyway, to give the controller reasons to run.
    let pods: Api<Pod> = Api::default_namespaced(env.client());
    pods.create(&PostParams::default(), &pod("bystander", json!({}))).await.unwrap();
    eventually("the bystander to be ready", || async {
        sim_support::ready(&pods.get("bystander").await.ok()?).then_some(())
    })
    .await;
    env.sim().unwrap().wait_idle().await.unwrap();

    let now = endpoints.get("worker").await.unwrap();
    assert_eq!(now.metadata.resource_version, written.metadata.resource_version, "untouched");
    assert!(endpoints.get_opt("master").await.unwrap().is_none(), "none created for a selector-less Service");
}
