//! Version bundles: an operator's declaration "version X of me provides components A@a, B@b".
//!
//! These are the types of `giantswarm/versionbundle` that still cross process boundaries: the
//! bundles an operator publishes on its version endpoint (`{"version_bundles": [...]}`) and that
//! release tooling collects. The JSON shapes match the Go types field for field:
//!
//! - [`Bundle`]: `changelogs` (2017–2020 bundles; left out when empty, as newer bundles have no
//!   such field), `components`, `name` (the authority, e.g. `aws-operator`), `provider` (left out
//!   when empty, Go's `omitempty`) and `version`;
//! - [`Component`]: `name`, `version`;
//! - [`Changelog`]: `component` and `componentVersion` (both `omitempty`), `description`, `kind`,
//!   `urls`, `version` (`omitempty`).
//!
//! Go writes nil lists as `null`; they are read as empty lists and written as `[]`.
//!
//! Validation keeps the rules that still matter (`Bundle.Validate`, `Component.Validate`,
//! `Changelog.Validate`, `Bundles.Validate`): names, descriptions and versions are non-empty,
//! versions are semantic versions, changelog kinds are one of six, and a list of bundles is
//! non-empty without two bundles of the same (name, provider, version). Rules of retired eras
//! are left out: at least one changelog (dropped upstream in 2020), dependencies, `deprecated`,
//! `wip` and `time` (dropped in 2018). Errors name the offending field by its JSON path, e.g.
//! `bundles[1].components[0].version`.
//!
//! ```
//! use apis::versionbundle::{Bundle, Upgrade};
//!
//! let old: Bundle = serde_json::from_str(
//!     r#"{"name": "kvm-operator", "version": "3.9.1", "components": [{"name": "kubernetes", "version": "1.16.3"}]}"#,
//! ).unwrap();
//! let new = Bundle { version: "3.10.0".into(), ..old.clone() };
//! assert_eq!(old.validate(), Ok(()));
//! assert_eq!(old.id(), "kvm-operator::3.9.1");
//! assert_eq!(old.upgrade_to(&new), Ok(Some(Upgrade::Minor)));
//! ```

use std::fmt;
use std::str::FromStr;

use semver::Version;
use serde::{Deserialize, Serialize};

use crate::go::null_as_default;

/// One version of one authority (operator) and the components it provides.
///
/// Every field of a published bundle must stay unchanged forever: consumers key on it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Bundle {
    /// What changed in this version (bundles of 2017–2020; newer bundles have none).
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub changelogs: Vec<Changelog>,
    /// The components this version provides.
    #[serde(default, deserialize_with = "null_as_default")]
    pub components: Vec<Component>,
    /// The authority, e.g. `aws-operator`.
    #[serde(default)]
    pub name: String,
    /// The infrastructure provider the bundle is specific to (`aws`, `kvm`), if any.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub provider: String,
    /// The semantic version of the authority.
    #[serde(default)]
    pub version: String,
}

/// A component an authority provides, e.g. `kubernetes` `1.16.3`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Component {
    /// The component name.
    #[serde(default)]
    pub name: String,
    /// The component's semantic version.
    #[serde(default)]
    pub version: String,
}

/// One changelog entry of a bundle.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Changelog {
    /// The component the entry is about, possibly one of another authority.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub component: String,
    /// The upstream version of that component.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub component_version: String,
    /// What changed, for people.
    #[serde(default)]
    pub description: String,
    /// What kind of change it is.
    pub kind: ChangelogKind,
    /// Links to more information: upstream changelogs, pull requests.
    #[serde(default, deserialize_with = "null_as_default")]
    pub urls: Vec<String>,
    /// The Giant Swarm version of the component.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub version: String,
}

/// The kind of a changelog entry (the sections of keepachangelog.com).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[serde(rename_all = "lowercase")]
pub enum ChangelogKind {
    /// A new feature.
    Added,
    /// A change of existing behaviour.
    Changed,
    /// A feature that will be removed.
    Deprecated,
    /// A bug fix.
    Fixed,
    /// A feature that was removed.
    Removed,
    /// A fix for a vulnerability.
    Security,
}

impl ChangelogKind {
    /// Every kind, in the upstream order.
    pub const ALL: [ChangelogKind; 6] = [
        ChangelogKind::Added,
        ChangelogKind::Changed,
        ChangelogKind::Deprecated,
        ChangelogKind::Fixed,
        ChangelogKind::Removed,
        ChangelogKind::Security,
    ];

