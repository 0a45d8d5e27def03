//! Legacy `AWSConfig` clusters in the fixture: the apis crate's fixture object made a cluster of
//! this test's installation, applied, and waited for.

use apis::aws_config::AWSConfig;
use aws_operator::aws::AccountClients;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};

use super::{Fixture, NS, REGION, VERSION, dump, eventually, ready};

mod config;

pub use config::awsconfig;

/// The installation's zone, which the legacy clusters' zones are delegated from.
pub const ZONE: &str = "tyrell.eu-central-1.aws.gigantic.io";

/// The fixture's cluster as cluster `id` of this test's installation: in the test region and
/// namespace, on the fixture's Release, peered with the management VPC, its routes from the
/// fixture's route table, with the credential Secret `credential-<id>`.
pub async fn legacy_cluster(f: &Fixture, id: &str) -> anyhow::Result<AWSConfig> {
    let cp = f.control_plane_clients().await?;
    let (cp_vpc, _) =
        aws_operator::aws::ec2::control_plane_vpc(&cp, &f.installation).await?.expect("the management VPC");
    awsconfig(id, NS, &f.installation, REGION, &cp_vpc, VERSION)
}

/// The installation's zone, which the clusters' zones are delegated from (the platform's, not
/// the operator's); its id.
pub async fn installation_zone(cp: &AccountClients) -> anyhow::Result<String> {
    let zone = cp.route53.create_hosted_zone().name(ZONE).caller_reference(format!("{ZONE}-zone")).send().await?;
    Ok(zone.hosted_zone().map(|z| z.id().trim_start_matches("/hostedzone/").to_string()).unwrap_or_default())
}

/// Create `config` in the fixture's namespace.
pub async fn apply(f: &Fixture, config: &AWSConfig) -> anyhow::Result<()> {
    Api::<AWSConfig>::namespaced(f.client.clone(), NS).create(&PostParams::default(), config).await?;
    Ok(())
}

/// Relabel AWSConfig `id` to Release `release`, run by operator `version`: how a legacy
/// cluster is upgraded (and handed to another operator version).
pub async fn relabel(f: &Fixture, id: &str, release: &str, version: &str) -> anyhow::Result<()> {
    let patch = Patch::Merge(serde_json::json!({"metadata": {"labels": {
        "release.giantswarm.io/version": release,
        "aws-operator.giantswarm.io/version": version,
    }}}));
    Api::<AWSConfig>::namespaced(f.client.clone(), NS).patch(id, &PatchParams::default(), &patch).await?;
    Ok(())
}

/// Whether `config`'s lifecycle says `Created` and `Ready` is true.
pub fn is_created(config: &AWSConfig) -> bool {
    config.status.as_ref().is_some_and(|s| {
        s.cluster.has_condition(apis::cluster_status::ClusterCondition::Created) && ready(Some(&s.conditions))
    })
}

/// Wait until AWSConfig `name`'s lifecycle says `Created` and `Ready` is true.
pub async fn wait_created(f: &Fixture, name: &str, secs: u64) -> anyhow::Result<AWSConfig> {
    let api: Api<AWSConfig> = Api::namespaced(f.client.clone(), NS);
    let result = eventually(secs, &format!("AWSConfig {name} to be Created"), || async {
        let c = api.get(name).await?;
        Ok(is_created(&c).then_some(c))
    })
    .await;
    match result {
        Ok(c) => Ok(c),
        Err(e) => anyhow::bail!("{e}\n{}", dump(&f.client).await),
    }
}

/// The names of the live stacks of `aws`, sorted.
pub async fn live_stacks(aws: &AccountClients) -> anyhow::Result<Vec<String>> {
    let mut names: Vec<String> = aws.cfn.describe_all().await?.into_iter().map(|s| s.name).collect();
    names.sort();
    Ok(names)
}

/// The routes of management route table `table` to `cidr`, by peering.
pub async fn routes_to(cp: &AccountClients, table: &str, cidr: &str) -> anyhow::Result<Vec<String>> {
    let routes = cp.ec2.describe_route_tables().route_table_ids(table).send().await?;
    Ok(routes.route_tables()[0]
        .routes()
        .iter()
        .filter(|r| r.destination_cidr_block() == Some(cidr))
        .map(|r| r.vpc_peering_connection_id().unwrap_or_default().to_string())
        .collect())
}

/// The state of peering `id` as the management account sees it.
pub async fn peering_state(cp: &AccountClients, id: &str) -> anyhow::Result<Option<String>> {
    let out = cp.ec2.describe_vpc_peering_connections().vpc_peering_connection_ids(id).send().await?;
    Ok(out
        .vpc_peering_connections()
        .first()
        .and_then(|p| p.status())
        .and_then(|s| s.code())
        .map(|c| c.as_str().to_string()))
}
