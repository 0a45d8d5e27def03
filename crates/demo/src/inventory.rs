//! What exists in one emulated AWS account, read back through the same SDK clients the operator
//! uses: CloudFormation stacks, VPCs, subnets, Auto Scaling groups, S3 buckets with their
//! objects, and KMS aliases. Each listing is one page, which holds everything a demo creates.

use std::collections::BTreeMap;

use anyhow::Context;
use aws_operator::aws::AccountClients;

/// Print `rows` under `headers` with aligned columns.
pub fn table(headers: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(cell.chars().count());
            }
        }
    }
    let line = |cells: Vec<&str>| {
        let padded: Vec<String> = cells.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
        println!("  {}", padded.join("  ").trim_end());
    };
    line(headers.to_vec());
    if rows.is_empty() {
        println!("  (none)");
    }
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
}

fn name_tag(tags: &[aws_sdk_ec2::types::Tag]) -> String {
    tags.iter().find(|t| t.key() == Some("Name")).and_then(|t| t.value()).unwrap_or("-").to_string()
}

/// Print the inventory of the account behind `clients` under `title`.
pub async fn print_account(title: &str, clients: &AccountClients) -> anyhow::Result<()> {
    println!("\n{title}: account {} in {}", clients.account_id, clients.region);

    let mut stacks = clients.cfn.describe_all().await.context("listing the stacks")?;
    stacks.sort_by(|a, b| a.name.cmp(&b.name));
    println!(" CloudFormation stacks");
    let rows: Vec<Vec<String>> = stacks
        .iter()
        .map(|s| vec![s.name.clone(), s.status.to_string(), s.status_reason.clone().unwrap_or_default()])
        .collect();
    table(&["NAME", "STATUS", "REASON"], &rows);

    let vpcs = clients.ec2.describe_vpcs().send().await.context("listing the VPCs")?;
    let subnets = clients.ec2.describe_subnets().send().await.context("listing the subnets")?;
    let mut per_vpc: BTreeMap<&str, usize> = BTreeMap::new();
    for subnet in subnets.subnets() {
        *per_vpc.entry(subnet.vpc_id().unwrap_or_default()).or_default() += 1;
    }
    println!(" VPCs");
    let rows: Vec<Vec<String>> = vpcs
        .vpcs()
        .iter()
        // moto's default VPC exists in every account and region; it is not the demo's.
        .filter(|v| v.is_default() != Some(true))
        .map(|v| {
            let id = v.vpc_id().unwrap_or_default();
            let cidrs: Vec<&str> = v.cidr_block_association_set().iter().filter_map(|a| a.cidr_block()).collect();
            let cidrs = if cidrs.is_empty() { v.cidr_block().unwrap_or_default().to_string() } else { cidrs.join(",") };
            vec![id.to_string(), name_tag(v.tags()), cidrs, per_vpc.get(id).copied().unwrap_or(0).to_string()]
        })
        .collect();
    table(&["ID", "NAME", "CIDRS", "SUBNETS"], &rows);

    let groups =
        clients.autoscaling.describe_auto_scaling_groups().send().await.context("listing the Auto Scaling groups")?;
    println!(" Auto Scaling groups");
    let mut rows: Vec<Vec<String>> = groups
        .auto_scaling_groups()
        .iter()
        .map(|g| {
            let n = |v: Option<i32>| v.map(|v| v.to_string()).unwrap_or_else(|| "-".into());
            vec![
                g.auto_scaling_group_name().unwrap_or_default().to_string(),
                n(g.min_size()),
                n(g.max_size()),
                n(g.desired_capacity()),
            ]
        })
        .collect();
    rows.sort();
    table(&["NAME", "MIN", "MAX", "DESIRED"], &rows);

    let buckets = clients.s3.list_buckets().send().await.context("listing the buckets")?;
    println!(" S3 buckets");
    let mut rows = Vec::new();
    for bucket in buckets.buckets() {
        let name = bucket.name().unwrap_or_default();
        let objects =
            clients.s3.list_objects_v2().bucket(name).send().await.with_context(|| format!("listing bucket {name}"))?;
        let keys: Vec<&str> = objects.contents().iter().filter_map(|o| o.key()).collect();
        if keys.is_empty() {
            rows.push(vec![name.to_string(), "(empty)".into()]);
        }
        for (i, key) in keys.iter().enumerate() {
            rows.push(vec![if i == 0 { name.to_string() } else { String::new() }, (*key).to_string()]);
        }
    }
    table(&["BUCKET", "OBJECT KEYS"], &rows);

    let aliases = clients.kms.list_aliases().send().await.context("listing the KMS aliases")?;
    println!(" KMS aliases");
    let rows: Vec<Vec<String>> = aliases
        .aliases()
        .iter()
        // AWS-managed aliases (alias/aws/…) exist in every account.
        .filter(|a| !a.alias_name().unwrap_or_default().starts_with("alias/aws/"))
        .map(|a| vec![a.alias_name().unwrap_or_default().to_string(), a.target_key_id().unwrap_or("-").to_string()])
        .collect();
    table(&["ALIAS", "KEY"], &rows);
    Ok(())
}