    /// The wire value, e.g. `fixed`.
    pub fn as_str(self) -> &'static str {
        match self {
            ChangelogKind::Added => "added",
            ChangelogKind::Changed => "changed",
            ChangelogKind::Deprecated => "deprecated",
            ChangelogKind::Fixed => "fixed",
            ChangelogKind::Removed => "removed",
            ChangelogKind::Security => "security",
        }
    }
}

impl fmt::Display for ChangelogKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string that is not a changelog kind.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a changelog kind; expected one of added, changed, deprecated, fixed, removed, security")]
pub struct UnknownChangelogKind(pub String);

impl FromStr for ChangelogKind {
    type Err = UnknownChangelogKind;

    /// Case-insensitive, as upstream `NewKind`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let lower = s.to_ascii_lowercase();
        ChangelogKind::ALL.into_iter().find(|k| k.as_str() == lower).ok_or_else(|| UnknownChangelogKind(s.to_string()))
    }
}

/// Why a bundle, or a list of bundles, is invalid. Fields are named by their JSON path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValidationError {
    /// A required field is empty.
    #[error("{field} must not be empty")]
    Empty {
        /// The JSON path of the field, e.g. `components[0].name`.
        field: String,
    },
    /// A version field is not a semantic version.
    #[error("{field} {value:?} is not a semantic version: {reason}")]
    NotSemver {
        /// The JSON path of the field.
        field: String,
        /// The value found.
        value: String,
        /// What the parser objected to.
        reason: String,
    },
    /// A list of bundles is empty.
    #[error("the list of version bundles must not be empty")]
    NoBundles,
    /// Two bundles of a list have the same name, provider and version.
    #[error("bundles[{index}] repeats the bundle {id} of bundles[{first}]")]
    DuplicateBundle {
        /// The position of the repetition.
        index: usize,
        /// The position of the first bundle with that identity.
        first: usize,
        /// The identity, `name:provider:version`.
        id: String,
    },
    /// Two bundles of different authorities were compared.
    #[error("bundles of different authorities cannot be compared: {this:?} and {other:?}")]
    DifferentAuthorities {
        /// The name of the bundle compared from.
        this: String,
        /// The name of the bundle compared to.
        other: String,
    },
}

/// How a newer bundle differs from an older one of the same authority: by the highest semver
/// part that grew.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Upgrade {
    /// The major version grew.
    Major,
    /// The minor version grew, the major did not change.
    Minor,
    /// The patch version grew, major and minor did not change.
    Patch,
}

impl Component {
    /// Upstream `Component.Validate`: a name, and a semantic version.
    pub fn validate(&self) -> Result<(), ValidationError> {
        self.validate_at("")
    }

    fn validate_at(&self, path: &str) -> Result<(), ValidationError> {
        non_empty(&self.name, path, "name")?;
        parse_version(&self.version, path, "version")?;
        Ok(())
    }
}

impl Changelog {
    /// Upstream `Changelog.Validate`: a component and a description. The kind is checked when the
    /// entry is read, since [`ChangelogKind`] has no invalid values.
    pub fn validate(&self) -> Result<(), ValidationError> {
        self.validate_at("")
    }

    fn validate_at(&self, path: &str) -> Result<(), ValidationError> {
        non_empty(&self.component, path, "component")?;
        non_empty(&self.description, path, "description")?;
        Ok(())
    }
}

impl Bundle {
    /// The identity of the bundle, `name:provider:version` with each part trimmed (upstream
    /// `ID`). Bundles without a provider have an empty middle part.
    pub fn id(&self) -> String {
        format!("{}:{}:{}", self.name.trim(), self.provider.trim(), self.version.trim())
    }

    /// The parsed version.
    pub fn semver(&self) -> Result<Version, ValidationError> {
        parse_version(&self.version, "", "version")
    }

    /// Upstream `Bundle.Validate`: every changelog and component valid, a name, a semantic
    /// version. Returns the first problem, in field order.
    pub fn validate(&self) -> Result<(), ValidationError> {
        self.validate_at("")
    }

    fn validate_at(&self, path: &str) -> Result<(), ValidationError> {
        for (i, changelog) in self.changelogs.iter().enumerate() {
            changelog.validate_at(&join(path, &format!("changelogs[{i}]")))?;
        }
        for (i, component) in self.components.iter().enumerate() {
            component.validate_at(&join(path, &format!("components[{i}]")))?;
        }
        non_empty(&self.name, path, "name")?;
        parse_version(&self.version, path, "version")?;
        Ok(())
    }

