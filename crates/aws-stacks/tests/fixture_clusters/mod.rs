//! The fixture clusters every scanner test renders: each cluster shape with every stack of it
//! (TCCPI, TCCP, TCCPF, TCCPN, and two node pools with their TCNP and TCNPF, one of them mixing
//! on-demand and spot instances over several instance types), and the three stacks of a legacy
//! cluster of the same shape (`host-setup`, `guest-main`, `host-main`; one master, the zones of
//! the shape).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use aws_stacks::cfn::Template;
use aws_stacks::stacks::legacy::{guest_main, host_main, host_setup};
use aws_stacks::stacks::{
    Common, CpRouteTable, imds_http_tokens,
    tccp::{self, ApiWhitelist, ControlPlaneVpc, TccpAz},
    tccpf, tccpi, tccpn, tcnp, tcnpf,
};

const AZS: [&str; 3] = ["eu-central-1a", "eu-central-1b", "eu-central-1c"];

/// One cluster shape to render every stack for.
pub struct Shape {
    pub name: &'static str,
    pub azs: usize,
    pub masters: u32,
    pub route53: bool,
    pub aws_cni: bool,
    pub whitelist: bool,
    pub is_update: bool,
}

pub const SHAPES: [Shape; 4] = [
    Shape {
        name: "1az-1master",
        azs: 1,
        masters: 1,
        route53: false,
        aws_cni: false,
        whitelist: false,
        is_update: false,
    },
    Shape {
        name: "1az-1master-r53-cni",
        azs: 1,
        masters: 1,
        route53: true,
        aws_cni: true,
        whitelist: false,
        is_update: false,
    },
    Shape {
        name: "3az-3master-r53-cni-update",
        azs: 3,
        masters: 3,
        route53: true,
        aws_cni: true,
        whitelist: true,
        is_update: true,
    },
    // Route53 on, AWS-CNI off: the shape `tests/moto_probe.py` creates in the emulator.
    Shape {
        name: "3az-3master-r53",
        azs: 3,
        masters: 3,
        route53: true,
        aws_cni: false,
        whitelist: false,
        is_update: false,
    },
];

fn common(route53: bool) -> Common {
    Common {
        cluster_id: "al9qy".into(),
        cluster_uid: "uid-of-the-cluster".into(),
        installation: "gauss".into(),
        organization: "acme".into(),
        operator_version: "16.1.1".into(),
        release_version: "18.2.0".into(),
        region: "eu-central-1".into(),
        partition: "aws".into(),
        base_domain: "gauss.eu-central-1.aws.gigantic.io".into(),
        route53_enabled: route53,
        cloud_tags: BTreeMap::from([("cost-center".to_owned(), "blue".to_owned())]),
    }
}

