//! Tenants stay in their lane: what a tenant who may write AWSClusters, AWSControlPlanes and
//! AWSMachineDeployments in their own namespace tries, to reach another organisation's cluster.
//! Every test asserts through moto's request log and the API that nothing of the victim changed.

mod support;

use apis::aws::{AWSCluster, AWSControlPlane, AWSMachineDeployment};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, PostParams};
use kube::{Api, ResourceExt};
use support::*;

/// The attacker's namespace: another organisation on the same management cluster.
const EVIL: &str = "org-evil";

async fn create_victim(f: &Fixture, id: &str) -> anyhow::Result<()> {
    f.credential_secret(id).await?;
    f.cluster(id).await?;
    f.control_plane(id, "cp001", &["eu-central-1a"], 1).await?;
    f.node_pool(id, "np001", &["eu-central-1a"], 1, 3).await?;
    Ok(())
}

async fn evil_namespace(f: &Fixture) -> anyhow::Result<()> {
    let nss: Api<Namespace> = Api::all(f.client.clone());
    let obj: Namespace = serde_json::from_value(serde_json::json!({"metadata": {"name": EVIL}}))?;
    nss.create(&PostParams::default(), &obj).await?;
    Ok(())
}

/// The names of the stacks that exist (not deleted) in an account.
async fn live_stacks(aws: &aws_operator::aws::AccountClients) -> anyhow::Result<Vec<String>> {
    let mut names: Vec<String> = aws.cfn.describe_all().await?.into_iter().map(|s| s.name).collect();
    names.sort();
    Ok(names)
}

/// CloudFormation writes moto received since `since` (seconds since the epoch).
fn stack_writes_since(f: &Fixture, since: f64) -> anyhow::Result<Vec<String>> {
    Ok(f.moto
        .request_log()?
        .into_iter()
        .filter(|r| r.time >= since && r.service == "cloudformation" && r.is_write())
        .map(|r| format!("{} in {}", r.action, r.account))
        .collect())
}

/// Every AWS write moto received since `since` (seconds since the epoch).
fn aws_writes_since(f: &Fixture, since: f64) -> anyhow::Result<Vec<String>> {
    Ok(f.moto
        .request_log()?
        .into_iter()
        .filter(|r| r.time >= since && r.is_write())
        .map(|r| format!("{} {} in {}", r.service, r.action, r.account))
        .collect())
}

