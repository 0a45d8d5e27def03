//! What the tests that run the operator as its chart's ServiceAccount take from the rendered
//! chart.

/// The operator's RoleBinding in each cluster's namespace, from the chart's daemon flags.
pub fn access(rendered: &[serde_json::Value]) -> anyhow::Result<kvm_objects::access::OperatorAccess> {
    let flag =
        |name: &str| packaging::chart_flag(rendered, name).ok_or_else(|| anyhow::anyhow!("the chart passes no {name}"));
    kvm_objects::access::OperatorAccess::new(&flag("--workload-cluster-role")?, &flag("--service-account")?)
        .map_err(anyhow::Error::msg)
}
