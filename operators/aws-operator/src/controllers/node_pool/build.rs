//! Pure: what a node pool's two stacks are rendered from ([`PoolStacks`]), the Flatcar version
//! it runs ([`pool_flatcar`]), and what the status says about its rolling-update annotations,
//! maintenance settings and running workers ([`worker_status`]). The controller fills these from AWS and the cluster's stacks;
//! `aws-operator render` ([`crate::plan`]) from the CR files.

use std::time::Duration;

use apis::aws::{AWSCluster, AWSMachineDeployment, AWSMachineDeploymentStatusProviderWorker};
use apis::labels;
use apis::release::Release;
use aws_stacks::ipam::Ipv4Net;
use aws_stacks::stacks::{self, tccp, tcnp, tcnpf};
use kube::ResourceExt;
use node_lifecycle::maintenance::MaintenanceError;

use crate::controllers;

/// What is wrong with the rolling-update annotations `batch` and `pause` (the pool's own, else
/// the cluster's) of `obj`: one message per ignored annotation, naming where it is and the fix.
pub fn rolling_update_problems(obj: &AWSMachineDeployment, batch: Option<&str>, pause: Option<&str>) -> Vec<String> {
    tcnp::annotation_problems(batch, pause)
        .into_iter()
        .map(|p| {
            let on = if obj.annotations().contains_key(p.annotation) { "AWSMachineDeployment" } else { "AWSCluster" };
            format!(
                "{}: annotation {}={:?} (on the {on}) is ignored and the default applies: {}; fix the value or remove the annotation",
                controllers::status::describe(obj),
                p.annotation,
                p.value,
                p.problem
            )
        })
        .collect()
}

/// `status.provider.worker` from the pool's running `instances`: their distinct instance types,
/// sorted, and how many run on spot capacity.
pub fn worker_status(instances: &[crate::aws::ec2::GroupInstance]) -> AWSMachineDeploymentStatusProviderWorker {
    let mut instance_types: Vec<String> =
        instances.iter().map(|i| i.instance_type.clone()).filter(|t| !t.is_empty()).collect();
    instance_types.sort();
    instance_types.dedup();
    let spot = instances.iter().filter(|i| i.spot).count();
    AWSMachineDeploymentStatusProviderWorker { instance_types, spot_instances: i32::try_from(spot).unwrap_or(i32::MAX) }
}

/// The pool's `spec.nodePool.maxNodeAge`, parsed; `None` when not set.
pub fn max_age(obj: &AWSMachineDeployment) -> Option<Result<Duration, MaintenanceError>> {
    obj.spec
        .node_pool
        .max_node_age
        .as_deref()
        .map(|raw| node_lifecycle::maintenance::parse_max_age("spec.nodePool.maxNodeAge", raw))
}

/// What the [`crate::maintenance::SETTINGS`] condition says of the cluster's maintenance
/// `schedule` and the pool's `max_age`: `None` when neither is set and the pool never had the
/// condition; else `Ok` or every problem in one message.
pub fn maintenance_settings<S>(
    cluster: &AWSCluster,
    obj: &AWSMachineDeployment,
    schedule: &Result<S, Vec<MaintenanceError>>,
    max_age: &Option<Result<Duration, MaintenanceError>>,
) -> Option<Result<(), String>> {
    let had_condition =
        obj.status.as_ref().is_some_and(|s| s.conditions.iter().any(|c| c.type_ == crate::maintenance::SETTINGS));
    if cluster.spec.cluster.maintenance.is_none() && max_age.is_none() && !had_condition {
        return None;
    }
    let mut problems = Vec::new();
    if let Err(errors) = schedule {
        let whose = format!("AWSCluster {}/{}", cluster.namespace().unwrap_or_default(), cluster.name_any());
        problems.push(crate::maintenance::problems_message(&whose, errors));
    }
    if let Some(Err(e)) = max_age {
        problems.push(format!(
            "{}: {e}; nodes are not replaced for their age until this is fixed",
            controllers::status::describe(obj)
        ));
    }
    Some(if problems.is_empty() { Ok(()) } else { Err(problems.join("; ")) })
}

