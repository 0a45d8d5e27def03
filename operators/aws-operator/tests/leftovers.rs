//! Deleting a cluster that created AWS resources of its own, outside its stacks, the way the
//! Kubernetes cloud provider, external-dns, the AWS CNI and people do: a `LoadBalancer` Service's
//! classic and v2 load balancers with their target group and security group, a
//! `PersistentVolume`'s volume (one of them still attached to an instance that is not the
//! cluster's), a record in the cluster's zone, a network interface left
//! unattached, a peering to another VPC, and a policy someone attached to the masters' and the
//! workers' roles. Each would keep TCCP from being deleted; the teardown
//! deletes them first, waits while one is still in use, and leaves alone what is not the
//! cluster's.

mod support;

use apis::aws::AWSCluster;
use aws_operator::aws::AccountClients;
use aws_sdk_ec2::types::{Filter, IpPermission, ResourceType, Tag, TagSpecification, UserIdGroupPair};
use aws_stacks::stacks::tccp;
use kube::Api;
use kube::api::DeleteParams;
use support::*;

const ID: &str = "lft01";
const AZ: &str = "eu-central-1a";

fn ec2_tags(resource: ResourceType, tags: &[(&str, &str)]) -> TagSpecification {
    TagSpecification::builder()
        .resource_type(resource)
        .set_tags(Some(tags.iter().map(|(k, v)| Tag::builder().key(*k).value(*v).build()).collect()))
        .build()
}

/// The tags the cloud provider puts on what it creates for a Service of cluster `id`.
fn service_tags(id: &str) -> Vec<(String, String)> {
    vec![
        (format!("kubernetes.io/cluster/{id}"), "owned".to_string()),
        ("kubernetes.io/service-name".to_string(), "shop/web".to_string()),
    ]
}

fn as_refs(tags: &[(String, String)]) -> Vec<(&str, &str)> {
    tags.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
}

/// What the test created in the tenant account.
struct Created {
    classic_lb: String,
    v2_lb: String,
    target_group: String,
    elb_group: String,
    user_group: String,
    interface: String,
    volume: String,
    /// A volume of the cluster still attached to `instance`, someone else's instance.
    attached_volume: String,
    instance: String,
    peering: String,
    record: String,
    zone: String,
    /// Another cluster's volume and load balancer, which must stay.
    foreign_volume: String,
    foreign_lb: String,
}

/// A classic load balancer in `subnet`, as the cloud provider creates one for a Service.
async fn create_classic_lb(
    tenant: &AccountClients,
    name: &str,
    subnet: &str,
    group: Option<&str>,
    tags: &[(String, String)],
) -> anyhow::Result<()> {
    let tags: Vec<_> = tags
        .iter()
        .map(|(k, v)| aws_sdk_elasticloadbalancing::types::Tag::builder().key(k).value(v).build())
        .collect::<Result<_, _>>()?;
    let listener = aws_sdk_elasticloadbalancing::types::Listener::builder()
        .protocol("TCP")
        .load_balancer_port(80)
        .instance_port(30080)
        .build()?;
    tenant
        .elb
        .create_load_balancer()
        .load_balancer_name(name)
        .subnets(subnet)
        .set_security_groups(group.map(|g| vec![g.to_string()]))
        .listeners(listener)
        .set_tags(Some(tags))
        .send()
        .await?;
    Ok(())
}

