//! Legacy clusters on moto, reconciled by the operator: a legacy cluster as Giant Swarm's API
//! wrote it (the apis fixture `awsconfig-p3x7d.yaml`, moved to the test region, its namespace
//! and Release, and pointed at the fixture's management VPC and route table) is applied, and the
//! operator's legacy resource set creates its key, bucket, node configs and the stacks
//! `host-setup`, `guest-main` and `host-main`. The services' own APIs show what the object set:
//! the peering role, the VPC and subnets, the master's one-instance group with its etcd volume
//! and interface, the worker group from a launch template behind the ingress load balancer, the
//! four load balancers, the peering and its routes, the delegation, the key and the bucket.
//! Deleting the object removes all of it and releases the finalizer. An AWSConfig without the
//! release label, as Giant Swarm's tooling wrote them, is routed by its
//! `spec.versionBundle.version` through the Release giving `aws-operator` that version; one
//! naming another operator version is left alone.

mod support;

use std::time::Instant;

use apis::aws::AWSCluster;
use apis::aws_config::AWSConfig;
use aws_stacks::stacks::legacy::{self, LegacyStack};
use kube::api::DeleteParams;
use kube::{Api, ResourceExt};
use support::legacy::{
    ZONE, apply, installation_zone, legacy_cluster, live_stacks, peering_state, routes_to, wait_created,
};
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_awsconfig_applied_becomes_its_three_stacks_on_aws_and_deleting_it_leaves_nothing() -> anyhow::Result<()> {
    // Stack deletes hold the workers on their terminating hook (an hour at AWS's pace), as
    // CloudFormation does: the drainers must release them.
    let mut f = Fixture::start_with(motoenv::Launcher::from_env().group_deletion_hooks(true)).await?;
    f.apply_basics().await?;
    let id = "p3x7d";
    f.credential_secret(id).await?;
    let cp = f.control_plane_clients().await?;
    let tenant = f.tenant_clients().await?;
    let parent_zone = installation_zone(&cp).await?;
    let config = legacy_cluster(&f, id).await?;
    f.start_operator().await?;

    // From applying the object to `Created`: the time and every AWS call moto answered.
    let calls_before = f.moto.request_log()?.len();
    let started = Instant::now();
    apply(&f, &config).await?;
    let created = wait_created(&f, id, 300).await?;
    let elapsed = started.elapsed();
    let log = f.moto.request_log()?;
    let calls = log.len() - calls_before;
    let mut per_service: std::collections::BTreeMap<&str, usize> = Default::default();
    let mut writes = 0;
    for r in &log[calls_before..] {
        *per_service.entry(r.service.as_str()).or_default() += 1;
        writes += usize::from(r.is_write());
    }
    println!(
        "legacy cluster {id}: Created after {:.1} s and {calls} AWS calls ({writes} writes; by service {per_service:?})",
        elapsed.as_secs_f64()
    );
    // Every call from applying to `Created` is the operator's (the test only reads the API
    // server meanwhile), signed by its key or keys assumed from it.
    assert!(log[calls_before..].iter().all(|r| r.principal == "AKIATESTOPERATOR"), "only the operator's calls");

    let status = created.status.clone().unwrap_or_default();
    assert_eq!(status.cluster.latest_version(), Some(VERSION), "the operator version is recorded");
    assert_eq!(status.aws.availability_zones.len(), 1, "the zone the stacks were built from");
    assert_eq!(status.aws.availability_zones[0].subnet.private.cidr, "10.11.0.0/19");
    assert_eq!(status.cluster.network.cidr, "10.11.0.0/16");
    let mut recorded: Vec<_> = status.stacks.iter().map(|s| (s.name.clone(), s.status.clone())).collect();
    recorded.sort();
    let name = |stack| legacy::stack_name(id, stack);
    assert_eq!(
        recorded,
        [
            (name(LegacyStack::GuestMain), "CREATE_COMPLETE".to_string()),
            (name(LegacyStack::HostMain), "CREATE_COMPLETE".to_string()),
            (name(LegacyStack::HostSetup), "CREATE_COMPLETE".to_string()),
        ]
    );
    let events = event_notes(&f.client, id, "Warning", None).await?;
    assert!(events.is_empty(), "no Warning event: {events:?}");

    // CloudFormation: host-setup and host-main in the management account, guest-main in the
    // cluster's, guest-main's template delivered through the bucket (it is over the limit).
    assert_eq!(live_stacks(&cp).await?, [name(LegacyStack::HostMain), name(LegacyStack::HostSetup)]);
    assert_eq!(live_stacks(&tenant).await?, [name(LegacyStack::GuestMain)]);
    let guest = tenant.cfn.describe(&name(LegacyStack::GuestMain)).await?.expect("guest-main");
    assert_eq!(guest.tags.get("giantswarm.io/stack").map(String::as_str), Some("guest-main"));
    assert_eq!(guest.tags.get("giantswarm.io/cluster-uid"), created.metadata.uid.as_ref());
    let vpc_id = guest.outputs["VPCID"].clone();
    let peering = guest.outputs["VPCPeeringConnectionID"].clone();

    // IAM: the peering role, for the cluster's account.
    let role = cp.iam.get_role().role_name(format!("{id}-vpc-peer-access")).send().await?;
    assert!(
        role.role().is_some_and(|r| r.assume_role_policy_document().unwrap_or_default().contains(&tenant.account_id))
    );

    // EC2: the VPC and subnets of `spec.aws.vpc`, the peering with the management VPC.
    let vpcs = tenant.ec2.describe_vpcs().vpc_ids(&vpc_id).send().await?;
    assert_eq!(vpcs.vpcs()[0].cidr_block(), Some("10.11.0.0/16"), "spec.aws.vpc.cidr");
    let subnets = tenant
        .ec2
        .describe_subnets()
        .filters(aws_sdk_ec2::types::Filter::builder().name("vpc-id").values(&vpc_id).build())
        .send()
        .await?;
    let mut blocks: Vec<(String, String)> = subnets
        .subnets()
        .iter()
        .map(|s| {
            (s.cidr_block().unwrap_or_default().to_string(), s.availability_zone().unwrap_or_default().to_string())
        })
        .collect();
    blocks.sort();
    let zone = format!("{REGION}b");
    assert_eq!(blocks, [("10.11.0.0/19".to_string(), zone.clone()), ("10.11.32.0/19".to_string(), zone.clone())]);
    assert_eq!(peering_state(&cp, &peering).await?.as_deref(), Some("active"), "the peering is accepted");

    // Auto Scaling: the master's one-instance group, the workers from a launch template behind
    // the ingress load balancer.
    let groups = tenant.autoscaling.describe_auto_scaling_groups().send().await?;
    let group = |name_tag: &str| {
        groups
            .auto_scaling_groups()
            .iter()
            .find(|g| g.tags().iter().any(|t| t.key() == Some("Name") && t.value() == Some(name_tag)))
            .cloned()
            .unwrap_or_else(|| panic!("a group named {name_tag}"))
    };
    let master = group(&format!("{id}-master"));
    assert_eq!((master.min_size(), master.max_size(), master.desired_capacity()), (Some(1), Some(1), Some(1)));
    assert_eq!(master.availability_zones(), std::slice::from_ref(&zone));
    // The namespace's Service and Endpoints `master`: the master's address, for Prometheus.
    let master_instance = master.instances().first().and_then(|i| i.instance_id()).expect("the master").to_string();
    let described = tenant.ec2.describe_instances().instance_ids(&master_instance).send().await?;
    let master_ip = described.reservations()[0].instances()[0].private_ip_address().unwrap_or_default().to_string();
    let service = Api::<k8s_openapi::api::core::v1::Service>::namespaced(f.client.clone(), id).get("master").await?;
    let ports: Vec<i32> = service.spec.and_then(|s| s.ports).unwrap_or_default().iter().map(|p| p.port).collect();
    assert_eq!(ports, [443], "the master Service");
    let endpoints: Api<k8s_openapi::api::core::v1::Endpoints> = Api::namespaced(f.client.clone(), id);
    let addresses = eventually(60, "the master Endpoints", || async {
        let ep = endpoints.get_opt("master").await?;
        let ips: Vec<String> = ep
            .and_then(|e| e.subsets)
            .unwrap_or_default()
            .iter()
            .flat_map(|s| s.addresses.clone().unwrap_or_default())
            .map(|a| a.ip)
            .collect();
        Ok((!ips.is_empty()).then_some(ips))
    })
    .await?;
    assert_eq!(addresses, [master_ip], "the Endpoints hold the master's address");
    let workers = group(&format!("{id}-worker"));
    assert_eq!(workers.desired_capacity(), Some(3), "three entries in spec.aws.workers");
    assert_eq!(workers.load_balancer_names(), [format!("{id}-ingress")]);
    assert!(workers.launch_configuration_name().is_none(), "a launch template, not a launch configuration");
    let templates = tenant
        .ec2
        .describe_launch_templates()
        .launch_template_names(format!("{id}-worker-launch-template"))
        .send()
        .await?;
    let template_id = templates.launch_templates()[0].launch_template_id().unwrap_or_default().to_string();
    let version = tenant.ec2.describe_launch_template_versions().launch_template_id(&template_id).send().await?;
    let data = version.launch_template_versions()[0].launch_template_data().cloned().expect("data");
    assert_eq!(data.instance_type().map(|t| t.as_str()), Some("m4.2xlarge"));
    assert_eq!(data.image_id(), Some("ami-0f8ab3c2d1e4f5a6b"));

    // The master's etcd volume in its zone, encrypted.
    let volumes = tenant
        .ec2
        .describe_volumes()
        .filters(aws_sdk_ec2::types::Filter::builder().name("tag:Name").values(format!("{id}-master0-etcd")).build())
        .send()
        .await?;
    assert_eq!(volumes.volumes().len(), 1);
    assert_eq!(volumes.volumes()[0].availability_zone(), Some(zone.as_str()));
    assert_eq!(volumes.volumes()[0].encrypted(), Some(true));

    // ELB: the four load balancers.
    let lbs = tenant.elb.describe_load_balancers().send().await?;
    let mut lb_names: Vec<String> =
        lbs.load_balancer_descriptions().iter().filter_map(|l| l.load_balancer_name()).map(str::to_string).collect();
    lb_names.sort();
    assert_eq!(
        lb_names,
        [format!("{id}-api"), format!("{id}-api-internal"), format!("{id}-etcd"), format!("{id}-ingress")]
    );

    // The management route table's route to the private subnet through the peering, and the
    // delegation of the cluster zone.
    let tables = aws_operator::aws::ec2::control_plane_route_tables(
        &cp,
        &config.spec.aws.vpc.peer_id,
        &config.spec.aws.vpc.route_table_names,
    )
    .await?;
    assert_eq!(tables.len(), 1);
    assert_eq!(routes_to(&cp, &tables[0].0, "10.11.0.0/19").await?, std::slice::from_ref(&peering));
    let cluster_zone = format!("{id}.k8s.{ZONE}");
    let delegated = aws_operator::aws::route53::ns_record(&cp, &parent_zone, &cluster_zone).await?;
    assert!(delegated.is_some_and(|servers| !servers.is_empty()), "the NS record of {cluster_zone}");

    // KMS and S3: the key, the bucket with both node configs, encrypted with the key.
    let (key_arn, usable) =
        aws_operator::aws::kms::describe_key(&tenant, &format!("alias/{id}")).await?.expect("the cluster key");
    assert!(usable);
    let bucket = aws_stacks::names::bucket(&tenant.account_id, id);
    let listed = tenant.s3.list_objects_v2().bucket(&bucket).send().await?;
    let mut keys: Vec<String> = listed.contents().iter().filter_map(|o| o.key()).map(str::to_string).collect();
    keys.sort();
    // guest-main's template is over CloudFormation's inline limit: it went through the bucket.
    let template_prefix = format!("cloudformation/{}/", name(LegacyStack::GuestMain));
    assert!(keys.iter().any(|k| k.starts_with(&template_prefix)), "the template in the bucket: {keys:?}");
    keys.retain(|k| !k.starts_with("cloudformation/"));
    assert_eq!(
        keys,
        [legacy::worker_config_key(VERSION, id), aws_stacks::names::master_config_key(VERSION, id, 0)],
        "the workers' and the master's node configs"
    );
    let worker_config = tenant.s3.get_object().bucket(&bucket).key(&keys[0]).send().await?;
    let body = worker_config.body.collect().await?.into_bytes();
    let text = String::from_utf8_lossy(&body);
    assert!(!text.contains("BEGIN RSA PRIVATE KEY") && !text.contains("BEGIN EC PRIVATE KEY"), "no key in clear");
    assert!(text.contains("ignition"), "an Ignition config");
    assert!(!key_arn.is_empty());

    // Scaling: a fourth worker, with the bounds the API writes beside it. The group's desired
    // capacity follows through a guest-main update, and the lifecycle says `Updated`.
    let group_name = workers.auto_scaling_group_name().unwrap_or_default().to_string();
    assert_eq!(status.aws.auto_scaling_group.name, group_name, "status.aws.autoScalingGroup.name");
    let worker = serde_json::to_value(&config.spec.aws.workers[0])?;
    let patch = serde_json::json!({"spec": {
        "cluster": {"scaling": {"min": 4, "max": 4}},
        "aws": {"workers": [worker.clone(), worker.clone(), worker.clone(), worker]},
    }});
    let api: Api<AWSConfig> = Api::namespaced(f.client.clone(), NS);
    api.patch(id, &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&patch)).await?;
    let scaled = eventually(180, "the worker group to have four instances desired", || async {
        let out =
            tenant.autoscaling.describe_auto_scaling_groups().auto_scaling_group_names(&group_name).send().await?;
        Ok(out.auto_scaling_groups().first().and_then(|g| g.desired_capacity()).filter(|d| *d == 4))
    })
    .await;
    if let Err(e) = scaled {
        let left = api.get_opt(id).await?.map(|c| serde_json::to_string(&c.status).unwrap_or_default());
        anyhow::bail!("{e}\n{left:?}\n{:?}", event_notes(&f.client, id, "Warning", None).await?);
    }
    eventually(120, "the lifecycle to say Updated", || async {
        let c = api.get(id).await?;
        let updated = c.status.as_ref().is_some_and(|s| {
            s.cluster.has_condition(apis::cluster_status::ClusterCondition::Updated) && ready(Some(&s.conditions))
        });
        Ok(updated.then_some(()))
    })
    .await?;

    // Scaling in: the leaving worker waits on the group's terminating hook, and the drainers
    // meet it with a DrainerConfig for its node, labelled with the cluster.
    let patch = serde_json::json!({"spec": {
        "cluster": {"scaling": {"min": 3, "max": 3}},
        "aws": {"workers": [worker.clone(), worker.clone(), worker.clone()]},
    }});
    api.patch(id, &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&patch)).await?;
    let drainers: Api<apis::drainer::DrainerConfig> = Api::namespaced(f.client.clone(), NS);
    let selector = kube::api::ListParams::default().labels(&format!("giantswarm.io/cluster={id}"));
    let (leaving, drainer) = eventually(180, "a DrainerConfig for the worker that leaves", || async {
        let instances = tenant.autoscaling.describe_auto_scaling_instances().send().await?;
        let waiting: Vec<String> = instances
            .auto_scaling_instances()
            .iter()
            .filter(|i| i.auto_scaling_group_name() == Some(group_name.as_str()))
            .filter(|i| i.lifecycle_state() == Some("Terminating:Wait"))
            .filter_map(|i| i.instance_id().map(str::to_string))
            .collect();
        let found = drainers.list(&selector).await?.items.into_iter().find_map(|dc| {
            let instance = dc.labels().get(apis::labels::AWS_OPERATOR_INSTANCE).cloned()?;
            waiting.contains(&instance).then_some((instance, dc.name_any()))
        });
        Ok(found)
    })
    .await?;
    assert!(drainer.starts_with("ip-"), "the DrainerConfig is named after the node: {drainer} of {leaving}");

    // Deleting: host-main, guest-main, host-setup, the bucket and the key go, and then the
    // finalizer. The waiting workers are released at once, not after their hook's hour.
    api.delete(id, &DeleteParams::default()).await?;
    let gone =
        eventually(300, "the AWSConfig to be gone", || async { Ok(api.get_opt(id).await?.is_none().then_some(())) })
            .await;
    if let Err(e) = gone {
        let left = api.get_opt(id).await?.map(|c| serde_json::to_string(&c.status).unwrap_or_default());
        anyhow::bail!("{e}\n{left:?}\n{:?}", event_notes(&f.client, id, "Warning", None).await?);
    }
    let released = event_notes(&f.client, id, "Normal", Some("NodeReleasedForDeletion")).await?;
    assert!(released.iter().any(|note| note.contains(&leaving)), "{leaving} released for the deletion: {released:?}");
    assert!(drainers.list(&selector).await?.items.is_empty(), "no DrainerConfig of the cluster is left");
    assert!(live_stacks(&cp).await?.is_empty(), "host-setup and host-main are deleted");
    assert!(live_stacks(&tenant).await?.is_empty(), "guest-main is deleted");
    assert!(routes_to(&cp, &tables[0].0, "10.11.0.0/19").await?.is_empty(), "the route through the peering is gone");
    assert_ne!(peering_state(&cp, &peering).await?.as_deref(), Some("active"), "the peering is gone");
    assert_eq!(aws_operator::aws::route53::ns_record(&cp, &parent_zone, &cluster_zone).await?, None);
    let vpcs = tenant.ec2.describe_vpcs().send().await?;
    assert!(vpcs.vpcs().iter().all(|v| v.vpc_id() != Some(vpc_id.as_str())), "the VPC is gone");
    assert!(tenant.s3.head_bucket().bucket(&bucket).send().await.is_err(), "the bucket is gone");
    let key = aws_operator::aws::kms::describe_key(&tenant, &format!("alias/{id}")).await?;
    assert!(key.is_none_or(|(_, usable)| !usable), "the key is scheduled for deletion");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_operator_reconciles_a_node_pools_cluster_and_a_legacy_cluster_each_by_its_own_resource_set()