/// The Flatcar version a node pool runs: its `FLATCAR_RELEASE_VERSION` annotation when that is
/// newer than its Release's `containerlinux`, else the Release's.
pub fn pool_flatcar<'a>(pool: &'a AWSMachineDeployment, release: &'a Release) -> &'a str {
    let release_flatcar = release.component_version("containerlinux").unwrap_or_default();
    pool.annotations()
        .get(labels::FLATCAR_RELEASE_VERSION)
        .filter(|v| newer(v, release_flatcar))
        .map_or(release_flatcar, String::as_str)
}

/// What a node pool's two stacks are rendered from: the controller fills it from AWS and the
/// cluster's stacks, `aws-operator render` from the CR files; both render through it.
#[derive(Debug, Clone, Copy)]
pub struct PoolStacks<'a> {
    pub cluster: &'a AWSCluster,
    pub pool: &'a AWSMachineDeployment,
    pub common: &'a stacks::Common,
    /// The pool's per-zone subnets (`ipam::node_pool_layout`).
    pub layout: &'a [(String, Ipv4Net)],
    pub pool_cidr: &'a str,
    /// The cluster's TCCP outputs.
    pub outputs: &'a tccp::Outputs,
    pub cluster_cidr: &'a str,
    /// The management VPC's CIDR and the route tables that route into the pool.
    pub cp_cidr: &'a str,
    pub cp_tables: &'a [stacks::CpRouteTable],
    pub ami: &'a str,
    pub bucket: &'a str,
    pub key_arn: &'a str,
    /// The security groups of the cluster's other node pools, which this pool's group admits.
    pub peer_security_groups: &'a [String],
    /// The operator's alike instance types (`--alike-instances`).
    pub alike: &'a crate::config::AlikeInstances,
    /// Cilium runs in ENI mode (the cluster's `Cluster` says so, `crate::capi`): the workers
    /// manage the interfaces their pods use.
    pub cilium_eni: bool,
}