async fn create_leftovers(tenant: &AccountClients, outputs: &tccp::Outputs) -> anyhow::Result<Created> {
    let vpc = outputs.vpc_id.clone();
    let az = outputs.az(AZ).ok_or_else(|| anyhow::anyhow!("TCCP has no outputs for {AZ}"))?;
    let subnet = az.private_subnet_id.clone();
    let owned = service_tags(ID);

    // A Service of type LoadBalancer: its security group, a classic load balancer in it.
    let elb_group = tenant
        .ec2
        .create_security_group()
        .group_name("k8s-elb-a0f1e2d3c4b5")
        .description("Security group for Kubernetes ELB a0f1e2d3c4b5 (shop/web)")
        .vpc_id(&vpc)
        .tag_specifications(ec2_tags(ResourceType::SecurityGroup, &as_refs(&owned)))
        .send()
        .await?
        .group_id()
        .unwrap_or_default()
        .to_string();
    let classic_lb = "a0f1e2d3c4b5".to_string();
    create_classic_lb(tenant, &classic_lb, &subnet, Some(&elb_group), &owned).await?;

    // A Service with the NLB annotation: a network load balancer, its target group and listener.
    let v2_tags: Vec<_> = owned
        .iter()
        .map(|(k, v)| aws_sdk_elasticloadbalancingv2::types::Tag::builder().key(k).value(v).build())
        .collect();
    let v2 = tenant
        .elbv2
        .create_load_balancer()
        .name("k8s-shop-web-9f8e7d")
        .r#type(aws_sdk_elasticloadbalancingv2::types::LoadBalancerTypeEnum::Network)
        .subnets(&subnet)
        .set_tags(Some(v2_tags.clone()))
        .send()
        .await?;
    let v2_lb = v2.load_balancers().first().and_then(|l| l.load_balancer_arn()).unwrap_or_default().to_string();
    let tg = tenant
        .elbv2
        .create_target_group()
        .name("k8s-shop-web-tg")
        .protocol(aws_sdk_elasticloadbalancingv2::types::ProtocolEnum::Tcp)
        .port(30081)
        .vpc_id(&vpc)
        .set_tags(Some(v2_tags))
        .send()
        .await?;
    let target_group = tg.target_groups().first().and_then(|t| t.target_group_arn()).unwrap_or_default().to_string();
    tenant
        .elbv2
        .create_listener()
        .load_balancer_arn(&v2_lb)
        .protocol(aws_sdk_elasticloadbalancingv2::types::ProtocolEnum::Tcp)
        .port(80)
        .default_actions(
            aws_sdk_elasticloadbalancingv2::types::Action::builder()
                .r#type(aws_sdk_elasticloadbalancingv2::types::ActionTypeEnum::Forward)
                .target_group_arn(&target_group)
                .build(),
        )
        .send()
        .await?;

    // Someone's own group in the VPC whose rule names the load balancer's group: the group can
    // not be deleted until that rule is gone.
    let user_group = tenant
        .ec2
        .create_security_group()
        .group_name("bastion")
        .description("a person's bastion")
        .vpc_id(&vpc)
        .send()
        .await?
        .group_id()
        .unwrap_or_default()
        .to_string();
    tenant
        .ec2
        .authorize_security_group_ingress()
        .group_id(&user_group)
        .ip_permissions(
            IpPermission::builder()
                .ip_protocol("tcp")
                .from_port(22)
                .to_port(22)
                .user_id_group_pairs(UserIdGroupPair::builder().group_id(&elb_group).build())
                .build(),
        )
        .send()
        .await?;

    // An interface the AWS CNI left unattached, carrying the load balancer's group.
    let interface = tenant
        .ec2
        .create_network_interface()
        .subnet_id(&subnet)
        .groups(&elb_group)
        .description("aws-K8S-i-0123456789abcdef0")
        .send()
        .await?
        .network_interface()
        .and_then(|n| n.network_interface_id())
        .unwrap_or_default()
        .to_string();

    // A PersistentVolume's volume, and another cluster's.
    let mut pv_tags = owned.clone();
    pv_tags.push(("kubernetes.io/created-for/pv/name".into(), "pvc-5c1a".into()));
    let volume = tenant
        .ec2
        .create_volume()
        .availability_zone(AZ)
        .size(10)
        .tag_specifications(ec2_tags(ResourceType::Volume, &as_refs(&pv_tags)))
        .send()
        .await?
        .volume_id()
        .unwrap_or_default()
        .to_string();
    let foreign_volume = tenant
        .ec2
        .create_volume()
        .availability_zone(AZ)
        .size(10)
        .tag_specifications(ec2_tags(ResourceType::Volume, &as_refs(&service_tags("zz9zz"))))
        .send()
        .await?
        .volume_id()
        .unwrap_or_default()
        .to_string();

    // Another VPC, peered with the cluster's by a person, with another cluster's load balancer.
    let other_vpc = tenant
        .ec2
        .create_vpc()
        .cidr_block("10.200.0.0/16")
        .send()
        .await?
        .vpc()
        .and_then(|v| v.vpc_id())
        .unwrap_or_default()
        .to_string();
    let other_subnet = tenant
        .ec2
        .create_subnet()
        .vpc_id(&other_vpc)
        .cidr_block("10.200.0.0/24")
        .availability_zone(AZ)
        .send()
        .await?
        .subnet()
        .and_then(|s| s.subnet_id())
        .unwrap_or_default()
        .to_string();
    // A PersistentVolume's volume still attached to an instance someone runs in that VPC.
    let instance = tenant
        .ec2
        .run_instances()
        .image_id("ami-0a1b2c3d4e5f60001")
        .instance_type(aws_sdk_ec2::types::InstanceType::T3Small)
        .subnet_id(&other_subnet)
        .min_count(1)
        .max_count(1)
        .send()
        .await?
        .instances()
        .first()
        .and_then(|i| i.instance_id())
        .unwrap_or_default()
        .to_string();
    let attached_volume = tenant
        .ec2
        .create_volume()
        .availability_zone(AZ)
        .size(10)
        .tag_specifications(ec2_tags(ResourceType::Volume, &as_refs(&pv_tags)))
        .send()
        .await?
        .volume_id()
        .unwrap_or_default()
        .to_string();
    tenant.ec2.attach_volume().volume_id(&attached_volume).instance_id(&instance).device("/dev/xvdba").send().await?;
    let peering = tenant
        .ec2
        .create_vpc_peering_connection()
        .vpc_id(&vpc)
        .peer_vpc_id(&other_vpc)
        .send()
        .await?
        .vpc_peering_connection()
        .and_then(|p| p.vpc_peering_connection_id())
        .unwrap_or_default()
        .to_string();
    let foreign_lb = "b9a8c7d6e5f4".to_string();
    create_classic_lb(tenant, &foreign_lb, &other_subnet, None, &service_tags("zz9zz")).await?;

    // external-dns: a record in the cluster's public zone.
    let zone = outputs.hosted_zone_id.clone().ok_or_else(|| anyhow::anyhow!("TCCP has no hosted zone"))?;
    let record = format!("shop.{ID}.k8s.gauss.eu-central-1.aws.gigantic.io.");
    use aws_sdk_route53::types::{Change, ChangeAction, ChangeBatch, ResourceRecord, ResourceRecordSet, RrType};
    let set = ResourceRecordSet::builder()
        .name(&record)
        .r#type(RrType::A)
        .ttl(300)
        .resource_records(ResourceRecord::builder().value("10.1.2.3").build()?)
        .build()?;
    tenant
        .route53
        .change_resource_record_sets()
        .hosted_zone_id(&zone)
        .change_batch(
            ChangeBatch::builder()
                .changes(Change::builder().action(ChangeAction::Create).resource_record_set(set).build()?)
                .build()?,
        )
        .send()
        .await?;

    Ok(Created {
        classic_lb,
        v2_lb,
        target_group,
        elb_group,
        user_group,
        interface,
        volume,
        attached_volume,
        instance,
        peering,
        record,
        zone,
        foreign_volume,
        foreign_lb,
    })
}