fn now() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_deleting_objects_labelled_and_annotated_with_another_clusters_id_deletes_nothing_of_it()
-> anyhow::Result<()> {
    let mut f = Fixture::start().await?;
    f.apply_basics().await?;
    evil_namespace(&f).await?;
    let id = "vic01";
    create_victim(&f, id).await?;
    f.start_operator().await?;
    wait_ready(&f, id).await?;
    let tenant = f.tenant_clients().await?;
    let cp = f.control_plane_clients().await?;
    let (tenant_before, cp_before) = (live_stacks(&tenant).await?, live_stacks(&cp).await?);
    for stack in [format!("cluster-{id}-tccpn"), format!("cluster-{id}-tcnp-np001")] {
        assert!(tenant_before.contains(&stack), "{tenant_before:?}");
    }
    assert!(cp_before.contains(&format!("cluster-{id}-tcnpf-np001")), "{cp_before:?}");
    let since = now();

    // The tenant, in their own namespace, names the victim's cluster id and stacks, and sets the
    // annotations an earlier version read the account of orphaned stacks from.
    let annotations = serde_json::json!({
        "aws-operator.giantswarm.io/tenant-role-arn": f.tenant_role(),
        "aws-operator.giantswarm.io/region": REGION,
    });
    let cp_obj: AWSControlPlane = serde_json::from_value(serde_json::json!({
        "apiVersion": "infrastructure.giantswarm.io/v1alpha3", "kind": "AWSControlPlane",
        "metadata": {"name": "cp001", "namespace": EVIL, "annotations": annotations.clone(),
            "labels": Fixture::labels(id, &[("giantswarm.io/control-plane", "cp001")])},
        "spec": {"availabilityZones": ["eu-central-1a"], "instanceType": "m5.xlarge", "replicas": 1},
        // Ignored on create: status is a subresource.
        "status": {"account": {"tenantRoleArn": f.tenant_role(), "region": REGION}}
    }))?;
    let md_obj: AWSMachineDeployment = serde_json::from_value(serde_json::json!({
        "apiVersion": "infrastructure.giantswarm.io/v1alpha3", "kind": "AWSMachineDeployment",
        "metadata": {"name": "np001", "namespace": EVIL, "annotations": annotations,
            "labels": Fixture::labels(id, &[("giantswarm.io/machine-deployment", "np001")])},
        "spec": {
            "nodePool": {"description": "pool", "machine": {"dockerVolumeSizeGB": 100, "kubeletVolumeSizeGB": 100}, "scaling": {"min": 1, "max": 3}},
            "provider": {"availabilityZones": ["eu-central-1a"], "worker": {"instanceType": "m5.2xlarge", "useAlikeInstanceTypes": false}}
        },
        "status": {"account": {"tenantRoleArn": f.tenant_role(), "region": REGION}}
    }))?;
    let cps: Api<AWSControlPlane> = Api::namespaced(f.client.clone(), EVIL);
    let mds: Api<AWSMachineDeployment> = Api::namespaced(f.client.clone(), EVIL);
    cps.create(&PostParams::default(), &cp_obj).await?;
    mds.create(&PostParams::default(), &md_obj).await?;
    // The operator has taken them on (its finalizer is on them), then the tenant deletes them.
    eventually(60, "the operator to put its finalizers on the tenant's objects", || async {
        let held = |f: Option<Vec<String>>| f.is_some_and(|f| !f.is_empty());
        Ok((held(cps.get("cp001").await?.metadata.finalizers) && held(mds.get("np001").await?.metadata.finalizers))
            .then_some(()))
    })
    .await?;
    cps.delete("cp001", &DeleteParams::default()).await?;
    mds.delete("np001", &DeleteParams::default()).await?;
    eventually(60, "the tenant's objects to be gone", || async {
        Ok((cps.get_opt("cp001").await?.is_none() && mds.get_opt("np001").await?.is_none()).then_some(()))
    })
    .await?;
    // Give a wrong deletion time to show.
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;

    let writes = stack_writes_since(&f, since)?;
    assert!(writes.is_empty(), "CloudFormation writes after the tenant's objects appeared: {writes:?}");
    assert_eq!(live_stacks(&tenant).await?, tenant_before);
    assert_eq!(live_stacks(&cp).await?, cp_before);
    // The victim's objects are untouched and still ready.
    let victim_cp = Api::<AWSControlPlane>::namespaced(f.client.clone(), NS).get("cp001").await?;
    assert!(victim_cp.metadata.deletion_timestamp.is_none());
    assert!(ready(victim_cp.status.as_ref().map(|s| &s.conditions)), "{:?}", victim_cp.status);
    f.kill_operator().await;
    Ok(())
}