/// Every template of one cluster shape: (stack name, template).
pub fn render_all(shape: &Shape) -> Vec<(String, Template)> {
    let c = common(shape.route53);
    let azs = &AZS[..shape.azs];
    let route_tables = vec![
        CpRouteTable { id: "rtb-0a1b2c3d4e5f60718".into(), name: "gauss_private_0".into() },
        CpRouteTable { id: "rtb-0e4f5a6b7c8d90a1b".into(), name: "gauss_private_1".into() },
    ];
    let mut out = Vec::new();

    out.push((
        "tccpi".to_owned(),
        tccpi::render(&tccpi::Params { common: c.clone(), tenant_account_id: "123456789012".into() }),
    ));

    // §14.2: cluster 10.1.0.0/24 in quarters, pods 10.2.0.0/16 in quarters.
    let tccp_azs: Vec<TccpAz> = azs
        .iter()
        .enumerate()
        .map(|(i, az)| TccpAz {
            name: (*az).to_owned(),
            public_cidr: format!("10.1.0.{}/27", i * 64),
            private_cidr: format!("10.1.0.{}/27", i * 64 + 32),
            aws_cni_cidr: shape.aws_cni.then(|| format!("10.2.{}.0/18", i * 64)),
        })
        .collect();
    out.push((
        "tccp".to_owned(),
        tccp::render(&tccp::Params {
            common: c.clone(),
            vpc_cidr: "10.1.0.0/24".into(),
            pod_cidr: shape.aws_cni.then(|| "10.2.0.0/16".to_owned()),
            azs: tccp_azs.clone(),
            control_plane: ControlPlaneVpc {
                account_id: "000111222333".into(),
                vpc_id: "vpc-0123456789abcdef0".into(),
                cidr: "10.0.0.0/16".into(),
                peer_role_arn: "arn:aws:iam::000111222333:role/al9qy-vpc-peer-access".into(),
            },
            whitelist: if shape.whitelist {
                ApiWhitelist { public: Some(vec!["203.0.113.0/24".into()]), private: Some(vec!["192.0.2.0/24".into()]) }
            } else {
                ApiWhitelist::default()
            },
            access_logs: tccp::access_logs(None, "123456789012", "al9qy"),
        }),
    ));

    out.push((
        "tccpf".to_owned(),
        tccpf::render(&tccpf::Params {
            common: c.clone(),
            peering_connection_id: "pcx-0123456789abcdef0".into(),
            route_tables: route_tables.clone(),
            private_subnets: tccp_azs
                .iter()
                .map(|a| tccpf::PrivateSubnet { az: a.name.clone(), cidr: a.private_cidr.clone() })
                .collect(),
        }),
    ));

    let master_azs: Vec<(String, String)> =
        azs.iter().enumerate().map(|(i, az)| ((*az).to_owned(), format!("subnet-0aaaaaaaaaaaaaaa{i}"))).collect();
    out.push((
        "tccpn".to_owned(),
        tccpn::render(&tccpn::Params {
            common: c.clone(),
            masters: tccpn::masters(shape.masters, &master_azs).expect("valid master layout"),
            instance_type: "m5.xlarge".into(),
            image_id: "ami-0123456789abcdef0".into(),
            imds_http_tokens: imds_http_tokens(None).into(),
            master_security_group_id: "sg-0aaaaaaaaaaaaaaa1".into(),
            bucket: "123456789012-g8s-al9qy".into(),
            kms_key_arn: "arn:aws:kms:eu-central-1:123456789012:key/0a1b2c3d-aaaa-bbbb-cccc-0123456789ab".into(),
            hosted_zone_id: shape.route53.then(|| "Z0PUBLIC".to_owned()),
            internal_hosted_zone_id: shape.route53.then(|| "Z0PRIVATE".to_owned()),
            etcd_volume: tccpn::EtcdVolumePerformance { iops: Some(4000), throughput: Some(250) },
            is_update: shape.is_update,
            irsa: None,
        }),
    ));

    // Two node pools, each allowing the other.
    for (k, md) in ["g3j50", "x7k2p"].into_iter().enumerate() {
        let pool_azs: Vec<tcnp::TcnpAz> = azs
            .iter()
            .enumerate()
            .map(|(i, az)| tcnp::TcnpAz {
                name: (*az).to_owned(),
                // The pool /24 split in 4 (next power of two ≥ 3) or kept whole for one AZ.
                subnet_cidr: if shape.azs == 1 {
                    format!("10.1.{}.0/24", k + 1)
                } else {
                    format!("10.1.{}.{}/26", k + 1, i * 64)
                },
                nat_gateway_id: format!("nat-0ddddddddddddddd{i}"),
            })
            .collect();
        out.push((
            format!("tcnp-{md}"),
            tcnp::render(&tcnp::Params {
                common: c.clone(),
                node_pool_id: md.into(),
                pool_cidr: format!("10.1.{}.0/24", k + 1),
                azs: pool_azs.clone(),
                vpc_id: "vpc-0cccccccccccccccc".into(),
                vpc_cidr: "10.1.0.0/24".into(),
                peering_connection_id: "pcx-0123456789abcdef0".into(),
                cp_vpc_cidr: "10.0.0.0/16".into(),
                tccp_security_groups: tcnp::TccpSecurityGroups {
                    master: "sg-0aaaaaaaaaaaaaaa1".into(),
                    api_internal_elb: "sg-0aaaaaaaaaaaaaaa2".into(),
                    aws_cni: shape.aws_cni.then(|| "sg-0aaaaaaaaaaaaaaa3".to_owned()),
                },
                other_pool_security_groups: vec![format!("sg-0bbbbbbbbbbbbbbb{}", 1 - k)],
                instance: tcnp::NodeInstance {
                    image_id: "ami-0123456789abcdef0".into(),
                    instance_type: "m5.2xlarge".into(),
                    docker_volume_gb: 100,
                    kubelet_volume_gb: 100,
                    log_volume_gb: 15,
                    containerd_volume_gb: 100,
                    // What the operator renders unless the object opts out of IMDSv2.
                    imds_http_tokens: imds_http_tokens(None).into(),
                },
                min_size: 3,
                max_size: 10,
                rolling_update: tcnp::rolling_update(3, 10, 4, Some("0.3"), Some("PT5M")),
                distribution: tcnp::InstanceDistribution {
                    on_demand_base_capacity: 1,
                    on_demand_percentage_above_base_capacity: 50,
                    overrides: if k == 0 {
                        vec![
                            tcnp::InstanceOverride { instance_type: "m5.2xlarge".into(), weighted_capacity: Some(1) },
                            tcnp::InstanceOverride { instance_type: "m5a.2xlarge".into(), weighted_capacity: Some(1) },
                        ]
                    } else {
                        Vec::new()
                    },
                },
                internal_elb_subnets: true,
                cilium_eni: !shape.aws_cni,
                bucket: "123456789012-g8s-al9qy".into(),
                kms_key_arn: "arn:aws:kms:eu-central-1:123456789012:key/0a1b2c3d-aaaa-bbbb-cccc-0123456789ab".into(),
            }),
        ));
        out.push((
            format!("tcnpf-{md}"),
            tcnpf::render(&tcnpf::Params {
                common: c.clone(),
                node_pool_id: md.into(),
                peering_connection_id: "pcx-0123456789abcdef0".into(),
                route_tables: route_tables.clone(),
                subnets: pool_azs
                    .iter()
                    .map(|a| tcnpf::PoolSubnet { az: a.name.clone(), cidr: a.subnet_cidr.clone() })
                    .collect(),
            }),
        ));
    }
    out.extend(render_legacy(shape, &c, &route_tables));
    out
}