async fn classic_lbs(tenant: &AccountClients) -> anyhow::Result<Vec<String>> {
    let out = tenant.elb.describe_load_balancers().send().await?;
    Ok(out.load_balancer_descriptions().iter().filter_map(|l| l.load_balancer_name()).map(str::to_string).collect())
}

async fn volumes(tenant: &AccountClients) -> anyhow::Result<Vec<String>> {
    let out = tenant.ec2.describe_volumes().send().await?;
    Ok(out.volumes().iter().filter_map(|v| v.volume_id()).map(str::to_string).collect())
}

async fn stacks(aws: &AccountClients) -> anyhow::Result<Vec<(String, String)>> {
    let mut out: Vec<(String, String)> =
        aws.cfn.describe_all().await?.into_iter().map(|s| (s.name, s.status.to_string())).collect();
    out.sort();
    Ok(out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_cluster_deletes_what_it_left_outside_its_stacks_before_its_network() -> anyhow::Result<()> {
    let mut f = Fixture::start().await?;
    f.apply_basics().await?;
    f.credential_secret(ID).await?;
    f.cluster(ID).await?;
    f.control_plane(ID, "cp001", &[AZ], 1).await?;
    f.node_pool(ID, "np001", &[AZ], 1, 3).await?;
    f.start_operator().await?;
    let clusters: Api<AWSCluster> = Api::namespaced(f.client.clone(), NS);
    let result = eventually(300, "the cluster to be Ready", || async {
        Ok(ready(clusters.get(ID).await?.status.as_ref().map(|s| &s.conditions)).then_some(()))
    })
    .await;
    if let Err(e) = result {
        anyhow::bail!("{e}\n{}", dump(&f.client).await);
    }
    let tenant = f.tenant_clients().await?;
    let cp = f.control_plane_clients().await?;
    let tccp_name = format!("cluster-{ID}-tccp");
    let tccp_view = tenant
        .cfn
        .describe_all()
        .await?
        .into_iter()
        .find(|s| s.name == tccp_name)
        .ok_or_else(|| anyhow::anyhow!("no {tccp_name}"))?;
    let outputs = tccp::Outputs::from_outputs(&tccp_view.outputs, &[AZ])?;
    let created = create_leftovers(&tenant, &outputs).await?;
    // Someone attached a policy of their own to the stacks' roles: IAM refuses to delete a role
    // with a policy attached, so the stacks' deletions would fail on them.
    let policy = tenant
        .iam
        .create_policy()
        .policy_name("team-blue-s3-read")
        .policy_document(
            r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:GetObject","Resource":"*"}]}"#,
        )
        .send()
        .await?
        .policy()
        .and_then(|p| p.arn())
        .unwrap_or_default()
        .to_string();
    let roles = [format!("gs-cluster-{ID}-role-tccpn"), format!("gs-cluster-{ID}-role-np001")];
    for role in &roles {
        tenant.iam.attach_role_policy().role_name(role).policy_arn(&policy).send().await?;
    }

    clusters.delete(ID, &DeleteParams::default()).await?;

    // The load balancer's group is still referenced by the bastion's rule: the teardown says so
    // and waits, with TCCP untouched, while everything else is gone already.
    let waiting = eventually(300, "the teardown to wait for the security group in use", || async {
        let c = clusters.get(ID).await?;
        let conds = c.status.as_ref().map(|s| s.conditions.clone()).unwrap_or_default();
        Ok(conds
            .iter()
            .find(|c| c.type_ == "Ready" && c.reason == "LeftoversInUse" && c.message.contains(&created.elb_group))
            .map(|c| c.message.clone()))
    })
    .await;
    let message = match waiting {
        Ok(m) => m,
        Err(e) => anyhow::bail!("{e}\n{}", dump(&f.client).await),
    };
    assert!(message.contains("DependencyViolation"), "{message}");
    let tenant_stacks = stacks(&tenant).await?;
    assert!(
        tenant_stacks.iter().any(|(name, status)| *name == tccp_name && !status.starts_with("DELETE")),
        "TCCP is not deleted while a leftover is in use: {tenant_stacks:?}"
    );
    let lbs = classic_lbs(&tenant).await?;
    assert!(!lbs.contains(&created.classic_lb), "the classic load balancer went first: {lbs:?}");
    // TCCP's own load balancer carries the same ownership tag (stack tags are copied onto it) and
    // stays for its stack to delete.
    let api = format!("{ID}-api");
    assert!(lbs.contains(&api), "TCCP's load balancer is the stack's to delete: {lbs:?}");
    let api_tags = tenant.elb.describe_tags().load_balancer_names(&api).send().await?;
    let owned = api_tags
        .tag_descriptions()
        .iter()
        .flat_map(|d| d.tags())
        .any(|t| t.key() == format!("kubernetes.io/cluster/{ID}") && t.value() == Some("owned"));
    assert!(owned, "TCCP's load balancer is tagged as the cluster's: {api_tags:?}");
    // The group waits several reconciles, not one: the refusal is not fatal.
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    assert!(clusters.get_opt(ID).await?.is_some(), "the cluster waits for its leftovers");

    // The person removes the bastion; the group is free, and the teardown goes on.
    tenant.ec2.delete_security_group().group_id(&created.user_group).send().await?;
    let gone =
        eventually(300, "the cluster to be gone", || async { Ok(clusters.get_opt(ID).await?.is_none().then_some(())) })
            .await;
    if let Err(e) = gone {
        anyhow::bail!("{e}\n{}", dump(&f.client).await);
    }

    // The roles went with their stacks; the policy is someone else's and stays, attached to
    // nothing.
    for role in &roles {
        assert!(tenant.iam.get_role().role_name(role).send().await.is_err(), "role {role} is deleted with its stack");
    }
    let kept = tenant.iam.get_policy().policy_arn(&policy).send().await?;
    assert_eq!(kept.policy().and_then(|p| p.attachment_count()), Some(0), "the policy stays, detached");

    // Every stack is gone; the hosted zone too, which Route53 refuses while a record is in it.
    assert_eq!(stacks(&tenant).await?, Vec::<(String, String)>::new(), "no tenant stack left");
    assert_eq!(stacks(&cp).await?, Vec::<(String, String)>::new(), "no management stack left");
    let zone = tenant.route53.get_hosted_zone().id(&created.zone).send().await;
    assert!(zone.is_err(), "the cluster's zone is deleted with TCCP");

    // Each leftover is gone, asked of its own service.
    let lbs = classic_lbs(&tenant).await?;
    assert!(!lbs.contains(&created.classic_lb), "{lbs:?}");
    let v2 = tenant.elbv2.describe_load_balancers().send().await?;
    assert!(v2.load_balancers().iter().all(|l| l.load_balancer_arn() != Some(created.v2_lb.as_str())));
    let tgs = tenant.elbv2.describe_target_groups().send().await?;
    assert!(tgs.target_groups().iter().all(|t| t.target_group_arn() != Some(created.target_group.as_str())));
    let groups = tenant
        .ec2
        .describe_security_groups()
        .filters(Filter::builder().name("group-id").values(&created.elb_group).build())
        .send()
        .await?;
    assert!(groups.security_groups().is_empty(), "the load balancer's group is deleted");
    let interfaces = tenant
        .ec2
        .describe_network_interfaces()
        .filters(Filter::builder().name("network-interface-id").values(&created.interface).build())
        .send()
        .await?;
    assert!(interfaces.network_interfaces().is_empty(), "the unattached interface is deleted");
    let vols = volumes(&tenant).await?;
    assert!(!vols.contains(&created.volume), "the cluster's volume is deleted: {vols:?}");
    assert!(
        !vols.contains(&created.attached_volume),
        "the cluster's attached volume is detached and deleted: {vols:?}"
    );
    let instance = tenant.ec2.describe_instances().instance_ids(&created.instance).send().await?;
    let state = instance
        .reservations()
        .iter()
        .flat_map(|r| r.instances())
        .filter_map(|i| i.state().and_then(|s| s.name()).map(|n| n.as_str().to_string()))
        .collect::<Vec<_>>();
    assert_eq!(state, ["running"], "the instance the volume was attached to is not the cluster's: it keeps running");
    let peering =
        tenant.ec2.describe_vpc_peering_connections().vpc_peering_connection_ids(&created.peering).send().await?;
    let status = peering.vpc_peering_connections().first().and_then(|p| p.status()).and_then(|s| s.code()).cloned();
    assert_eq!(status.as_ref().map(|s| s.as_str()), Some("deleted"), "the extra peering is deleted");

    // What is not the cluster's stays.
    assert!(vols.contains(&created.foreign_volume), "another cluster's volume stays: {vols:?}");
    assert!(lbs.contains(&created.foreign_lb), "another cluster's load balancer stays: {lbs:?}");

    // One Normal event per deletion, naming the resource.
    let events =
        Api::<k8s_openapi::api::events::v1::Event>::namespaced(f.client.clone(), NS).list(&Default::default()).await?;
    let notes: Vec<String> = events
        .items
        .iter()
        .filter(|e| e.reason.as_deref() == Some("LeftoverDeleted") && e.type_.as_deref() == Some("Normal"))
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(ID))
        .filter_map(|e| e.note.clone())
        .collect();
    for role in &roles {
        let detached = events.items.iter().any(|e| {
            e.reason.as_deref() == Some("PolicyDetached")
                && e.note.as_deref().is_some_and(|n| n.contains(&policy) && n.contains(role.as_str()))
        });
        assert!(detached, "a PolicyDetached event names the policy and role {role}");
    }
    let detached: Vec<String> = events
        .items
        .iter()
        .filter(|e| e.reason.as_deref() == Some("LeftoverDetached") && e.type_.as_deref() == Some("Normal"))
        .filter_map(|e| e.note.clone())
        .collect();
    assert!(
        detached.iter().any(|n| n.contains(&created.attached_volume) && n.contains(&created.instance)),
        "a LeftoverDetached event names the volume and its instance: {detached:#?}"
    );
    let record = created.record.clone();
    for name in [
        &created.classic_lb,
        &"k8s-shop-web-9f8e7d".to_string(),
        &"k8s-shop-web-tg".to_string(),
        &created.elb_group,
        &created.interface,
        &created.volume,
        &created.attached_volume,
        &record,
        &created.peering,
    ] {
        assert!(notes.iter().any(|n| n.contains(name.as_str())), "no LeftoverDeleted event names {name}: {notes:#?}");
    }
    f.kill_operator().await;
    Ok(())
}