/// The reason of the `Ready` condition of an object's status conditions.
fn ready_reason(conds: Option<&Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>>) -> Option<String> {
    conds?.iter().find(|c| c.type_ == "Ready" && c.status == "False").map(|c| c.reason.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_naming_another_organisations_credential_secret_is_refused_and_nothing_is_created()
-> anyhow::Result<()> {
    let mut f = Fixture::start().await?;
    f.apply_basics().await?;
    evil_namespace(&f).await?;
    // Organisation acme's credentials: the installation's shared one, and one in acme's own
    // namespace.
    f.credential_secret("vic02").await?;
    let own: Secret = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "credential-own", "namespace": NS},
        "stringData": {"aws.awsoperator.arn": f.tenant_role()}
    }))?;
    Api::<Secret>::namespaced(f.client.clone(), NS).create(&PostParams::default(), &own).await?;
    f.start_operator().await?;
    let since = now();

    let clusters: Api<AWSCluster> = Api::namespaced(f.client.clone(), EVIL);
    for (id, secret_ns, secret) in [("evl01", "giantswarm", "credential-vic02"), ("evl02", NS, "credential-own")] {
        let obj: AWSCluster = serde_json::from_value(serde_json::json!({
            "apiVersion": "infrastructure.giantswarm.io/v1alpha3", "kind": "AWSCluster",
            "metadata": {"name": id, "namespace": EVIL, "labels": Fixture::labels(id, &[("giantswarm.io/organization", "acme")])},
            "spec": {
                "cluster": {"description": "test", "dns": {"domain": "gauss.eu-central-1.aws.gigantic.io"}},
                "provider": {"credentialSecret": {"name": secret, "namespace": secret_ns}, "region": REGION}
            }
        }))?;
        clusters.create(&PostParams::default(), &obj).await?;
    }
    for id in ["evl01", "evl02"] {
        let result = eventually(60, &format!("{id} to be refused"), || async {
            let c = clusters.get(id).await?;
            let reason = ready_reason(c.status.as_ref().map(|s| &s.conditions));
            Ok((reason.as_deref() == Some("CredentialNotAllowed")).then_some(()))
        })
        .await;
        if let Err(e) = result {
            anyhow::bail!("{e}\n{}", dump(&f.client).await);
        }
    }
    // Nothing was created in any account, and neither Secret is held for the tenant.
    let writes = aws_writes_since(&f, since)?;
    assert!(writes.is_empty(), "AWS writes for refused clusters: {writes:?}");
    for (ns, name) in [("giantswarm", "credential-vic02"), (NS, "credential-own")] {
        let s = Api::<Secret>::namespaced(f.client.clone(), ns).get(name).await?;
        assert!(s.metadata.finalizers.unwrap_or_default().is_empty(), "{ns}/{name} is held");
    }
    // The tenant can delete what was refused: nothing was created, so nothing holds it.
    for id in ["evl01", "evl02"] {
        clusters.delete(id, &DeleteParams::default()).await?;
    }
    let gone = eventually(60, "the refused clusters to be deleted", || async {
        let left = clusters.list(&Default::default()).await?.items.len();
        Ok((left == 0).then_some(()))
    })
    .await;
    if let Err(e) = gone {
        anyhow::bail!("{e}\n{}", dump(&f.client).await);
    }
    let writes = aws_writes_since(&f, since)?;
    assert!(writes.is_empty(), "AWS writes while deleting refused clusters: {writes:?}");
    f.kill_operator().await;
    Ok(())
}

/// Another team's KMS key in the tenant account, with a policy that shuts the account's IAM
/// principals out (real AWS answers `AccessDeniedException` to reading it): the orphan-key sweep
/// skips it instead of blocking the cluster, and schedules no key for deletion.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_kms_key_the_operator_may_not_read_does_not_block_the_cluster() -> anyhow::Result<()> {
    let mut f = Fixture::start().await?;
    f.apply_basics().await?;
    let tenant = f.tenant_clients().await?;
    let policy = serde_json::json!({
        "Version": "2012-10-17",
        "Statement": [{
            "Effect": "Allow",
            "Principal": {"AWS": "arn:aws:iam::111122223333:role/KeyAdmin"},
            "Action": "kms:*",
            "Resource": "*"
        }]
    });
    let foreign = tenant
        .kms
        .create_key()
        .description("another team's key")
        .policy(policy.to_string())
        .bypass_policy_lockout_safety_check(true)
        .send()
        .await?;
    let foreign_id = foreign.key_metadata().map(|m| m.key_id().to_string()).expect("a key id");
    let denied = tenant.kms.list_resource_tags().key_id(&foreign_id).send().await;
    assert!(denied.is_err(), "moto lets the account read a key whose policy shuts it out");

    let id = "kms01";
    let since = now();
    create_victim(&f, id).await?;
    f.start_operator().await?;
    wait_ready(&f, id).await?;
    let deletions: Vec<String> = f
        .moto
        .request_log()?
        .into_iter()
        .filter(|r| r.time >= since && r.service == "kms" && r.action == "ScheduleKeyDeletion")
        .map(|r| format!("{} in {}", r.action, r.account))
        .collect();
    assert!(deletions.is_empty(), "{deletions:?}");
    f.kill_operator().await;
    Ok(())
}

