//! The API allowlists of an installation (`--public-api-allowlist-*`,
//! `--private-api-allowlist-*`), read back through EC2's own API: the master security group lets
//! exactly the allowed ranges and the management cluster's NAT addresses reach the public API,
//! the internal load balancer's group exactly the allowed private ranges; and an installation
//! whose NAT addresses cannot be found keeps its public API open rather than lock the
//! management cluster out.

mod support;

use std::collections::BTreeSet;
use std::sync::Arc;

use aws_operator::aws::AccountClients;
use aws_sdk_ec2::types::{DomainType, Filter, Tag};
use aws_stacks::stacks::tccp::ApiWhitelist;
use support::*;

const PUBLIC: &str = "203.0.113.0/24";
const PRIVATE: &str = "192.0.2.0/24";

/// An Elastic IP in `aws`, tagged with `tags`; its public address.
async fn elastic_ip(aws: &AccountClients, tags: &[(&str, &str)]) -> anyhow::Result<String> {
    let eip = aws.ec2.allocate_address().domain(DomainType::Vpc).send().await?;
    let id = eip.allocation_id().expect("an allocation id");
    for (k, v) in tags {
        aws.ec2.create_tags().resources(id).tags(Tag::builder().key(*k).value(*v).build()).send().await?;
    }
    Ok(eip.public_ip().expect("a public address").to_string())
}

/// The CIDRs a security group named `name` admits on 443, read through DescribeSecurityGroups.
async fn https_sources(aws: &AccountClients, name: &str) -> anyhow::Result<BTreeSet<String>> {
    let groups = aws
        .ec2
        .describe_security_groups()
        .filters(Filter::builder().name("tag:Name").values(name).build())
        .send()
        .await?;
    let [group] = groups.security_groups() else { anyhow::bail!("one group named {name}: {groups:?}") };
    Ok(group
        .ip_permissions()
        .iter()
        .filter(|p| p.from_port() == Some(443) && p.to_port() == Some(443))
        .flat_map(|p| p.ip_ranges().iter().filter_map(|r| r.cidr_ip().map(str::to_string)))
        .collect())
}

async fn create_cluster(f: &Fixture, id: &str) -> anyhow::Result<()> {
    f.credential_secret(id).await?;
    f.cluster(id).await?;
    f.control_plane(id, &format!("{id}cp"), &["eu-central-1a", "eu-central-1b"], 1).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_admits_exactly_the_allowed_ranges_and_the_management_nat_addresses() -> anyhow::Result<()> {
    let mut f = Fixture::start().await?;
    f.apply_basics().await?;
    f.configure = Some(Arc::new(|config| {
        config.api_allowlist = ApiWhitelist { public: Some(vec![PUBLIC.into()]), private: Some(vec![PRIVATE.into()]) };
    }));
    let (cp, tenant) = (f.control_plane_clients().await?, f.tenant_clients().await?);

    // No Elastic IP of the management account carries the installation tag yet: the first
    // cluster's public API stays open, and a Warning says why and what to tag.
    let open = "allow1";
    create_cluster(&f, open).await?;
    f.start_operator().await?;
    wait_ready(&f, open).await?;
    let sources = https_sources(&tenant, &format!("{open}-master")).await?;
    assert!(sources.contains("0.0.0.0/0"), "{sources:?}");
    let said = warnings(&f.client, open, "ManagementNATNotFound").await?;
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(said[0].contains(&format!("giantswarm.io/installation={}", f.installation)), "{said:?}");
    // The internal API does not depend on them.
    let internal = https_sources(&tenant, &format!("{open}-internal-api")).await?;
    assert!(internal.contains(PRIVATE) && !internal.contains("10.0.0.0/8"), "{internal:?}");

    // The management cluster's NAT gateways' addresses, tagged as the original's installations
    // tag them, and one address of another installation.
    let mut management = BTreeSet::new();
    for _ in 0..2 {
        let ip = elastic_ip(&cp, &[("giantswarm.io/installation", &f.installation), ("Name", "nat")]).await?;
        management.insert(format!("{ip}/32"));
    }
    let other = elastic_ip(&cp, &[("giantswarm.io/installation", "another")]).await?;

    let id = "allow2";
    create_cluster(&f, id).await?;
    let cluster = wait_ready(&f, id).await?;
    let cluster_cidr = cluster.status.and_then(|s| s.provider.network.cidr).expect("the cluster CIDR");
    // The cluster's own NAT gateways' addresses: TCCP's Elastic IPs, one per zone (an EIP's
    // physical id is its address).
    let resources =
        tenant.cfn_client.describe_stack_resources().stack_name(format!("cluster-{id}-tccp")).send().await?;
    let own: BTreeSet<String> = resources
        .stack_resources()
        .iter()
        .filter(|r| r.resource_type() == Some("AWS::EC2::EIP"))
        .filter_map(|r| r.physical_resource_id().map(|ip| format!("{ip}/32")))
        .collect();
    assert_eq!(own.len(), 2, "one NAT address per zone");
    let management_vpc = "10.0.0.0/16".to_string();

    let mut expected: BTreeSet<String> = [PUBLIC.to_string(), management_vpc.clone(), cluster_cidr.clone()].into();
    expected.extend(management.iter().cloned());
    expected.extend(own.iter().cloned());
    assert_eq!(https_sources(&tenant, &format!("{id}-master")).await?, expected);
    assert!(!expected.contains(&format!("{other}/32")));
    assert_eq!(
        https_sources(&tenant, &format!("{id}-internal-api")).await?,
        [PRIVATE.to_string(), management_vpc, cluster_cidr].into()
    );
    assert!(warnings(&f.client, id, "ManagementNATNotFound").await?.is_empty());
    f.kill_operator().await;
    Ok(())
}