/// The three stacks of a legacy cluster of `shape` (its zones and Route53 setting; one master).
fn render_legacy(shape: &Shape, c: &Common, route_tables: &[CpRouteTable]) -> Vec<(String, Template)> {
    // A /16 in /19s, private then public per zone, as the original's users laid them out.
    let zones: Vec<tccp::TccpAz> = AZS[..shape.azs]
        .iter()
        .enumerate()
        .map(|(i, az)| tccp::TccpAz {
            name: (*az).to_owned(),
            private_cidr: format!("10.11.{}.0/19", i * 64),
            public_cidr: format!("10.11.{}.0/19", i * 64 + 32),
            aws_cni_cidr: None,
        })
        .collect();
    let guest = guest_main::render(&guest_main::Params {
        common: c.clone(),
        vpc_cidr: "10.11.0.0/16".into(),
        zones: zones.clone(),
        control_plane: ControlPlaneVpc {
            account_id: "000111222333".into(),
            vpc_id: "vpc-0123456789abcdef0".into(),
            cidr: "10.0.0.0/16".into(),
            peer_role_arn: "arn:aws:iam::000111222333:role/al9qy-vpc-peer-access".into(),
        },
        access_logs: tccp::access_logs(None, "123456789012", "al9qy"),
        master: guest_main::NodeShape { image_id: "ami-0123456789abcdef0".into(), instance_type: "m5.xlarge".into() },
        workers: guest_main::Workers {
            shape: guest_main::NodeShape {
                image_id: "ami-0123456789abcdef0".into(),
                instance_type: "m5.2xlarge".into(),
            },
            docker_volume_gb: 150,
            min_size: 3,
            max_size: 10,
            desired: 4,
        },
        imds_http_tokens: imds_http_tokens(None).into(),
        bucket: "123456789012-g8s-al9qy".into(),
        kms_key_arn: "arn:aws:kms:eu-central-1:123456789012:key/0a1b2c3d-aaaa-bbbb-cccc-0123456789ab".into(),
        idle_timeouts: guest_main::IdleTimeouts { api: 120, etcd: 60, ingress: 60 },
        ingress_ports: guest_main::IngressPorts { insecure: 30010, secure: 30011 },
    })
    .unwrap_or_else(|e| panic!("legacy guest-main of {}: {e}", shape.name));
    vec![
        (
            "legacy-host-setup".to_owned(),
            host_setup::render(&host_setup::Params { common: c.clone(), tenant_account_id: "123456789012".into() }),
        ),
        ("legacy-guest-main".to_owned(), guest),
        (
            "legacy-host-main".to_owned(),
            host_main::render(&host_main::Params {
                common: c.clone(),
                peering_connection_id: "pcx-0123456789abcdef0".into(),
                route_tables: route_tables.to_vec(),
                private_subnets: zones
                    .iter()
                    .map(|z| tccpf::PrivateSubnet { az: z.name.clone(), cidr: z.private_cidr.clone() })
                    .collect(),
                delegation: shape.route53.then(|| host_main::Delegation {
                    parent_zone_id: "Z0123456789MANAGEMENT".into(),
                    name_servers: vec!["ns-1.awsdns-01.org.".into(), "ns-2.awsdns-02.net.".into()],
                }),
            }),
        ),
    ]
}

/// Writes every template of every shape as pretty JSON into `dir` (`<shape>-<stack>.json`) and
/// returns the paths. `AWS_STACKS_RENDER_DIR`, when set, also gets a compact copy of each, e.g.
/// for `tests/moto_probe.py`.
pub fn write_all(dir: &Path) -> Vec<PathBuf> {
    let keep = std::env::var_os("AWS_STACKS_RENDER_DIR").map(PathBuf::from);
    let mut files = Vec::new();
    for shape in &SHAPES {
        for (stack, template) in render_all(shape) {
            let path = dir.join(format!("{}-{stack}.json", shape.name));
            std::fs::write(&path, template.to_json_pretty()).expect("write template");
            if let Some(keep) = &keep {
                std::fs::create_dir_all(keep).expect("create render dir");
                std::fs::write(keep.join(format!("{}-{stack}.json", shape.name)), template.to_json())
                    .expect("write copy");
            }
            files.push(path);
        }
    }
    files
}

/// A tool of the workspace's virtualenvs: `$<env>` if set, else `<workspace>/<relative>`
/// (created by `make venv` or `make static-checks`).
pub fn venv_tool(env: &str, relative: &str, make: &str) -> PathBuf {
    if let Some(path) = std::env::var_os(env) {
        return PathBuf::from(path);
    }
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..").join(relative);
    assert!(path.exists(), "{} not found and ${env} is unset: run `{make}` in the workspace root", path.display());
    path
}
