//! The legacy stacks on moto: a legacy cluster as Giant Swarm's API wrote it (the apis fixture
//! `awsconfig-p3x7d.yaml`, moved to the test region and pointed at the fixture's management VPC,
//! route table and zone) goes through the product's mapping (`aws_stacks::stacks::legacy::inputs`)
//! into `host-setup`, `guest-main` and `host-main`. Each is created through the operator's
//! CloudFormation edge in its account, and the services' own APIs show what the object set: the
//! peering role, the VPC and subnets, the master's one-instance group with its etcd volume and
//! interface in the master's zone, the worker group from a launch template behind the ingress
//! load balancer, the four load balancers, the routes and the delegation.
//!
//! No controller is involved: this proves the templates, not the lifecycle.

mod support;

use std::collections::BTreeMap;

use apis::aws_config::AWSConfig;
use aws_operator::aws::AccountClients;
use aws_operator::aws::cloudformation::StackRequest;
use aws_stacks::cfn::Template;
use aws_stacks::stacks::legacy::{self, LegacyStack, guest_main, host_main, host_setup, inputs};
use aws_stacks::stacks::{Common, CpRouteTable, tccpf};
use aws_stacks::state::StackStatus;
use support::*;

const FIXTURE: &str = include_str!("../../../crates/apis/tests/fixtures/awsconfig-p3x7d.yaml");
const ZONE: &str = "tyrell.eu-central-1.aws.gigantic.io";

/// Create `template` as stack `stack` of the cluster in `account`, the way the operator sends
/// stacks (named IAM, the legacy stack tags), and return its outputs once it is complete.
async fn create(
    account: &AccountClients,
    common: &Common,
    stack: LegacyStack,
    template: &Template,
) -> anyhow::Result<BTreeMap<String, String>> {
    let name = legacy::stack_name(&common.cluster_id, stack);
    let request = StackRequest {
        name: name.clone(),
        template_body: Some(template.to_json()),
        template_url: None,
        tags: legacy::legacy_stack_tags(common, stack).into_iter().collect(),
        named_iam: true,
        termination_protection: true,
    };
    account.cfn.create(&request).await?;
    eventually(120, &format!("{name} created"), || async {
        let view = account.cfn.describe(&name).await?.ok_or_else(|| anyhow::anyhow!("{name} is missing"))?;
        match view.status {
            StackStatus::CreateComplete => Ok(Some(view.outputs)),
            StackStatus::InProgress(_) => Ok(None),
            other => anyhow::bail!("{name}: {other:?} {:?}", view.status_reason),
        }
    })
    .await
}

