//! Well-known labels and annotations.

/// The release a cluster runs: its value `X.Y.Z` names the `Release` `vX.Y.Z`.
pub const RELEASE_VERSION: &str = "release.giantswarm.io/version";
/// The cluster an object belongs to.
pub const CLUSTER: &str = "giantswarm.io/cluster";
/// The UID of the cluster object (`AWSCluster`, `KVMConfig`) that owns an object the operators
/// created for it outside its namespace; nothing is deleted unless it carries it
/// ([`crate::cluster_id`]).
pub const CLUSTER_UID: &str = "giantswarm.io/cluster-uid";
/// Annotation on the namespace `<id>`, the claim of a cluster id: the cluster object that holds
/// it, `Kind namespace/name`.
pub const CLUSTER_OWNER: &str = "giantswarm.io/cluster-owner";
/// The organization that owns a cluster.
pub const ORGANIZATION: &str = "giantswarm.io/organization";
/// Which tool manages an object.
pub const MANAGED_BY: &str = "giantswarm.io/managed-by";
/// Release notes link (Release annotation).
pub const RELEASE_NOTES: &str = "giantswarm.io/release-notes";
/// Pauses reconciliation (Cluster API convention).
pub const CAPI_PAUSED: &str = "cluster.x-k8s.io/paused";
/// Pauses reconciliation (operatorkit convention).
pub const OPERATORKIT_PAUSED: &str = "operatorkit.giantswarm.io/paused";

/// The control plane an object belongs to (`AWSControlPlane` name, e.g. `a2wax`).
pub const CONTROL_PLANE: &str = "giantswarm.io/control-plane";
/// The node pool an object belongs to (`AWSMachineDeployment` name, e.g. `g3j50`).
pub const MACHINE_DEPLOYMENT: &str = "giantswarm.io/machine-deployment";
/// The aws-operator version that reconciles an object; each running version watches only its
/// own value (side-by-side upgrades).
pub const AWS_OPERATOR_VERSION: &str = "aws-operator.giantswarm.io/version";

/// The kvm-operator version that reconciles a `KVMConfig` and its node pods; each running
/// version watches only its own value (side-by-side upgrades).
pub const KVM_OPERATOR_VERSION: &str = "kvm-operator.giantswarm.io/version";
/// Annotation (any value) on a `KVMConfig`: opts the cluster into the replacement of nodes that
/// stay NotReady.
pub const TERMINATE_UNHEALTHY: &str = "node.giantswarm.io/terminate-unhealthy";

/// Annotation: the CIDR IPAM allocated to a node pool, written by aws-operator on the
/// `AWSMachineDeployment`.
pub const MACHINE_DEPLOYMENT_SUBNET: &str = "machine-deployment.giantswarm.io/subnet";
/// Annotation: the prefix length IPAM allocates (on `AWSCluster` or `AWSMachineDeployment`),
/// e.g. `24`.
pub const AWS_SUBNET_SIZE: &str = "alpha.aws.giantswarm.io/aws-subnet-size";
/// Annotation: how many instances a rolling update replaces at once (a count or a percentage).
pub const AWS_UPDATE_MAX_BATCH_SIZE: &str = "alpha.aws.giantswarm.io/update-max-batch-size";
/// Annotation: how long a rolling update pauses between batches (an ISO 8601 duration).
pub const AWS_UPDATE_PAUSE_TIME: &str = "alpha.aws.giantswarm.io/update-pause-time";
/// Annotation: the instance metadata service's `HttpTokens` setting: `optional` lets IMDSv1 through;
/// anything else, or no annotation, means `required` (IMDSv2 only).
pub const AWS_METADATA_V2: &str = "alpha.aws.giantswarm.io/metadata-v2";
/// Annotation on an `AWSCluster`: `false` turns off the access logs of the cluster's load
/// balancers (on by default, into the cluster's access-log bucket).
pub const AWS_LOAD_BALANCER_ACCESS_LOGS: &str = "alpha.aws.giantswarm.io/load-balancer-access-logs";
/// Annotation on an `AWSMachineDeployment`: present (any value but `false`; Giant Swarm's tooling
/// sets `""`), the pool's subnets are tagged `kubernetes.io/role/internal-elb=1`, so internal
/// load balancers of the workload cluster may use them.
pub const AWS_INTERNAL_ELB: &str = "alpha.aws.giantswarm.io/internal-elb";
/// Annotation on an `AWSControlPlane`: the provisioned IOPS of the masters' etcd volumes (gp3,
/// 3000 to 16000; default gp3's 3000).
pub const AWS_EBS_VOLUME_IOPS: &str = "alpha.aws.giantswarm.io/ebs-volume-iops";
/// Annotation on an `AWSControlPlane`: the throughput in MiB/s of the masters' etcd volumes (gp3,
/// 125 to 1000, at most a quarter of the IOPS; default gp3's 125).
pub const AWS_EBS_VOLUME_THROUGHPUT: &str = "alpha.aws.giantswarm.io/ebs-volume-throughput";
/// Annotation on an `AWSControlPlane` of one master: the EBS snapshot (`snap-…`) its etcd
/// volume is created from, e.g. the volume of a legacy cluster's master (`aws-operator migrate`).
/// Kept for the volume's life: removing or changing it would replace the volume.
pub const ETCD_SNAPSHOT_ID: &str = "aws-operator.giantswarm.io/etcd-snapshot-id";
/// Annotation: the size in GiB of a node pool's containerd volume (default: its docker volume's).
pub const AWS_CONTAINERD_VOLUME_SIZE: &str = "alpha.aws.giantswarm.io/containerd-volume-size";
/// Annotation: the size in GiB of a node pool's log volume (default 15).
pub const AWS_LOGGING_VOLUME_SIZE: &str = "alpha.aws.giantswarm.io/logging-volume-size";
/// Annotation: a Flatcar release for one node pool, used only when newer than the release's.
pub const FLATCAR_RELEASE_VERSION: &str = "alpha.giantswarm.io/flatcar-release-version";
/// Annotation: which aws-operator instance handles an object.
pub const AWS_OPERATOR_INSTANCE: &str = "aws-operator.giantswarm.io/instance";

/// The label that pins an object to one version of an operator in legacy side-by-side mode,
/// e.g. `aws-operator.giantswarm.io/version`.
pub fn operator_version_label(operator: &str) -> String {
    format!("{operator}.giantswarm.io/version")
}
