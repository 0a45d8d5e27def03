//! Cluster ids, and which cluster object owns what is named after one.
//!
//! A cluster id names things outside the cluster object's own namespace: the management-cluster
//! namespace `<id>`, kvm-operator's ClusterRoleBindings `<id>` and `<id>-psp`, and the
//! CloudFormation stacks, buckets and key of aws-operator. So an id is checked before anything is
//! built from it ([`check`]): short, lower-case letters and digits, starting with a letter, as
//! the original's generated ids are (five characters, e.g. `al9qy`). `kube-system`, `org-acme`
//! or `calico-node` are not ids.
//!
//! An id is claimed once per installation. The claim is the namespace `<id>` itself: a
//! cluster-scoped object whose name the API server keeps unique, created by the operator with the
//! label [`CLUSTER_UID`](crate::labels::CLUSTER_UID) holding the UID of the cluster object and
//! the annotation [`CLUSTER_OWNER`](crate::labels::CLUSTER_OWNER) naming it. Everything else the
//! operators create for a cluster carries the same UID label, and nothing is deleted unless it
//! carries it ([`ownership`]).
//!
//! Objects created by earlier versions carry no UID. They are adopted only when what they carry
//! proves they are this cluster's ([`Ownership::Legacy`]): the namespace `<id>` when it carries
//! the cluster label with this id and the cluster object has a status the operator wrote for
//! it (a tenant cannot write status, so a new object claiming an old id has none); any other
//! object when it carries the cluster label with this id and the claim is this object's.

use std::collections::BTreeMap;

use crate::labels;
use crate::validation::FieldError;

/// A cluster id: a lower-case letter, then lower-case letters and digits.
pub const PATTERN: &str = "^[a-z][a-z0-9]*$";

/// The longest cluster id: a KVM node's tap device is `tap-<id>`, and Linux interface names
/// have at most 15 characters.
pub const MAX_LENGTH: usize = 11;

/// The CEL rule of a CRD whose objects are named after their cluster id (`AWSCluster`): a root
/// rule may read `self.metadata.name`, while labels are out of CEL's reach.
pub const NAME_RULE: &str = "self.metadata.name.matches('^[a-z][a-z0-9]*$') && size(self.metadata.name) <= 11";

/// The message of [`NAME_RULE`].
pub const NAME_RULE_MESSAGE: &str =
    "metadata.name is the cluster id: 1 to 11 lower-case letters and digits, starting with a letter (e.g. al9qy)";

/// Whether `id` is a cluster id.
pub fn is_valid(id: &str) -> bool {
    let mut chars = id.chars();
    id.len() <= MAX_LENGTH
        && chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
}

/// Check the cluster id `id` found in `field`; the error names the field and the fix.
pub fn check(field: &str, id: &str) -> Result<(), FieldError> {
    if is_valid(id) {
        return Ok(());
    }
    Err(FieldError::new(
        field,
        id,
        format!(
            "a cluster id is 1 to {MAX_LENGTH} lower-case letters and digits, starting with a letter (e.g. al9qy); it \
             names the cluster's namespace and cloud resources, so it can be neither an existing namespace such as \
             kube-system nor an organisation's; create the cluster anew with such an id"
        ),
    ))
}

/// The cluster object that owns an id and what is built from it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owner {
    /// The object's kind, e.g. `AWSCluster`.
    pub kind: String,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its UID: what everything it owns carries.
    pub uid: String,
    /// The cluster id it claims.
    pub id: String,
    /// Whether its status, which only the operator writes, shows the operator reconciled it
    /// before: the proof that lets it adopt a namespace of an earlier version.
    pub reconciled_before: bool,
}

impl Owner {
    /// `obj` as the owner of cluster id `id`; `reconciled_before` as its status shows.
    pub fn of<K: kube::Resource<DynamicType = ()>>(obj: &K, id: &str, reconciled_before: bool) -> Self {
        let meta = obj.meta();
        Self {
            kind: K::kind(&()).into_owned(),
            namespace: meta.namespace.clone().unwrap_or_default(),
            name: meta.name.clone().unwrap_or_default(),
            uid: meta.uid.clone().unwrap_or_default(),
            id: id.to_string(),
            reconciled_before,
        }
    }

