//! Route53: the cluster zone's NS delegation in the installation's intermediate zone, and the
//! records others left in the cluster's zones (the teardown's leftovers).

use crate::aws::{AccountClients, AwsError, api_error};

/// The TTL of a cluster's NS delegation record (upstream's).
pub const DELEGATION_TTL: i64 = 300;

/// `name` as Route53 writes it, fully qualified: with one trailing dot.
fn fqdn(name: &str) -> String {
    format!("{}.", name.trim_end_matches('.'))
}

/// The public hosted zone named `name` (with or without the trailing dot) in the account: its
/// id without the `/hostedzone/` prefix, or `None`.
pub async fn hosted_zone_by_name(aws: &AccountClients, name: &str) -> Result<Option<String>, AwsError> {
    let wanted = fqdn(name);
    let page = aws
        .route53
        .list_hosted_zones_by_name()
        .dns_name(&wanted)
        // A private zone of the same name may come first.
        .max_items(10)
        .send()
        .await
        .map_err(|e| api_error("Route53", "ListHostedZonesByName", e))?;
    // The listing starts at `wanted` in DNS order: the first zone is it, or a later one.
    Ok(page
        .hosted_zones()
        .iter()
        .find(|z| z.name() == wanted && !z.config().is_some_and(|c| c.private_zone()))
        .map(|z| z.id().trim_start_matches("/hostedzone/").to_string()))
}

/// The name servers Route53 assigned to hosted zone `zone_id`.
pub async fn zone_name_servers(aws: &AccountClients, zone_id: &str) -> Result<Vec<String>, AwsError> {
    let zone =
        aws.route53.get_hosted_zone().id(zone_id).send().await.map_err(|e| api_error("Route53", "GetHostedZone", e))?;
    Ok(zone.delegation_set().map(|d| d.name_servers().to_vec()).unwrap_or_default())
}

/// The NS record `name` in zone `zone_id`: its values, or `None`.
pub async fn ns_record(aws: &AccountClients, zone_id: &str, name: &str) -> Result<Option<Vec<String>>, AwsError> {
    use aws_sdk_route53::types::RrType;
    let wanted = fqdn(name);
    let page = aws
        .route53
        .list_resource_record_sets()
        .hosted_zone_id(zone_id)
        .start_record_name(&wanted)
        .start_record_type(RrType::Ns)
        .max_items(1)
        .send()
        .await
        .map_err(|e| api_error("Route53", "ListResourceRecordSets", e))?;
    Ok(page
        .resource_record_sets()
        .iter()
        .find(|r| fqdn(r.name()) == wanted && *r.r#type() == RrType::Ns)
        .map(|r| r.resource_records().iter().map(|v| v.value().to_string()).collect()))
}

/// Upsert (`delete: false`) or delete the NS record `name` in zone `zone_id` with `values`,
/// TTL [`DELEGATION_TTL`]. A delete must name the record's current values.
pub async fn change_ns_record(
    aws: &AccountClients,
    zone_id: &str,
    name: &str,
    values: &[String],
    delete: bool,
) -> Result<(), AwsError> {
    use aws_sdk_route53::types::{ChangeAction, ResourceRecord, ResourceRecordSet, RrType};
    let build = |what: &str| AwsError::Setup(format!("building the Route53 change of {name}: {what}"));
    let records = values
        .iter()
        .map(|v| ResourceRecord::builder().value(v).build().map_err(|e| build(&e.to_string())))
        .collect::<Result<Vec<_>, _>>()?;
    let set = ResourceRecordSet::builder()
        .name(fqdn(name))
        .r#type(RrType::Ns)
        .ttl(DELEGATION_TTL)
        .set_resource_records(Some(records))
        .build()
        .map_err(|e| build(&e.to_string()))?;
    let action = if delete { ChangeAction::Delete } else { ChangeAction::Upsert };
    change(aws, zone_id, action, set).await
}

/// Send one change of `set` in zone `zone_id`.
async fn change(
    aws: &AccountClients,
    zone_id: &str,
    action: aws_sdk_route53::types::ChangeAction,
    set: aws_sdk_route53::types::ResourceRecordSet,
) -> Result<(), AwsError> {
    use aws_sdk_route53::types::{Change, ChangeBatch};
    let build = |what: String| AwsError::Setup(format!("building the Route53 change of {}: {what}", set.name()));
    let change =
        Change::builder().action(action).resource_record_set(set.clone()).build().map_err(|e| build(e.to_string()))?;
    let batch = ChangeBatch::builder().changes(change).build().map_err(|e| build(e.to_string()))?;
    aws.route53
        .change_resource_record_sets()
        .hosted_zone_id(zone_id)
        .change_batch(batch)
        .send()
        .await
        .map_err(|e| api_error("Route53", "ChangeResourceRecordSets", e))?;
    Ok(())
}

/// Every record set of hosted zone `zone_id`.
pub async fn record_sets(
    aws: &AccountClients,
    zone_id: &str,
) -> Result<Vec<aws_sdk_route53::types::ResourceRecordSet>, AwsError> {
    let mut out = Vec::new();
    let (mut name, mut kind, mut identifier) = (None, None, None);
    loop {
        let page = aws
            .route53
            .list_resource_record_sets()
            .hosted_zone_id(zone_id)
            .set_start_record_name(name.take())
            .set_start_record_type(kind.take())
            .set_start_record_identifier(identifier.take())
            .send()
            .await
            .map_err(|e| api_error("Route53", "ListResourceRecordSets", e))?;
        out.extend(page.resource_record_sets().iter().cloned());
        if !page.is_truncated() {
            return Ok(out);
        }
        name = page.next_record_name().map(str::to_string);
        kind = page.next_record_type().cloned();
        identifier = page.next_record_identifier().map(str::to_string);
        if name.is_none() {
            return Ok(out);
        }
    }
}

/// Delete `record` from zone `zone_id`: a delete names the record set exactly as it is.
pub async fn delete_record_set(
    aws: &AccountClients,
    zone_id: &str,
    record: &aws_sdk_route53::types::ResourceRecordSet,
) -> Result<(), AwsError> {
    change(aws, zone_id, aws_sdk_route53::types::ChangeAction::Delete, record.clone()).await
}