impl PoolStacks<'_> {
    /// TCNP's parameters, with the Auto Scaling group's live desired capacity (0 for a new
    /// group; it only shapes the rolling update, never the template hash).
    pub fn tcnp(&self, current_desired: u32) -> tcnp::Params {
        let scaling = &self.pool.spec.node_pool.scaling;
        self.tcnp_sized(current_desired, scaling.min.max(0) as u32, scaling.max.max(0) as u32)
    }

    /// The rolling-update annotations, the pool's own before the cluster's.
    pub fn rolling_update_annotations(&self) -> (Option<String>, Option<String>) {
        let annotation =
            |key: &str| self.pool.annotations().get(key).or_else(|| self.cluster.annotations().get(key)).cloned();
        (annotation(labels::AWS_UPDATE_MAX_BATCH_SIZE), annotation(labels::AWS_UPDATE_PAUSE_TIME))
    }

    /// [`PoolStacks::tcnp`] with the group's minimum and maximum given instead of the spec's:
    /// the template the pool would have at another size, which tells a scaling-only change.
    pub fn tcnp_sized(&self, current_desired: u32, min: u32, max: u32) -> tcnp::Params {
        let obj = self.pool;
        let (batch, pause) = self.rolling_update_annotations();
        let dist = obj.spec.provider.instance_distribution.clone().unwrap_or_default();
        let machine = &obj.spec.node_pool.machine;
        let outputs = self.outputs;
        tcnp::Params {
            common: self.common.clone(),
            node_pool_id: obj.name_any(),
            pool_cidr: self.pool_cidr.to_string(),
            azs: self
                .layout
                .iter()
                .filter_map(|(az, net)| {
                    Some(tcnp::TcnpAz {
                        name: az.clone(),
                        subnet_cidr: net.to_string(),
                        nat_gateway_id: outputs.az(az)?.nat_gateway_id.clone(),
                    })
                })
                .collect(),
            vpc_id: outputs.vpc_id.clone(),
            vpc_cidr: self.cluster_cidr.to_string(),
            peering_connection_id: outputs.vpc_peering_connection_id.clone(),
            cp_vpc_cidr: self.cp_cidr.to_string(),
            tccp_security_groups: tcnp::TccpSecurityGroups {
                master: outputs.master_security_group_id.clone(),
                api_internal_elb: outputs.api_internal_elb_security_group_id.clone(),
                aws_cni: None,
            },
            other_pool_security_groups: self.peer_security_groups.to_vec(),
            instance: tcnp::NodeInstance {
                image_id: self.ami.to_string(),
                instance_type: obj.spec.provider.worker.instance_type.clone(),
                docker_volume_gb: machine.docker_volume_size_gb.max(1) as u32,
                kubelet_volume_gb: machine.kubelet_volume_size_gb.max(1) as u32,
                // Both were checked with the object (`validate`); the defaults stand in for
                // values that check refused.
                log_volume_gb: obj.log_volume_gb().unwrap_or(apis::aws::DEFAULT_LOG_VOLUME_GB),
                containerd_volume_gb: obj.containerd_volume_gb().unwrap_or(machine.docker_volume_size_gb.max(1) as u32),
                imds_http_tokens: stacks::imds_http_tokens(
                    obj.annotations().get(labels::AWS_METADATA_V2).map(String::as_str),
                )
                .into(),
            },
            min_size: min,
            max_size: max,
            rolling_update: tcnp::rolling_update(min, max, current_desired, batch.as_deref(), pause.as_deref()),
            distribution: tcnp::InstanceDistribution {
                on_demand_base_capacity: dist.on_demand_base_capacity.max(0) as u32,
                on_demand_percentage_above_base_capacity: dist
                    .on_demand_percentage_above_base_capacity
                    .unwrap_or(100)
                    .clamp(0, 100) as u32,
                overrides: if obj.spec.provider.worker.use_alike_instance_types {
                    self.alike.overrides(&obj.spec.provider.worker.instance_type)
                } else {
                    Vec::new()
                },
            },
            internal_elb_subnets: tcnp::internal_elb_subnets(
                obj.annotations().get(labels::AWS_INTERNAL_ELB).map(String::as_str),
            ),
            cilium_eni: self.cilium_eni,
            bucket: self.bucket.to_string(),
            kms_key_arn: self.key_arn.to_string(),
        }
    }

    /// TCNPF's parameters: routes from the management VPC to the pool's subnets.
    pub fn tcnpf(&self) -> tcnpf::Params {
        tcnpf::Params {
            common: self.common.clone(),
            node_pool_id: self.pool.name_any(),
            peering_connection_id: self.outputs.vpc_peering_connection_id.clone(),
            route_tables: self.cp_tables.to_vec(),
            subnets: self
                .layout
                .iter()
                .map(|(az, net)| tcnpf::PoolSubnet { az: az.clone(), cidr: net.to_string() })
                .collect(),
        }
    }
}

/// Whether version `a` is semver-greater than `b` (unparsable versions never are).
fn newer(a: &str, b: &str) -> bool {
    match (semver::Version::parse(a), semver::Version::parse(b)) {
        (Ok(a), Ok(b)) => a > b,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aws::ec2::GroupInstance;

    fn instance(instance_type: &str, spot: bool) -> GroupInstance {
        GroupInstance { instance_type: instance_type.into(), spot }
    }

    #[test]
    fn the_worker_status_names_each_running_type_once_and_counts_spot_instances() {
        let status = worker_status(&[
            instance("m5.xlarge", false),
            instance("m4.xlarge", true),
            instance("m5.xlarge", true),
            instance("", false),
        ]);
        assert_eq!(status.instance_types, ["m4.xlarge", "m5.xlarge"]);
        assert_eq!(status.spot_instances, 2);
        assert_eq!(worker_status(&[]), AWSMachineDeploymentStatusProviderWorker::default());
    }
}