/// An AWSCluster in `ns` named `name`, labelled with cluster id `id`, whose credential Secret is
/// `secret` in `secret_ns`.
fn cluster_object(ns: &str, name: &str, id: &str, secret_ns: &str, secret: &str) -> anyhow::Result<AWSCluster> {
    Ok(serde_json::from_value(serde_json::json!({
        "apiVersion": "infrastructure.giantswarm.io/v1alpha3", "kind": "AWSCluster",
        "metadata": {"name": name, "namespace": ns, "labels": Fixture::labels(id, &[])},
        "spec": {
            "cluster": {"description": "test", "dns": {"domain": "gauss.eu-central-1.aws.gigantic.io"}},
            "provider": {"credentialSecret": {"name": secret, "namespace": secret_ns}, "region": REGION}
        }
    }))?)
}

/// Wait until `name` in `ns` reports `Ready=False` with `reason`; its message.
async fn refused(f: &Fixture, ns: &str, name: &str, reason: &str) -> anyhow::Result<String> {
    let clusters: Api<AWSCluster> = Api::namespaced(f.client.clone(), ns);
    let result = eventually(90, &format!("{ns}/{name} to be refused with {reason}"), || async {
        let c = clusters.get(name).await?;
        let conds = c.status.as_ref().map(|s| &s.conditions);
        Ok((ready_reason(conds).as_deref() == Some(reason)).then(|| ready_message(conds)))
    })
    .await;
    match result {
        Ok(message) => Ok(message),
        Err(e) => anyhow::bail!("{e}\n{}", dump(&f.client).await),
    }
}

/// The Warning events about `name` with `reason`.
async fn warnings(f: &Fixture, ns: &str, name: &str, reason: &str) -> anyhow::Result<usize> {
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(f.client.clone(), ns);
    Ok(events
        .list(&Default::default())
        .await?
        .items
        .iter()
        .filter(|e| {
            e.type_.as_deref() == Some("Warning")
                && e.reason.as_deref() == Some(reason)
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
        })
        .count())
}

/// Delete the AWSClusters `names` in `ns` and wait until they are gone (finalizers released).
async fn delete_clusters(f: &Fixture, ns: &str, names: &[&str]) -> anyhow::Result<()> {
    let clusters: Api<AWSCluster> = Api::namespaced(f.client.clone(), ns);
    for name in names {
        clusters.delete(name, &DeleteParams::default()).await?;
    }
    let result = eventually(90, &format!("{names:?} to be gone"), || async {
        for name in names {
            if clusters.get_opt(name).await?.is_some() {
                return Ok(None);
            }
        }
        Ok(Some(()))
    })
    .await;
    if let Err(e) = result {
        anyhow::bail!("{e}\n{}", dump(&f.client).await);
    }
    Ok(())
}

