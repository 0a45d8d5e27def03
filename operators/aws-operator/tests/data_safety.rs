//! Data and network safety against testenv and moto: a replaced master keeps its etcd interface
//! and volume, adding a zone moves no existing subnet, and node pools admit each other. Every check goes through EC2's own API.

mod support;

use std::collections::BTreeSet;

use apis::aws::AWSMachineDeployment;
use aws_sdk_ec2::types::Filter;
use kube::Api;
use support::*;

/// (ID, CIDR) of every subnet in the VPC.
async fn subnets(f: &Fixture, vpc_id: &str) -> anyhow::Result<BTreeSet<(String, String)>> {
    let tenant = f.tenant_clients().await?;
    let out =
        tenant.ec2.describe_subnets().filters(Filter::builder().name("vpc-id").values(vpc_id).build()).send().await?;
    Ok(out
        .subnets()
        .iter()
        .map(|s| (s.subnet_id().unwrap_or_default().to_owned(), s.cidr_block().unwrap_or_default().to_owned()))
        .collect())
}

/// (ENI ID, volume ID) of master 0's etcd interface and volume, found by their Name tags.
async fn etcd_resources(f: &Fixture, id: &str) -> anyhow::Result<(String, String)> {
    let tenant = f.tenant_clients().await?;
    let name = |value: String| Filter::builder().name("tag:Name").values(value).build();
    let enis =
        tenant.ec2.describe_network_interfaces().filters(name(aws_stacks::names::master_eni(id, 0))).send().await?;
    let volumes =
        tenant.ec2.describe_volumes().filters(name(aws_stacks::names::master_etcd_volume(id, 0))).send().await?;
    let eni: Vec<_> = enis.network_interfaces().iter().filter_map(|e| e.network_interface_id()).collect();
    let vol: Vec<_> = volumes.volumes().iter().filter_map(|v| v.volume_id()).collect();
    anyhow::ensure!(eni.len() == 1 && vol.len() == 1, "one etcd interface and volume: {eni:?} {vol:?}");
    Ok((eni[0].to_owned(), vol[0].to_owned()))
}