    /// `Kind namespace/name`, the value of the owner annotation.
    pub fn describe(&self) -> String {
        format!("{} {}/{}", self.kind, self.namespace, self.name)
    }

    /// The labels that mark an object as this owner's: the cluster id and the owner's UID.
    pub fn labels(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            (labels::CLUSTER.to_string(), self.id.clone()),
            (labels::CLUSTER_UID.to_string(), self.uid.clone()),
        ])
    }
}

/// Whose an object named after a cluster id is, by what it carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ownership {
    /// It carries the owner's UID.
    Ours,
    /// An earlier version created it for a cluster with this id: it carries the cluster label
    /// with this id, and no UID.
    Legacy,
    /// Another cluster object's, or no cluster's at all: `holder` says whose, for messages.
    Foreign {
        /// Who holds it, e.g. `AWSCluster org-a/al9qy`, or why it is no cluster's.
        holder: String,
    },
}

/// The labels by which earlier versions marked an object as a cluster's: the original's
/// kvm-operator labelled its namespace `cluster=<id>` and its ClusterRoleBindings
/// `giantswarm.io/cluster-id=<id>`; aws-operator and this project's earlier versions
/// `giantswarm.io/cluster=<id>`.
pub const LEGACY_CLUSTER_LABELS: [&str; 3] = [labels::CLUSTER, "cluster", "giantswarm.io/cluster-id"];

/// Whose an object with `labels` and `annotations`, named after `owner`'s id, is.
pub fn ownership(
    labels: Option<&BTreeMap<String, String>>,
    annotations: Option<&BTreeMap<String, String>>,
    owner: &Owner,
) -> Ownership {
    let label = |key: &str| labels.and_then(|l| l.get(key)).map(String::as_str);
    match label(labels::CLUSTER_UID) {
        Some(uid) if uid == owner.uid => Ownership::Ours,
        Some(uid) => Ownership::Foreign {
            holder: annotations
                .and_then(|a| a.get(labels::CLUSTER_OWNER))
                .cloned()
                .unwrap_or_else(|| format!("the cluster object with UID {uid}")),
        },
        None if LEGACY_CLUSTER_LABELS.iter().any(|key| label(key) == Some(owner.id.as_str())) => Ownership::Legacy,
        None => {
            Ownership::Foreign { holder: "no cluster (it carries neither a cluster label nor a cluster UID)".into() }
        }
    }
}

/// What to do about the claim of `owner`'s id, given the namespace `<id>` as it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClaimState {
    /// No namespace `<id>`: the id is free.
    Free,
    /// The namespace is `owner`'s.
    Held,
    /// The namespace is an earlier version's for this cluster: label it with the UID.
    Adoptable,
    /// Someone else's, or one `owner` cannot prove is its own.
    InUse {
        /// Who holds it, or why it is not `owner`'s.
        holder: String,
    },
}

/// The claim's state, from the namespace `<id>`'s metadata (`None`: no namespace).
pub fn claim_state(
    namespace: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>,
    owner: &Owner,
) -> ClaimState {
    let Some(meta) = namespace else { return ClaimState::Free };
    match ownership(meta.labels.as_ref(), meta.annotations.as_ref(), owner) {
        Ownership::Ours => ClaimState::Held,
        Ownership::Legacy if owner.reconciled_before && meta.deletion_timestamp.is_none() => ClaimState::Adoptable,
        Ownership::Legacy => ClaimState::InUse {
            holder: "a cluster of an earlier version (the namespace carries this id but no owner; only a cluster the \
                     operator already reconciled may adopt it)"
                .into(),
        },
        Ownership::Foreign { holder } => ClaimState::InUse { holder },
    }
}