    /// How `newer` upgrades this bundle (upstream `IsMajorUpgrade`, `IsMinorUpgrade`,
    /// `IsPatchUpgrade` in one): `None` when `newer` is not newer, or differs only in its
    /// pre-release or build part. Both must be valid and of the same authority.
    pub fn upgrade_to(&self, newer: &Bundle) -> Result<Option<Upgrade>, ValidationError> {
        self.validate()?;
        newer.validate()?;
        if self.name != newer.name {
            return Err(ValidationError::DifferentAuthorities { this: self.name.clone(), other: newer.name.clone() });
        }
        let (from, to) = (self.semver()?, newer.semver()?);
        if to <= from {
            return Ok(None);
        }
        Ok(if to.major > from.major {
            Some(Upgrade::Major)
        } else if to.minor > from.minor {
            Some(Upgrade::Minor)
        } else if to.patch > from.patch {
            Some(Upgrade::Patch)
        } else {
            None
        })
    }
}

/// Upstream `Bundles.Validate`, as of today: a non-empty list without two bundles of the same
/// identity ([`Bundle::id`]), each of them valid.
pub fn validate_bundles(bundles: &[Bundle]) -> Result<(), ValidationError> {
    if bundles.is_empty() {
        return Err(ValidationError::NoBundles);
    }
    let ids: Vec<String> = bundles.iter().map(Bundle::id).collect();
    for (index, id) in ids.iter().enumerate() {
        if let Some(first) = ids[..index].iter().position(|earlier| earlier == id) {
            return Err(ValidationError::DuplicateBundle { index, first, id: id.clone() });
        }
    }
    for (i, bundle) in bundles.iter().enumerate() {
        bundle.validate_at(&format!("bundles[{i}]"))?;
    }
    Ok(())
}

/// The bundle of authority `name` with the highest version (upstream `GetNewestBundle`, and
/// `GetNewestBundleForProvider` when `provider` is given). Bundles whose version does not parse
/// are skipped, where upstream panicked while sorting.
pub fn newest_bundle<'a>(bundles: &'a [Bundle], name: &str, provider: Option<&str>) -> Option<&'a Bundle> {
    bundles
        .iter()
        .filter(|b| b.name == name && provider.is_none_or(|p| b.provider == p))
        .filter_map(|b| b.semver().ok().map(|v| (v, b)))
        .max_by(|(a, _), (b, _)| a.cmp(b))
        .map(|(_, b)| b)
}

fn join(path: &str, field: &str) -> String {
    if path.is_empty() { field.to_string() } else { format!("{path}.{field}") }
}

fn non_empty(value: &str, path: &str, field: &str) -> Result<(), ValidationError> {
    if value.is_empty() {
        return Err(ValidationError::Empty { field: join(path, field) });
    }
    Ok(())
}