/// The instance IDs of the cluster's master groups.
async fn masters(f: &Fixture, id: &str) -> anyhow::Result<Vec<String>> {
    let tenant = f.tenant_clients().await?;
    let groups = tenant.autoscaling.describe_auto_scaling_groups().send().await?;
    Ok(groups
        .auto_scaling_groups()
        .iter()
        .filter(|g| g.tags().iter().any(|t| t.key() == Some("Name") && t.value() == Some(&format!("{id}-master"))))
        .flat_map(|g| g.instances().iter().filter_map(|i| i.instance_id().map(str::to_owned)))
        .collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replaced_master_keeps_its_etcd_and_a_new_zone_moves_no_subnet() -> anyhow::Result<()> {
    let mut f = Fixture::start().await?;
    f.apply_basics().await?;
    let id = "ds0b2";
    f.credential_secret(id).await?;
    f.cluster(id).await?;
    f.control_plane(id, "cpds2", &["eu-central-1b"], 1).await?;
    f.node_pool(id, "npds1", &["eu-central-1c"], 1, 2).await?;
    f.start_operator().await?;

    let clusters: Api<apis::aws::AWSCluster> = Api::namespaced(f.client.clone(), NS);
    let mds: Api<AWSMachineDeployment> = Api::namespaced(f.client.clone(), NS);
    let vpc_id = match eventually(180, "the cluster to be Ready", || async {
        let c = clusters.get(id).await?;
        let vpc = c.status.as_ref().and_then(|s| s.provider.network.vpc_id.clone());
        Ok(ready(c.status.as_ref().map(|s| &s.conditions)).then_some(vpc).flatten())
    })
    .await
    {
        Ok(v) => v,
        Err(e) => anyhow::bail!("{e}\n{}", dump(&f.client).await),
    };
    // The master is replaced by its group: its etcd interface and volume, found by the Name tags
    // the node config looks them up by, are the same ones afterwards.
    let etcd_before = etcd_resources(&f, id).await?;
    let tenant = f.tenant_clients().await?;
    let master = masters(&f, id).await?;
    assert_eq!(master.len(), 1, "one master instance: {master:?}");
    tenant
        .autoscaling
        .terminate_instance_in_auto_scaling_group()
        .instance_id(&master[0])
        .should_decrement_desired_capacity(false)
        .send()
        .await?;
    let replaced = eventually(60, "a replacement master", || async {
        let now = masters(&f, id).await?;
        Ok((now.len() == 1 && now != master).then_some(now))
    })
    .await?;
    assert_ne!(replaced, master);
    assert_eq!(etcd_resources(&f, id).await?, etcd_before, "the etcd interface or volume changed with the instance");

    let before = subnets(&f, &vpc_id).await?;
    assert_eq!(before.len(), 5, "public and private in b and c, one pool subnet in c: {before:?}");

    // A pool in a zone that sorts before every existing one.
    f.node_pool(id, "npds2", &["eu-central-1a"], 1, 2).await?;
    if let Err(e) = eventually(240, "the new pool to be Ready", || async {
        Ok(ready(mds.get("npds2").await?.status.as_ref().map(|s| &s.conditions)).then_some(()))
    })
    .await
    {
        anyhow::bail!("{e}\n{}", dump(&f.client).await);
    }
    let after = subnets(&f, &vpc_id).await?;
    let moved: Vec<_> = before.difference(&after).collect();
    assert!(moved.is_empty(), "subnets replaced or moved: {moved:?}\nbefore {before:?}\nafter {after:?}");
    assert_eq!(after.len(), 8, "zone a adds public, private and the pool's subnet: {after:?}");
    f.kill_operator().await;
    Ok(())
}

/// The security groups `group` admits traffic from.
async fn admitted(f: &Fixture, group: &str) -> anyhow::Result<BTreeSet<String>> {
    let tenant = f.tenant_clients().await?;
    let out = tenant.ec2.describe_security_groups().group_ids(group).send().await?;
    Ok(out
        .security_groups()
        .iter()
        .flat_map(|g| g.ip_permissions())
        .flat_map(|p| p.user_id_group_pairs())
        .filter_map(|pair| pair.group_id().map(str::to_owned))
        .collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_pools_admit_each_other_and_forget_a_removed_pool() -> anyhow::Result<()> {
    let mut f = Fixture::start().await?;
    f.apply_basics().await?;
    let id = "ds0d4";
    f.credential_secret(id).await?;
    f.cluster(id).await?;
    f.control_plane(id, "cpds4", &["eu-central-1a"], 1).await?;
    f.node_pool(id, "npds6", &["eu-central-1a"], 1, 2).await?;
    f.start_operator().await?;

    let mds: Api<AWSMachineDeployment> = Api::namespaced(f.client.clone(), NS);
    let pool_ready = |name: &'static str| {
        let mds = mds.clone();
        async move {
            eventually(240, &format!("{name} to be Ready"), || async {
                Ok(ready(mds.get(name).await?.status.as_ref().map(|s| &s.conditions)).then_some(()))
            })
            .await
        }
    };
    if let Err(e) = pool_ready("npds6").await {
        anyhow::bail!("{e}\n{}", dump(&f.client).await);
    }
    let tenant = f.tenant_clients().await?;
    let group_of = |pool: &str| {
        let (tenant, stack) = (tenant.clone(), format!("cluster-{id}-tcnp-{pool}"));
        async move {
            let stacks = tenant.cfn.describe_all().await?;
            anyhow::Ok(
                stacks.into_iter().find(|s| s.name == stack).and_then(|s| s.outputs.get("SecurityGroupID").cloned()),
            )
        }
    };
    let first = group_of("npds6").await?.expect("the first pool's group");
    let masters = {
        let stacks = tenant.cfn.describe_all().await?;
        let tccp = stacks.into_iter().find(|s| s.name == format!("cluster-{id}-tccp")).expect("TCCP");
        tccp.outputs.get("MasterSecurityGroupID").cloned().expect("the masters' group")
    };
    assert!(admitted(&f, &first).await?.contains(&masters), "the pool admits the masters");

    // A second pool: both groups admit each other.
    f.node_pool(id, "npds7", &["eu-central-1a"], 1, 2).await?;
    if let Err(e) = pool_ready("npds7").await {
        anyhow::bail!("{e}\n{}", dump(&f.client).await);
    }
    let second = group_of("npds7").await?.expect("the second pool's group");
    assert!(admitted(&f, &second).await?.contains(&first), "the new pool admits the first");
    if let Err(e) = eventually(120, "the first pool to admit the second", || async {
        Ok(admitted(&f, &first).await?.contains(&second).then_some(()))
    })
    .await
    {
        anyhow::bail!("{e}\n{}", dump(&f.client).await);
    }

    // Removing the second pool removes the first pool's rule for it.
    mds.delete("npds7", &Default::default()).await?;
    if let Err(e) = eventually(180, "the second pool to be gone", || async {
        Ok(mds.get_opt("npds7").await?.is_none().then_some(()))
    })
    .await
    {
        anyhow::bail!("{e}\n{}", dump(&f.client).await);
    }
    let left = admitted(&f, &first).await?;
    assert!(!left.contains(&second), "the first pool still admits the removed one: {left:?}");
    assert!(left.contains(&masters), "{left:?}");
    f.kill_operator().await;
    Ok(())
}
