//! Legacy `AWSConfig` clusters in the fixture: the apis crate's fixture object made a cluster of
//! this test's installation, applied, and waited for.

use apis::aws_config::AWSConfig;
use aws_operator::aws::AccountClients;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};

use super::{Fixture, NS, REGION, VERSION, dump, eventually, ready};

const FIXTURE: &str = include_str!("../../../../crates/apis/tests/fixtures/awsconfig-p3x7d.yaml");
/// The installation's zone, which the legacy clusters' zones are delegated from.
pub const ZONE: &str = "tyrell.eu-central-1.aws.gigantic.io";

/// The fixture's cluster as cluster `id` of this test's installation: in the test region and
/// namespace, on the fixture's Release, peered with the management VPC, its routes from the
/// fixture's route table, with the credential Secret `credential-<id>`.
pub async fn legacy_cluster(f: &Fixture, id: &str) -> anyhow::Result<AWSConfig> {
    let cp = f.control_plane_clients().await?;
    let (cp_vpc, _) =
        aws_operator::aws::ec2::control_plane_vpc(&cp, &f.installation).await?.expect("the management VPC");
    let yaml = FIXTURE
        .replace("p3x7d", id)
        .replace("eu-west-1", REGION)
        .replace("tyrell_private_0", &format!("{}_private_0", f.installation))
        .replace("vpc-04d7e8f9a0b1c2d3e", &cp_vpc)
        .replace("namespace: default", &format!("namespace: {NS}"))
        .replace("giantswarm.io/organization: initech", "giantswarm.io/organization: acme")
        .replace("release.giantswarm.io/version: 6.3.0", "release.giantswarm.io/version: 20.0.0")
        .replace(
            "aws-operator.giantswarm.io/version: 4.7.0",
            &format!("aws-operator.giantswarm.io/version: {VERSION}"),
        );
    let config: AWSConfig = serde_saphyr::from_str(&yaml)?;
    assert_eq!(config.validate(), Ok(()));
    Ok(config)
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

/// Wait until AWSConfig `name`'s lifecycle says `Created` and `Ready` is true.
pub async fn wait_created(f: &Fixture, name: &str, secs: u64) -> anyhow::Result<AWSConfig> {
    let api: Api<AWSConfig> = Api::namespaced(f.client.clone(), NS);
    let result = eventually(secs, &format!("AWSConfig {name} to be Created"), || async {
        let c = api.get(name).await?;
        let created = c.status.as_ref().is_some_and(|s| {
            s.cluster.has_condition(apis::cluster_status::ClusterCondition::Created) && ready(Some(&s.conditions))
        });
        Ok(created.then_some(c))
    })
    .await;
    match result {
        Ok(c) => Ok(c),
        Err(e) => anyhow::bail!("{e}\n{}", dump(&f.client).await),
    }
}