#[tokio::test]
async fn an_awsconfig_as_its_tooling_wrote_it_becomes_its_three_stacks_on_aws() -> anyhow::Result<()> {
    let f = Fixture::start().await?;
    let cp = f.control_plane_clients().await?;
    let tenant = f.tenant_clients().await?;

    // The management side the platform already has: the fixture's VPC and route table, and
    // the installation's zone.
    let (cp_vpc, cp_cidr) =
        aws_operator::aws::ec2::control_plane_vpc(&cp, &f.installation).await?.expect("the management VPC");
    let parent =
        cp.route53.create_hosted_zone().name(ZONE).caller_reference(format!("{}-zone", f.installation)).send().await?;
    let parent_zone =
        parent.hosted_zone().map(|z| z.id().trim_start_matches("/hostedzone/").to_string()).unwrap_or_default();

    let yaml = FIXTURE
        .replace("eu-west-1", REGION)
        .replace("tyrell_private_0", &format!("{}_private_0", f.installation))
        .replace("vpc-04d7e8f9a0b1c2d3e", &cp_vpc);
    let config: AWSConfig = serde_saphyr::from_str(&yaml)?;
    assert_eq!(config.validate(), Ok(()));
    let mut installation = inputs::Installation {
        installation: f.installation.clone(),
        operator_version: VERSION.into(),
        release_version: "6.3.0".into(),
        kubernetes_version: "1.33.4".into(),
        etcd_version: "3.5.21".into(),
        route53_enabled: true,
        tenant_account_id: tenant.account_id.clone(),
        management_account_id: cp.account_id.clone(),
        management_vpc_cidr: cp_cidr.clone(),
        peer_role_arn: String::new(),
        kms_key_arn: format!("arn:aws:kms:{REGION}:{}:key/0a1b2c3d-legacy", tenant.account_id),
        imds_http_tokens: "required".into(),
        registry: "quay.io".into(),
        extras: Default::default(),
    };
    let common = inputs::common(&config, &installation);

    // host-setup: the peering role in the management account.
    let setup =
        host_setup::render(&inputs::host_setup_params(&config, &installation).map_err(|e| anyhow::anyhow!("{e:?}"))?);
    let outputs = create(&cp, &common, LegacyStack::HostSetup, &setup).await?;
    installation.peer_role_arn = outputs["PeerRoleARN"].clone();
    let role = cp.iam.get_role().role_name("p3x7d-vpc-peer-access").send().await?;
    assert!(
        role.role().is_some_and(|r| r.assume_role_policy_document().unwrap_or_default().contains(&tenant.account_id))
    );

    // guest-main: everything of the cluster in its account.
    let params = inputs::guest_main_params(&config, &installation, None).map_err(|e| anyhow::anyhow!("{e:?}"))?;
    let guest = guest_main::render(&params)?;
    let outputs = create(&tenant, &common, LegacyStack::GuestMain, &guest).await?;
    let vpc_id = outputs["VPCID"].clone();

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

    let groups = tenant.autoscaling.describe_auto_scaling_groups().send().await?;
    let group = |name_tag: &str| {
        groups
            .auto_scaling_groups()
            .iter()
            .find(|g| g.tags().iter().any(|t| t.key() == Some("Name") && t.value() == Some(name_tag)))
            .cloned()
            .unwrap_or_else(|| panic!("a group named {name_tag}"))
    };
    let master = group("p3x7d-master");
    assert_eq!((master.min_size(), master.max_size(), master.desired_capacity()), (Some(1), Some(1), Some(1)));
    assert_eq!(master.availability_zones(), std::slice::from_ref(&zone));
    let workers = group("p3x7d-worker");
    assert_eq!(workers.desired_capacity(), Some(3), "three entries in spec.aws.workers");
    assert_eq!(workers.load_balancer_names(), ["p3x7d-ingress".to_string()]);
    assert!(workers.launch_configuration_name().is_none(), "a launch template, not a launch configuration");
    let templates =
        tenant.ec2.describe_launch_templates().launch_template_names("p3x7d-worker-launch-template").send().await?;
    let template_id = templates.launch_templates()[0].launch_template_id().unwrap_or_default().to_string();
    let version = tenant.ec2.describe_launch_template_versions().launch_template_id(&template_id).send().await?;
    let data = version.launch_template_versions()[0].launch_template_data().cloned().expect("data");
    assert_eq!(data.instance_type().map(|t| t.as_str()), Some("m4.2xlarge"));
    assert_eq!(data.image_id(), Some("ami-0f8ab3c2d1e4f5a6b"));
    let docker =
        data.block_device_mappings().iter().find(|m| m.device_name() == Some("/dev/xvdh")).expect("docker volume");
    assert_eq!(docker.ebs().and_then(|e| e.volume_size()), Some(150), "spec.aws.workers[0].dockerVolumeSizeGB");

    // The master's etcd volume and interface wait in its zone for whichever instance is the
    // master; a replacement finds them there.
    let volumes = tenant
        .ec2
        .describe_volumes()
        .filters(aws_sdk_ec2::types::Filter::builder().name("tag:Name").values("p3x7d-master0-etcd").build())
        .send()
        .await?;
    assert_eq!(volumes.volumes().len(), 1);
    assert_eq!(volumes.volumes()[0].availability_zone(), Some(zone.as_str()));
    assert_eq!(volumes.volumes()[0].encrypted(), Some(true));
    let enis = tenant
        .ec2
        .describe_network_interfaces()
        .filters(
            aws_sdk_ec2::types::Filter::builder()
                .name("tag:Name")
                .values(aws_stacks::names::master_eni("p3x7d", 0))
                .build(),
        )
        .send()
        .await?;
    assert_eq!(enis.network_interfaces().len(), 1, "the etcd interface");
    assert_eq!(enis.network_interfaces()[0].availability_zone(), Some(zone.as_str()));

    let lbs = tenant.elb.describe_load_balancers().send().await?;
    let mut names: Vec<&str> = lbs.load_balancer_descriptions().iter().filter_map(|l| l.load_balancer_name()).collect();
    names.sort();
    assert_eq!(names, ["p3x7d-api", "p3x7d-api-internal", "p3x7d-etcd", "p3x7d-ingress"]);
    // (The idle timeouts are in the template, `guest_main`'s tests; moto's CloudFormation does
    // not apply an ELB's `ConnectionSettings`.)

    // host-main: routes from the named management route table, and the delegation.
    let tables =
        aws_operator::aws::ec2::control_plane_route_tables(&cp, &cp_vpc, &config.spec.aws.vpc.route_table_names)
            .await?;
    assert_eq!(tables.len(), 1);
    let cluster_zone = aws_operator::aws::route53::hosted_zone_by_name(&tenant, &common.tenant_domain())
        .await?
        .expect("the cluster zone");
    let main = host_main::render(&host_main::Params {
        common: common.clone(),
        peering_connection_id: outputs["VPCPeeringConnectionID"].clone(),
        route_tables: tables.iter().map(|(id, name)| CpRouteTable { id: id.clone(), name: name.clone() }).collect(),
        private_subnets: params
            .zones
            .iter()
            .map(|z| tccpf::PrivateSubnet { az: z.name.clone(), cidr: z.private_cidr.clone() })
            .collect(),
        delegation: Some(host_main::Delegation {
            parent_zone_id: parent_zone.clone(),
            name_servers: aws_operator::aws::route53::zone_name_servers(&tenant, &cluster_zone).await?,
        }),
    });
    create(&cp, &common, LegacyStack::HostMain, &main).await?;
    let routes = cp.ec2.describe_route_tables().route_table_ids(&tables[0].0).send().await?;
    let to_cluster: Vec<_> = routes.route_tables()[0]
        .routes()
        .iter()
        .filter(|r| r.destination_cidr_block() == Some("10.11.0.0/19"))
        .map(|r| r.vpc_peering_connection_id().unwrap_or_default().to_string())
        .collect();
    assert_eq!(to_cluster, [outputs["VPCPeeringConnectionID"].clone()], "the private subnet through the peering");
    let delegated = aws_operator::aws::route53::ns_record(&cp, &parent_zone, &common.tenant_domain())
        .await?
        .expect("the NS record");
    assert!(!delegated.is_empty());
    Ok(())
}