/// Whether `owner` may delete an object with `labels` and `annotations` built for its id:
/// it carries `owner`'s UID, or it is an earlier version's for this id and the claim is
/// `owner`'s (`claim_held`).
pub fn may_delete(
    labels: Option<&BTreeMap<String, String>>,
    annotations: Option<&BTreeMap<String, String>>,
    owner: &Owner,
    claim_held: bool,
) -> bool {
    match ownership(labels, annotations, owner) {
        Ownership::Ours => true,
        Ownership::Legacy => claim_held,
        Ownership::Foreign { .. } => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn owner(reconciled_before: bool) -> Owner {
        Owner {
            kind: "AWSCluster".into(),
            namespace: "org-acme".into(),
            name: "al9qy".into(),
            uid: "uid-acme".into(),
            id: "al9qy".into(),
            reconciled_before,
        }
    }

    fn meta(labels: &[(&str, &str)], annotations: &[(&str, &str)]) -> ObjectMeta {
        let map = |pairs: &[(&str, &str)]| Some(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect());
        ObjectMeta {
            name: Some("al9qy".into()),
            labels: map(labels),
            annotations: map(annotations),
            ..Default::default()
        }
    }

    #[test]
    fn ids_are_short_lower_case_alphanumeric_and_start_with_a_letter() {
        for id in ["al9qy", "a", "x7k2p", "abcdefghijk"] {
            assert!(check("metadata.name", id).is_ok(), "{id}");
        }
        for id in ["", "kube-system", "org-acme", "9abcd", "Al9qy", "abcdefghijkl", "a.b", "al9qy ", "calico-node"] {
            let e = check("metadata.labels[giantswarm.io/cluster]", id).expect_err(id);
            assert_eq!(e.field, "metadata.labels[giantswarm.io/cluster]");
            assert!(e.message.contains("starting with a letter"), "{e}");
        }
    }

    #[test]
    fn the_cel_rule_states_the_same_format() {
        assert!(NAME_RULE.contains(PATTERN));
        assert!(NAME_RULE.contains(&format!("<= {MAX_LENGTH}")));
    }

    #[test]
    fn the_claim_is_held_by_the_uid_it_carries() {
        let o = owner(false);
        assert_eq!(claim_state(None, &o), ClaimState::Free);
        let ours = meta(&[(labels::CLUSTER, "al9qy"), (labels::CLUSTER_UID, "uid-acme")], &[]);
        assert_eq!(claim_state(Some(&ours), &o), ClaimState::Held);
        let theirs = meta(
            &[(labels::CLUSTER, "al9qy"), (labels::CLUSTER_UID, "uid-evil")],
            &[(labels::CLUSTER_OWNER, "AWSCluster org-evil/al9qy")],
        );
        assert_eq!(claim_state(Some(&theirs), &o), ClaimState::InUse { holder: "AWSCluster org-evil/al9qy".into() });
    }

    #[test]
    fn a_namespace_that_belongs_to_no_cluster_is_never_claimed() {
        for labels in [&[][..], &[("kubernetes.io/metadata.name", "al9qy")][..], &[(labels::CLUSTER, "other")][..]] {
            let ns = meta(labels, &[]);
            assert!(matches!(claim_state(Some(&ns), &owner(true)), ClaimState::InUse { .. }), "{labels:?}");
        }
    }

    #[test]
    fn an_earlier_versions_namespace_is_adopted_only_by_a_cluster_the_operator_reconciled() {
        for label in LEGACY_CLUSTER_LABELS {
            let legacy = meta(&[(label, "al9qy")], &[]);
            assert_eq!(claim_state(Some(&legacy), &owner(true)), ClaimState::Adoptable);
            assert!(matches!(claim_state(Some(&legacy), &owner(false)), ClaimState::InUse { .. }));
        }
        let mut terminating = meta(&[(labels::CLUSTER, "al9qy")], &[]);
        terminating.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Default::default()));
        assert!(matches!(claim_state(Some(&terminating), &owner(true)), ClaimState::InUse { .. }));
    }

    #[test]
    fn only_what_carries_the_owners_uid_or_an_earlier_versions_label_under_a_held_claim_is_deleted() {
        let o = owner(true);
        let ours = meta(&[(labels::CLUSTER_UID, "uid-acme")], &[]);
        let legacy = meta(&[("cluster", "al9qy")], &[]);
        let theirs = meta(&[(labels::CLUSTER, "al9qy"), (labels::CLUSTER_UID, "uid-evil")], &[]);
        let nobodys = meta(&[("k8s-app", "calico-node")], &[]);
        assert!(may_delete(ours.labels.as_ref(), None, &o, false));
        assert!(may_delete(legacy.labels.as_ref(), None, &o, true));
        assert!(!may_delete(legacy.labels.as_ref(), None, &o, false));
        assert!(!may_delete(theirs.labels.as_ref(), None, &o, true));
        assert!(!may_delete(nobodys.labels.as_ref(), None, &o, true));
        assert!(!may_delete(None, None, &o, true));
    }
}