fn parse_version(value: &str, path: &str, field: &str) -> Result<Version, ValidationError> {
    non_empty(value, path, field)?;
    Version::parse(value).map_err(|e| ValidationError::NotSemver {
        field: join(path, field),
        value: value.to_string(),
        reason: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn bundle(name: &str, provider: &str, version: &str) -> Bundle {
        Bundle {
            changelogs: vec![],
            components: vec![Component { name: "kubernetes".into(), version: "1.16.3".into() }],
            name: name.into(),
            provider: provider.into(),
            version: version.into(),
        }
    }

    fn changelog() -> Changelog {
        Changelog {
            component: "kvm-operator".into(),
            component_version: String::new(),
            description: "Bump Kubernetes to 1.16.3.".into(),
            kind: ChangelogKind::Changed,
            urls: vec!["https://github.com/giantswarm/kvm-operator/pull/800".into()],
            version: String::new(),
        }
    }

    fn field_of(result: Result<(), ValidationError>) -> Option<String> {
        match result {
            Err(ValidationError::Empty { field }) | Err(ValidationError::NotSemver { field, .. }) => Some(field),
            _ => None,
        }
    }

    #[test]
    fn reads_a_go_bundle_with_changelogs_and_nulls() -> Result<(), serde_json::Error> {
        let b: Bundle = serde_json::from_value(json!({
            "changelogs": [{
                "component": "kvm-operator",
                "description": "Bump Kubernetes to 1.16.3.",
                "kind": "changed",
                "urls": null
            }],
            "components": null,
            "name": "kvm-operator",
            "version": "3.9.1",
            "dependency": null,
            "wip": false
        }))?;
        assert_eq!(b.changelogs.len(), 1);
        assert!(b.changelogs[0].urls.is_empty());
        assert!(b.components.is_empty());
        assert_eq!(b.provider, "");
        assert_eq!(b.validate(), Ok(()));
        Ok(())
    }

    #[test]
    fn writes_the_go_shape() -> Result<(), serde_json::Error> {
        let plain = bundle("aws-operator", "", "9.0.0");
        assert_eq!(
            serde_json::to_value(&plain)?,
            json!({"components": [{"name": "kubernetes", "version": "1.16.3"}], "name": "aws-operator", "version": "9.0.0"})
        );
        let with_changelog = Bundle { changelogs: vec![changelog()], provider: "kvm".into(), ..plain };
        let value = serde_json::to_value(&with_changelog)?;
        assert_eq!(value["provider"], "kvm");
        assert_eq!(
            value["changelogs"],
            json!([{
                "component": "kvm-operator",
                "description": "Bump Kubernetes to 1.16.3.",
                "kind": "changed",
                "urls": ["https://github.com/giantswarm/kvm-operator/pull/800"]
            }])
        );
        let back: Bundle = serde_json::from_value(value)?;
        assert_eq!(back, with_changelog);
        Ok(())
    }

    #[test]
    fn changelog_kinds_are_the_six_of_upstream() {
        let kinds: Vec<_> = ChangelogKind::ALL.iter().map(|k| k.to_string()).collect();
        assert_eq!(kinds, ["added", "changed", "deprecated", "fixed", "removed", "security"]);
        assert_eq!("Security".parse::<ChangelogKind>(), Ok(ChangelogKind::Security));
        assert_eq!("FIXED".parse::<ChangelogKind>(), Ok(ChangelogKind::Fixed));
        assert_eq!("improved".parse::<ChangelogKind>(), Err(UnknownChangelogKind("improved".into())));
        // On the wire the kind is exact, as upstream validation compares it exactly.
        assert!(serde_json::from_value::<ChangelogKind>(json!("Fixed")).is_err());
        assert!(serde_json::from_value::<Changelog>(json!({"description": "x", "kind": "improved"})).is_err());
    }

    #[test]
    fn a_valid_bundle_validates() {
        assert_eq!(bundle("aws-operator", "aws", "9.0.0-alpha.1").validate(), Ok(()));
        assert_eq!(Bundle { changelogs: vec![changelog()], ..bundle("kvm-operator", "", "1.0.0") }.validate(), Ok(()));
    }

    #[test]
    fn bundle_errors_name_the_field() {
        let b = Bundle { name: String::new(), ..bundle("x", "", "1.0.0") };
        assert_eq!(b.validate(), Err(ValidationError::Empty { field: "name".into() }));
        let b = bundle("aws-operator", "", "");
        assert_eq!(field_of(b.validate()), Some("version".into()));
        let b = bundle("aws-operator", "", "v1.0.0");
        assert_eq!(field_of(b.validate()), Some("version".into()));
        let b = bundle("aws-operator", "", "1.0");
        assert!(matches!(b.validate(), Err(ValidationError::NotSemver { value, .. }) if value == "1.0"));
    }

    #[test]
    fn component_errors_name_the_component() {
        let mut b = bundle("aws-operator", "", "1.0.0");
        b.components.push(Component { name: "calico".into(), version: "3.10".into() });
        assert_eq!(field_of(b.validate()), Some("components[1].version".into()));
        b.components[1] = Component { name: String::new(), version: "3.10.1".into() };
        assert_eq!(field_of(b.validate()), Some("components[1].name".into()));
        assert_eq!(field_of(Component::default().validate()), Some("name".into()));
    }

    #[test]
    fn changelog_errors_name_the_entry() {
        let mut b = Bundle { changelogs: vec![changelog(), changelog()], ..bundle("kvm-operator", "", "1.0.0") };
        b.changelogs[1].component.clear();
        assert_eq!(field_of(b.validate()), Some("changelogs[1].component".into()));
        b.changelogs[1].component = "etcd".into();
        b.changelogs[1].description.clear();
        assert_eq!(field_of(b.validate()), Some("changelogs[1].description".into()));
    }

    #[test]
    fn error_messages_are_readable() {
        let err = bundle("aws-operator", "", "1.0").validate().err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.starts_with("version \"1.0\" is not a semantic version: "), "{err}");
        let err = Bundle { name: String::new(), ..bundle("x", "", "1.0.0") }.validate().err().map(|e| e.to_string());
        assert_eq!(err.as_deref(), Some("name must not be empty"));
    }

    #[test]
    fn ids_are_trimmed_and_keep_an_empty_provider() {
        assert_eq!(bundle(" aws-operator ", " aws", "9.0.0 ").id(), "aws-operator:aws:9.0.0");
        assert_eq!(bundle("kvm-operator", "", "3.9.1").id(), "kvm-operator::3.9.1");
    }

    #[test]
    fn a_list_of_bundles_must_not_be_empty_or_repeat_a_bundle() {
        assert_eq!(validate_bundles(&[]), Err(ValidationError::NoBundles));
        let ok = [bundle("aws-operator", "aws", "1.0.0"), bundle("aws-operator", "aws", "1.1.0")];
        assert_eq!(validate_bundles(&ok), Ok(()));
        // The same version for two providers, or of two authorities, is fine.
        let ok = [bundle("cluster-operator", "aws", "1.0.0"), bundle("cluster-operator", "kvm", "1.0.0")];
        assert_eq!(validate_bundles(&ok), Ok(()));
        let dup = [
            bundle("aws-operator", "aws", "1.0.0"),
            bundle("aws-operator", "aws", "1.1.0"),
            bundle("aws-operator ", "aws", "1.0.0"),
        ];
        assert_eq!(
            validate_bundles(&dup),
            Err(ValidationError::DuplicateBundle { index: 2, first: 0, id: "aws-operator:aws:1.0.0".into() })
        );
    }

    #[test]
    fn errors_in_a_list_name_the_bundle() {
        let mut list = [bundle("aws-operator", "aws", "1.0.0"), bundle("aws-operator", "aws", "1.1.0")];
        list[1].components[0].version = "latest".into();
        assert_eq!(field_of(validate_bundles(&list)), Some("bundles[1].components[0].version".into()));
    }

    #[test]
    fn upgrades_are_classified_by_the_highest_grown_part() {
        let from = bundle("aws-operator", "", "2.3.4");
        let to = |v: &str| bundle("aws-operator", "", v);
        assert_eq!(from.upgrade_to(&to("3.0.0")), Ok(Some(Upgrade::Major)));
        assert_eq!(from.upgrade_to(&to("3.4.5")), Ok(Some(Upgrade::Major)));
        assert_eq!(from.upgrade_to(&to("2.4.0")), Ok(Some(Upgrade::Minor)));
        assert_eq!(from.upgrade_to(&to("2.3.5")), Ok(Some(Upgrade::Patch)));
        // Not newer.
        assert_eq!(from.upgrade_to(&to("2.3.4")), Ok(None));
        assert_eq!(from.upgrade_to(&to("2.3.3")), Ok(None));
        assert_eq!(from.upgrade_to(&to("1.9.9")), Ok(None));
        // Newer only by pre-release: none of the three.
        assert_eq!(bundle("aws-operator", "", "2.3.4-rc.1").upgrade_to(&from), Ok(None));
        // Semver order, not string order.
        assert_eq!(to("1.9.0").upgrade_to(&to("1.10.0")), Ok(Some(Upgrade::Minor)));
    }

    #[test]
    fn upgrades_need_valid_bundles_of_one_authority() {
        let from = bundle("aws-operator", "", "1.0.0");
        assert_eq!(
            from.upgrade_to(&bundle("kvm-operator", "", "2.0.0")),
            Err(ValidationError::DifferentAuthorities { this: "aws-operator".into(), other: "kvm-operator".into() })
        );
        assert_eq!(field_of(from.upgrade_to(&bundle("aws-operator", "", "two")).map(|_| ())), Some("version".into()));
    }

    #[test]
    fn newest_bundle_by_semver_per_authority_and_provider() {
        let bundles = [
            bundle("aws-operator", "aws", "1.9.0"),
            bundle("aws-operator", "aws", "1.10.0"),
            bundle("aws-operator", "aws", "not-a-version"),
            bundle("aws-operator", "aws", "1.10.0-rc.1"),
            bundle("cluster-operator", "kvm", "3.0.0"),
            bundle("cluster-operator", "aws", "2.0.0"),
        ];
        assert_eq!(newest_bundle(&bundles, "aws-operator", None).map(|b| b.version.as_str()), Some("1.10.0"));
        assert_eq!(newest_bundle(&bundles, "cluster-operator", None).map(|b| b.version.as_str()), Some("3.0.0"));
        assert_eq!(newest_bundle(&bundles, "cluster-operator", Some("aws")).map(|b| b.version.as_str()), Some("2.0.0"));
        assert_eq!(newest_bundle(&bundles, "kvm-operator", None), None);
        assert_eq!(newest_bundle(&bundles, "cluster-operator", Some("azure")), None);
    }
}