/// The namespace `name` exists and is not being deleted.
async fn namespace_alive(f: &Fixture, name: &str) -> anyhow::Result<Namespace> {
    let ns = Api::<Namespace>::all(f.client.clone()).get_opt(name).await?;
    let Some(ns) = ns else { anyhow::bail!("namespace {name} was deleted") };
    anyhow::ensure!(ns.metadata.deletion_timestamp.is_none(), "namespace {name} is being deleted");
    Ok(ns)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_whose_id_names_an_existing_namespace_is_refused_and_the_namespace_survives_its_deletion()
-> anyhow::Result<()> {
    let mut f = Fixture::start().await?;
    f.apply_basics().await?;
    evil_namespace(&f).await?;
    let clusters: Api<AWSCluster> = Api::namespaced(f.client.clone(), EVIL);
    // The API server refuses an AWSCluster named like a namespace: its name is the cluster id.
    let err = clusters
        .create(&PostParams::default(), &cluster_object(EVIL, "kube-system", "kube-system", EVIL, "credential")?)
        .await
        .expect_err("an AWSCluster named kube-system is refused");
    assert!(matches!(&err, kube::Error::Api(s) if s.code == 422 && s.message.contains("cluster id")), "{err}");

    // A namespace an administrator made for something else, named like a cluster id and
    // labelled as an earlier version labelled cluster namespaces.
    let nss: Api<Namespace> = Api::all(f.client.clone());
    let taken: Namespace = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "taken1", "labels": {"giantswarm.io/cluster": "taken1"}}
    }))?;
    nss.create(&PostParams::default(), &taken).await?;
    // The tenant's own credential: nothing but the id stops these clusters.
    let own: Secret = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "credential", "namespace": EVIL},
        "stringData": {"aws.awsoperator.arn": f.tenant_role()}
    }))?;
    Api::<Secret>::namespaced(f.client.clone(), EVIL).create(&PostParams::default(), &own).await?;

    // Objects written past the rule (a CRD that predates it) reach the operator, which refuses
    // them itself.
    let crds: Api<CustomResourceDefinition> = Api::all(f.client.clone());
    let mut crd = crds.get("awsclusters.infrastructure.giantswarm.io").await?;
    for version in &mut crd.spec.versions {
        if let Some(schema) = version.schema.as_mut().and_then(|s| s.open_api_v3_schema.as_mut()) {
            schema.x_kubernetes_validations = None;
        }
    }
    crds.replace("awsclusters.infrastructure.giantswarm.io", &PostParams::default(), &crd).await?;
    let bad_name = cluster_object(EVIL, "kube-system", "kube-system", EVIL, "credential")?;
    eventually(20, "the CRD without its rule to be served", || async {
        Ok(clusters.create(&PostParams::default(), &bad_name).await.ok().map(drop))
    })
    .await?;
    // The organisation's own namespace as the id, and a well-named cluster labelled kube-system.
    clusters.create(&PostParams::default(), &cluster_object(EVIL, NS, NS, EVIL, "credential")?).await?;
    clusters.create(&PostParams::default(), &cluster_object(EVIL, "evl03", "kube-system", EVIL, "credential")?).await?;
    clusters.create(&PostParams::default(), &cluster_object(EVIL, "taken1", "taken1", EVIL, "credential")?).await?;
    let since = now();
    f.start_operator().await?;

    for (name, field) in
        [("kube-system", "metadata.labels[giantswarm.io/cluster]"), (NS, "metadata.labels"), ("evl03", "kube-system")]
    {
        let message = refused(&f, EVIL, name, "InvalidClusterID").await?;
        assert!(message.contains(field) && message.contains("starting with a letter"), "{name}: {message}");
        assert!(warnings(&f, EVIL, name, "InvalidClusterID").await? >= 1, "no Warning event for {name}");
    }
    let message = refused(&f, EVIL, "taken1", "ClusterIDInUse").await?;
    assert!(message.contains("taken1") && message.contains("earlier version"), "{message}");

    delete_clusters(&f, EVIL, &["kube-system", NS, "evl03", "taken1"]).await?;
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    for name in ["kube-system", NS, "taken1"] {
        namespace_alive(&f, name).await?;
    }
    let writes = aws_writes_since(&f, since)?;
    assert!(writes.is_empty(), "AWS writes for refused clusters: {writes:?}");
    f.kill_operator().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_cluster_with_an_id_in_use_creates_nothing_and_its_deletion_deletes_nothing_of_the_first()