-> anyhow::Result<()> {
    let mut f = Fixture::start().await?;
    f.apply_basics().await?;
    let cp = f.control_plane_clients().await?;
    installation_zone(&cp).await?;
    f.credential_secret("np7ab").await?;
    f.cluster("np7ab").await?;
    f.control_plane("np7ab", "cp001", &["eu-central-1a"], 1).await?;
    f.node_pool("np7ab", "np001", &["eu-central-1a"], 1, 3).await?;
    f.credential_secret("lg7ab").await?;
    let config = legacy_cluster(&f, "lg7ab").await?;
    apply(&f, &config).await?;
    f.start_operator().await?;

    wait_created(&f, "lg7ab", 300).await?;
    let clusters: Api<AWSCluster> = Api::namespaced(f.client.clone(), NS);
    let result = eventually(300, "cluster np7ab to be Ready", || async {
        let c = clusters.get("np7ab").await?;
        Ok(ready(c.status.as_ref().map(|s| &s.conditions)).then_some(()))
    })
    .await;
    if let Err(e) = result {
        anyhow::bail!("{e}\n{}", dump(&f.client).await);
    }
    // Each by its own set: the node-pools stacks for one, the legacy stacks for the other, and
    // each object under its own controller's finalizer only.
    let tenant = f.tenant_clients().await?;
    let stacks = live_stacks(&tenant).await?;
    assert!(stacks.contains(&"cluster-np7ab-tccp".to_string()), "{stacks:?}");
    assert!(stacks.contains(&"cluster-lg7ab-guest-main".to_string()), "{stacks:?}");
    assert!(
        !stacks.iter().any(|s| s.starts_with("cluster-lg7ab-tc") || s.starts_with("cluster-np7ab-guest")),
        "{stacks:?}"
    );
    let legacy_obj = Api::<AWSConfig>::namespaced(f.client.clone(), NS).get("lg7ab").await?;
    assert_eq!(
        legacy_obj.metadata.finalizers.unwrap_or_default(),
        [format!("operatorkit.giantswarm.io/{}", aws_operator::controllers::legacy::CONTROLLER)]
    );
    let cluster = clusters.get("np7ab").await?;
    let finalizers = cluster.metadata.finalizers.unwrap_or_default();
    assert!(!finalizers.iter().any(|f| f.contains("legacy")), "{finalizers:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_awsconfig_with_a_broken_field_is_named_with_the_fix_and_nothing_is_created() -> anyhow::Result<()> {
    let mut f = Fixture::start().await?;
    f.apply_basics().await?;
    let id = "bad01";
    f.credential_secret(id).await?;
    let cp = f.control_plane_clients().await?;
    let tenant = f.tenant_clients().await?;
    // Two broken objects: no master (the schema accepts it, the stacks cannot be built), and a
    // peer VPC that is not the management VPC.
    let mut no_master = legacy_cluster(&f, id).await?;
    no_master.spec.aws.masters.clear();
    apply(&f, &no_master).await?;
    let mut wrong_peer = legacy_cluster(&f, "bad02").await?;
    wrong_peer.spec.aws.vpc.peer_id = "vpc-0123456789abcdef0".into();
    f.credential_secret("bad02").await?;
    apply(&f, &wrong_peer).await?;
    f.start_operator().await?;

    let api: Api<AWSConfig> = Api::namespaced(f.client.clone(), NS);
    for (name, field) in [(id, "spec.aws.masters"), ("bad02", "spec.aws.vpc.peerId")] {
        let message = eventually(60, &format!("{name} to be refused naming {field}"), || async {
            let c = api.get(name).await?;
            let message = ready_message(c.status.as_ref().map(|s| &s.conditions));
            Ok(message.contains(field).then_some(message))
        })
        .await?;
        assert!(message.contains("add ") || message.contains("set "), "the fix: {message}");
        let events = eventually(30, &format!("{name}'s Warning event"), || async {
            let w = event_notes(&f.client, name, "Warning", None).await?;
            Ok((!w.is_empty()).then_some(w))
        })
        .await?;
        assert!(events.iter().any(|e| e.contains(field)), "{name}: {events:?}");
    }
    // Nothing in AWS: no stack, no key, no bucket.
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    assert!(live_stacks(&cp).await?.is_empty());
    assert!(live_stacks(&tenant).await?.is_empty());
    for name in [id, "bad02"] {
        assert_eq!(aws_operator::aws::kms::describe_key(&tenant, &format!("alias/{name}")).await?, None);
        let bucket = aws_stacks::names::bucket(&tenant.account_id, name);
        assert!(tenant.s3.head_bucket().bucket(&bucket).send().await.is_err(), "no bucket {bucket}");
    }
    // Deleting a refused object deletes nothing and releases it.
    api.delete(id, &DeleteParams::default()).await?;
    eventually(60, "the refused AWSConfig to be gone", || async { Ok(api.get_opt(id).await?.is_none().then_some(())) })
        .await?;
    Ok(())
}

/// `config` as Giant Swarm's tooling wrote legacy clusters before Releases: no release label, no
/// version label, the operator version in `spec.versionBundle.version`.
fn unlabelled(mut config: AWSConfig, bundle: &str) -> AWSConfig {
    let labels = config.metadata.labels.get_or_insert_default();
    labels.remove(apis::labels::RELEASE_VERSION);
    labels.remove(apis::labels::AWS_OPERATOR_VERSION);
    config.spec.version_bundle.version = bundle.to_string();
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_awsconfig_without_the_release_label_runs_by_its_version_bundle_and_another_versions_is_left_alone()
-> anyhow::Result<()> {
    let mut f = Fixture::start().await?;
    // Release v20.0.0 gives aws-operator this operator's version.
    f.apply_basics().await?;
    let cp = f.control_plane_clients().await?;
    let tenant = f.tenant_clients().await?;
    installation_zone(&cp).await?;
    let (ours, theirs) = ("vb1ab", "vb2ab");
    f.credential_secret(ours).await?;
    f.credential_secret(theirs).await?;
    apply(&f, &unlabelled(legacy_cluster(&f, ours).await?, VERSION)).await?;
    // The fixture's own bundle version, an operator version this process does not run.
    let other = legacy_cluster(&f, theirs).await?;
    assert_eq!(other.spec.version_bundle.version, "4.7.0");
    apply(&f, &unlabelled(other, "4.7.0")).await?;
    f.start_operator().await?;

    let created = wait_created(&f, ours, 300).await?;
    assert!(!created.labels().contains_key(apis::labels::RELEASE_VERSION), "the operator adds no release label");
    let status = created.status.clone().unwrap_or_default();
    assert_eq!(status.cluster.latest_version(), Some(VERSION));
    let resolved = status.conditions.iter().find(|c| c.type_ == "ReleaseResolved").expect("ReleaseResolved");
    assert_eq!(resolved.status, "True", "{resolved:?}");
    assert!(
        resolved.message.contains("spec.versionBundle.version") && resolved.message.contains("Release v20.0.0"),
        "where the version came from: {}",
        resolved.message
    );
    let name = |id, stack| legacy::stack_name(id, stack);
    assert_eq!(live_stacks(&tenant).await?, [name(ours, LegacyStack::GuestMain)]);
    assert_eq!(live_stacks(&cp).await?, [name(ours, LegacyStack::HostMain), name(ours, LegacyStack::HostSetup)]);

    // The other version's cluster: no finalizer, no status, no event, nothing in AWS (the
    // stacks above are all there are), though its inputs are as valid as the first's.
    let left = Api::<AWSConfig>::namespaced(f.client.clone(), NS).get(theirs).await?;
    assert_eq!(left.metadata.finalizers, None, "no finalizer on another operator version's cluster");
    assert_eq!(left.status, None, "no status");
    assert!(event_notes(&f.client, theirs, "Warning", None).await?.is_empty());
    assert!(event_notes(&f.client, theirs, "Normal", None).await?.is_empty());
    assert_eq!(aws_operator::aws::kms::describe_key(&tenant, &format!("alias/{theirs}")).await?, None);
    let bucket = aws_stacks::names::bucket(&tenant.account_id, theirs);
    assert!(tenant.s3.head_bucket().bucket(&bucket).send().await.is_err(), "no bucket {bucket}");
    Ok(())
}
