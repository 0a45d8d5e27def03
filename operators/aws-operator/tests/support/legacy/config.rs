//! A legacy cluster (`AWSConfig`) of an installation, from the apis fixture
//! `awsconfig-p3x7d.yaml` (a legacy cluster as Giant Swarm's API wrote it). It depends on nothing
//! but its arguments, so that the benchmarks include this file by path.

use apis::aws_config::AWSConfig;

/// The fixture's legacy cluster.
pub const FIXTURE: &str = include_str!("../../../../../crates/apis/tests/fixtures/awsconfig-p3x7d.yaml");

/// The fixture's cluster as cluster `id` in namespace `namespace` of installation
/// `installation`: in `region`, on Release 20.0.0 run by operator `version`, peered with the
/// management VPC `management_vpc`, its routes from the route table `<installation>_private_0`,
/// with the credential Secret `giantswarm/credential-<id>` and organisation `acme`.
pub fn awsconfig(
    id: &str,
    namespace: &str,
    installation: &str,
    region: &str,
    management_vpc: &str,
    version: &str,
) -> anyhow::Result<AWSConfig> {
    let yaml = FIXTURE
        .replace("p3x7d", id)
        .replace("eu-west-1", region)
        .replace("tyrell_private_0", &format!("{installation}_private_0"))
        .replace("vpc-04d7e8f9a0b1c2d3e", management_vpc)
        .replace("namespace: default", &format!("namespace: {namespace}"))
        .replace("giantswarm.io/organization: initech", "giantswarm.io/organization: acme")
        .replace("release.giantswarm.io/version: 6.3.0", "release.giantswarm.io/version: 20.0.0")
        .replace(
            "aws-operator.giantswarm.io/version: 4.7.0",
            &format!("aws-operator.giantswarm.io/version: {version}"),
        );
    let config: AWSConfig = serde_saphyr::from_str(&yaml)?;
    if let Err(errors) = config.validate() {
        anyhow::bail!("the fixture as cluster {id} is invalid: {errors:?}");
    }
    Ok(config)
}