-> anyhow::Result<()> {
    let mut f = Fixture::start().await?;
    f.apply_basics().await?;
    evil_namespace(&f).await?;
    let id = "vic03";
    create_victim(&f, id).await?;
    f.start_operator().await?;
    wait_ready(&f, id).await?;
    let victim = Api::<AWSCluster>::namespaced(f.client.clone(), NS).get(id).await?;
    let victim_uid = victim.metadata.uid.clone().unwrap_or_default();
    let claim = namespace_alive(&f, id).await?;
    assert_eq!(claim.labels().get("giantswarm.io/cluster-uid"), Some(&victim_uid), "{:?}", claim.metadata);
    let tenant = f.tenant_clients().await?;
    let cp = f.control_plane_clients().await?;
    let (tenant_before, cp_before) = (live_stacks(&tenant).await?, live_stacks(&cp).await?);
    // Every stack of the first cluster carries its AWSCluster's UID from creation on.
    for aws in [&tenant, &cp] {
        for stack in aws.cfn.describe_all().await? {
            assert_eq!(stack.tags.get("giantswarm.io/cluster-uid"), Some(&victim_uid), "{}", stack.name);
        }
    }
    let since = now();

    // The tenant's own credential reaches the same account: the worst case.
    let own: Secret = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "credential-own", "namespace": EVIL},
        "stringData": {"aws.awsoperator.arn": f.tenant_role()}
    }))?;
    Api::<Secret>::namespaced(f.client.clone(), EVIL).create(&PostParams::default(), &own).await?;
    let clusters: Api<AWSCluster> = Api::namespaced(f.client.clone(), EVIL);
    clusters.create(&PostParams::default(), &cluster_object(EVIL, id, id, EVIL, "credential-own")?).await?;
    let cp_obj: AWSControlPlane = serde_json::from_value(serde_json::json!({
        "apiVersion": "infrastructure.giantswarm.io/v1alpha3", "kind": "AWSControlPlane",
        "metadata": {"name": "cp001", "namespace": EVIL,
            "labels": Fixture::labels(id, &[("giantswarm.io/control-plane", "cp001")])},
        "spec": {"availabilityZones": ["eu-central-1a"], "instanceType": "m5.xlarge", "replicas": 1}
    }))?;
    let cps: Api<AWSControlPlane> = Api::namespaced(f.client.clone(), EVIL);
    cps.create(&PostParams::default(), &cp_obj).await?;

    let message = refused(&f, EVIL, id, "ClusterIDInUse").await?;
    assert!(message.contains(&format!("AWSCluster {NS}/{id}")), "{message}");
    assert!(warnings(&f, EVIL, id, "ClusterIDInUse").await? >= 1);
    let result = eventually(60, "the second control plane to be refused", || async {
        let c = cps.get("cp001").await?;
        Ok((ready_reason(c.status.as_ref().map(|s| &s.conditions)).as_deref() == Some("ClusterIDInUse")).then_some(()))
    })
    .await;
    if let Err(e) = result {
        anyhow::bail!("{e}\n{}", dump(&f.client).await);
    }
    let writes = stack_writes_since(&f, since)?;
    assert!(writes.is_empty(), "CloudFormation writes for the second cluster: {writes:?}");

    cps.delete("cp001", &DeleteParams::default()).await?;
    delete_clusters(&f, EVIL, &[id]).await?;
    eventually(60, "the second control plane to be gone", || async {
        Ok(cps.get_opt("cp001").await?.is_none().then_some(()))
    })
    .await?;
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;

    let writes = stack_writes_since(&f, since)?;
    assert!(writes.is_empty(), "CloudFormation writes after the second cluster appeared: {writes:?}");
    assert_eq!(live_stacks(&tenant).await?, tenant_before);
    assert_eq!(live_stacks(&cp).await?, cp_before);
    let claim = namespace_alive(&f, id).await?;
    assert_eq!(claim.labels().get("giantswarm.io/cluster-uid"), Some(&victim_uid));
    let victim = Api::<AWSCluster>::namespaced(f.client.clone(), NS).get(id).await?;
    assert!(ready(victim.status.as_ref().map(|s| &s.conditions)), "{:?}", victim.status);
    f.kill_operator().await;
    Ok(())
}
