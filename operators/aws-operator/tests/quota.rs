//! Quota preflight on moto: a cluster that would not fit in its tenant account's limits (stacks
//! and Auto Scaling groups; VPCs, Elastic IPs and NAT gateways per zone) waits with
//! `Ready=False` `QuotaExceeded` and a Warning event, creates nothing in AWS (checked through
//! CloudFormation, EC2, S3 and KMS, and in moto's request log), is checked again until it fits,
//! is not stopped by a limit reached once it is under way, and when deleted while refused goes
//! without error and leaves nothing.

mod support;

use apis::aws::AWSCluster;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::DeleteParams;
use support::*;

/// The `Ready` condition's reason and message.
fn ready_condition(c: &AWSCluster) -> Option<(String, String, String)> {
    c.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

async fn stacks_of(aws: &aws_operator::aws::AccountClients) -> anyhow::Result<Vec<String>> {
    let out = aws.cfn_client.describe_stacks().send().await?;
    Ok(out.stacks().iter().filter_map(|s| s.stack_name()).map(str::to_string).collect())
}

/// What moto was asked to create: stacks, keys, buckets (S3 `PUT`s).
fn creations(f: &Fixture) -> anyhow::Result<Vec<String>> {
    Ok(f.moto
        .request_log()?
        .into_iter()
        .filter(|r| {
            ["CreateStack", "CreateKey"].contains(&r.action.as_str()) || (r.service == "s3" && r.method == "PUT")
        })
        .map(|r| format!("{} {} {}", r.service, r.action, r.account))
        .collect())
}

/// The Warning events about cluster `id`, other than `QuotaExceeded`, as `reason: note`.
async fn warnings_besides_quota(f: &Fixture, id: &str) -> anyhow::Result<Vec<String>> {
    Ok(events_about(&f.client, id)
        .await?
        .into_iter()
        .filter(|e| e.type_.as_deref() == Some("Warning") && e.reason.as_deref() != Some("QuotaExceeded"))
        .map(|e| format!("{:?}: {:?}", e.reason, e.note))
        .collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_over_its_limits_waits_creates_nothing_deletes_cleanly_and_proceeds_once_raised() -> anyhow::Result<()>
{
    let mut f = Fixture::start().await?;
    // The tenant account allows two more stacks and one more Auto Scaling group; each cluster
    // needs three stacks there (TCCP, TCCPN, TCNP) and two groups (one master, one node pool).
    f.moto.set_account_limits(&f.tenant_account, &[("StackLimit", 2), ("MaxNumberOfAutoScalingGroups", 1)])?;
    f.apply_basics().await?;
    f.start_operator().await?;
    for id in ["quo01", "quo02"] {
        f.credential_secret(id).await?;
        f.control_plane(id, &format!("cp-{id}"), &["eu-central-1a"], 1).await?;
        f.node_pool(id, &format!("np-{id}"), &["eu-central-1a"], 1, 3).await?;
        f.cluster(id).await?;
    }
    let clusters: Api<AWSCluster> = Api::namespaced(f.client.clone(), NS);
    for id in ["quo01", "quo02"] {
        let (_, _, message) = eventually(120, &format!("{id} to wait with QuotaExceeded"), || async {
            let c = clusters.get(id).await?;
            Ok(ready_condition(&c).filter(|(s, r, _)| s == "False" && r == "QuotaExceeded"))
        })
        .await?;
        for part in [
            format!(
                "CloudFormation StackLimit of account {} is 2 with 0 in use: headroom 2, the cluster needs 3",
                f.tenant_account
            ),
            format!(
                "Auto Scaling MaxNumberOfAutoScalingGroups of account {} is 1 with 0 in use: headroom 1, the cluster needs 2",
                f.tenant_account
            ),
            "request an increase in Service Quotas".to_string(),
        ] {
            assert!(message.contains(&*part), "{id}: {message}");
        }
        let note = eventually(30, &format!("a QuotaExceeded Warning on {id}"), || async {
            warnings(&f.client, id, "QuotaExceeded").await.map(|notes| notes.into_iter().next())
        })
        .await?;
        assert!(note.contains("StackLimit"), "{note}");
    }
    // Still refused some reconciles later, and nothing was created in either account.
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let (tenant, cp) = (f.tenant_clients().await?, f.control_plane_clients().await?);
    assert_eq!(stacks_of(&tenant).await?, Vec::<String>::new(), "tenant stacks while refused");
    assert_eq!(stacks_of(&cp).await?, Vec::<String>::new(), "management stacks while refused");
    assert_eq!(creations(&f)?, Vec::<String>::new(), "AWS creations while refused");
    let c = clusters.get("quo02").await?;
    assert_eq!(ready_condition(&c).map(|(_, r, _)| r).as_deref(), Some("QuotaExceeded"));

    // A refused cluster deletes without error and leaves nothing: no stack, bucket or key, and
    // its credential Secret is released.
    clusters.delete("quo01", &DeleteParams::default()).await?;
    eventually(60, "quo01 to be gone", || async { Ok(clusters.get_opt("quo01").await?.is_none().then_some(())) })
        .await?;
    let bucket = aws_stacks::names::bucket(&tenant.account_id, "quo01");
    assert!(tenant.s3.head_bucket().bucket(&bucket).send().await.is_err(), "bucket {bucket} exists");
    assert_eq!(tenant.kms.list_keys().send().await?.keys().len(), 0, "a key was created");
    let secret = Api::<Secret>::namespaced(f.client.clone(), "giantswarm").get("credential-quo01").await?;
    assert_eq!(
        secret.metadata.finalizers.unwrap_or_default(),
        Vec::<String>::new(),
        "the credential Secret is released"
    );
    let deletion_warnings = warnings_besides_quota(&f, "quo01").await?;
    assert_eq!(deletion_warnings, Vec::<String>::new(), "warnings while deleting quo01");

    // Raised (back to AWS's defaults), the waiting cluster goes on without being touched.
    f.moto.set_account_limits(&f.tenant_account, &[])?;
    eventually(120, "quo02's first stacks", || async {
        let (t, m) = (stacks_of(&tenant).await?, stacks_of(&cp).await?);
        Ok((t.iter().any(|s| s.contains("quo02")) || m.iter().any(|s| s.contains("quo02"))).then_some(()))
    })
    .await?;
    // Once under way, a limit reached since does not stop it halfway: lowered to nothing, the
    // tenant account still gets the cluster's network stack.
    f.moto.set_account_limits(&f.tenant_account, &[("StackLimit", 0), ("MaxNumberOfAutoScalingGroups", 0)])?;
    eventually(120, "quo02's TCCP stack", || async {
        Ok(stacks_of(&tenant).await?.iter().any(|s| s == "cluster-quo02-tccp").then_some(()))
    })
    .await?;
    let c = clusters.get("quo02").await?;
    assert_ne!(ready_condition(&c).map(|(_, r, _)| r).as_deref(), Some("QuotaExceeded"));
    assert!(!stacks_of(&cp).await?.iter().any(|s| s.contains("quo01")), "the deleted cluster got a stack");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_over_its_network_quotas_waits_naming_each_creates_nothing_and_deletes_cleanly() -> anyhow::Result<()>
{
    let mut f = Fixture::start().await?;
    f.apply_basics().await?;
    let tenant = f.tenant_clients().await?;
    // What others already run in the tenant account: a VPC with a subnet in eu-central-1b, an
    // Elastic IP and a NAT gateway there.
    let vpc = tenant.ec2.create_vpc().cidr_block("10.200.0.0/16").send().await?;
    let vpc = vpc.vpc().and_then(|v| v.vpc_id()).expect("a VPC").to_string();
    let subnet = tenant
        .ec2
        .create_subnet()
        .vpc_id(&vpc)
        .cidr_block("10.200.1.0/24")
        .availability_zone("eu-central-1b")
        .send()
        .await?;
    let subnet = subnet.subnet().and_then(|s| s.subnet_id()).expect("a subnet").to_string();
    let eip = tenant.ec2.allocate_address().domain(aws_sdk_ec2::types::DomainType::Vpc).send().await?;
    let eip = eip.allocation_id().expect("an allocation").to_string();
    tenant.ec2.create_nat_gateway().subnet_id(&subnet).allocation_id(&eip).send().await?;
    let vpcs = tenant.ec2.describe_vpcs().send().await?.vpcs().len() as u64;
    // Its quotas: no VPC to spare, two Elastic IPs (one in use), one NAT gateway per zone.
    f.moto.set_account_limits(
        &f.tenant_account,
        &[("L-F678F1CE", vpcs), ("vpc-max-elastic-ips", 2), ("L-FE5A380F", 1)],
    )?;
    f.start_operator().await?;
    // A cluster over two zones: one VPC, two NAT gateways with their Elastic IPs.
    let id = "quo03";
    f.credential_secret(id).await?;
    f.control_plane(id, &format!("cp-{id}"), &["eu-central-1a"], 1).await?;
    f.node_pool(id, &format!("np-{id}"), &["eu-central-1b"], 1, 3).await?;
    f.cluster(id).await?;
    let clusters: Api<AWSCluster> = Api::namespaced(f.client.clone(), NS);
    let (_, _, message) = eventually(120, "the cluster to wait with QuotaExceeded", || async {
        let c = clusters.get(id).await?;
        Ok(ready_condition(&c).filter(|(s, r, _)| s == "False" && r == "QuotaExceeded"))
    })
    .await?;
    let account = &f.tenant_account;
    for part in [
        format!(
            "VPCs per Region (vpc L-F678F1CE) of account {account} is {vpcs} with {vpcs} in use: headroom 0, the cluster needs 1"
        ),
        format!("EC2 vpc-max-elastic-ips of account {account} is 2 with 1 in use: headroom 1, the cluster needs 2"),
        format!(
            "NAT gateways per Availability Zone (vpc L-FE5A380F) in eu-central-1b of account {account} is 1 with 1 in use: \
             headroom 0, the cluster needs 1"
        ),
        "quota \"VPCs per Region\") or delete unused VPCs".to_string(),
        "quota \"EC2-VPC Elastic IPs\") or release unused Elastic IP addresses".to_string(),
    ] {
        assert!(message.contains(&*part), "{part} missing: {message}");
    }
    assert!(!message.contains("eu-central-1a"), "eu-central-1a has room: {message}");
    assert!(!message.contains("StackLimit"), "the stacks fit: {message}");
    let note = eventually(30, "a QuotaExceeded Warning", || async {
        warnings(&f.client, id, "QuotaExceeded").await.map(|notes| notes.into_iter().next())
    })
    .await?;
    assert!(note.contains("L-F678F1CE") && note.contains("vpc-max-elastic-ips"), "{note}");

    // The limits came from AWS's answers, in the tenant account: Service Quotas and EC2.
    let asked: std::collections::BTreeSet<String> = f
        .moto
        .request_log()?
        .into_iter()
        .filter(|r| r.account == *account && r.principal == "AKIATESTOPERATOR")
        .map(|r| format!("{} {}", r.service, r.action))
        .collect();
    for call in [
        "servicequotas GetServiceQuota",
        "ec2 DescribeAccountAttributes",
        "ec2 DescribeVpcs",
        "ec2 DescribeAddresses",
        "ec2 DescribeNatGateways",
    ] {
        assert!(asked.contains(call), "{call} not asked: {asked:?}");
    }
    // Nothing was created in either account.
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let cp = f.control_plane_clients().await?;
    assert_eq!(stacks_of(&tenant).await?, Vec::<String>::new(), "tenant stacks while refused");
    assert_eq!(stacks_of(&cp).await?, Vec::<String>::new(), "management stacks while refused");
    assert_eq!(creations(&f)?, Vec::<String>::new(), "AWS creations while refused");
    let nat_gateways = tenant.ec2.describe_nat_gateways().send().await?.nat_gateways().len();
    assert_eq!(nat_gateways, 1, "only the account's own NAT gateway");

    // Deleted while refused, it goes without error and leaves nothing.
    clusters.delete(id, &DeleteParams::default()).await?;
    eventually(60, "the cluster to be gone", || async { Ok(clusters.get_opt(id).await?.is_none().then_some(())) })
        .await?;
    let bucket = aws_stacks::names::bucket(&tenant.account_id, id);
    assert!(tenant.s3.head_bucket().bucket(&bucket).send().await.is_err(), "bucket {bucket} exists");
    assert_eq!(tenant.kms.list_keys().send().await?.keys().len(), 0, "a key was created");
    let deletion_warnings = warnings_besides_quota(&f, id).await?;
    assert_eq!(deletion_warnings, Vec::<String>::new(), "warnings while deleting {id}");
    f.kill_operator().await;
    Ok(())
}
