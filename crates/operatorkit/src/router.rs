//! The release router: which resource set handles an object. Pure and sans-I/O.
//!
//! Giant Swarm clusters carry a `release.giantswarm.io/version: X.Y.Z` label naming the
//! cluster-scoped `Release` `vX.Y.Z`, which lists a version for every component. An operator
//! reads the version of the component named like itself and hands the object to the one
//! resource set whose semver requirement matches (operatorkit's 2018 `ResourceRouter`, with the
//! version taken from the Release instead of a spec field).
//!
//! * Exactly one set matches: [`Route::Matched`].
//! * No set matches: the object belongs to another version of this operator (deployed side by
//!   side). [`Route::NoMatch`]: the controller writes nothing, not even its finalizer, logs at
//!   debug level and counts it — during deletion too, so the other version can finish
//!   (operatorkit #328).
//! * The label or the Release is missing, or the Release lacks this component:
//!   [`Route::Unroutable`]. The controller emits a Warning event and reports the problem to the
//!   operator's status hook; it changes nothing else.
//!
//! Upgrades are relabellings: the next reconcile resolves the new Release and picks the new set.
//! Controller names (and so finalizers) do not depend on the set, so the object stays under the
//! same finalizer.
//!
//! # Objects without the release label: a version of their own
//!
//! Kinds older than Releases name the operator version that runs them in the object itself
//! (`AWSConfig`s and `KVMConfig`s: `spec.versionBundle.version`, later also the label
//! `<operator>.giantswarm.io/version`). A controller may be given a *version source*
//! ([`ObjectVersion`], via `ControllerBuilder::version_source`) that reads it. When the object
//! has no (or an empty) release label and the source finds a version, [`Router::route_object`]
//! routes by that version exactly as by a Release's component version: the set whose
//! requirement matches it, and [`Route::NoMatch`] when none does (another operator version's
//! object: nothing is written, not even the finalizer). The Release the set needs is then the
//! one Release whose component named like the operator has that version; none, several, or a
//! version that is not a semantic version make the object [`Route::Unroutable`], with a message
//! naming the field and the fix. The release label, when present, always wins, so labelling
//! such an object later changes nothing for a consistent object and resolves an ambiguity.
//! Upgrades of such objects are changes of the version field: the next reconcile routes to the
//! new version's set (or leaves the object to the operator version that has one), under the
//! same finalizer. The `from` of [`Route::Matched`] says where the version came from.
//!
//! In [`Routing::Legacy`] mode no Release is read: the watch is filtered server-side on
//! `<operator>.giantswarm.io/version=<own version>` and the set matching the operator's own
//! version handles every object that carries that label.
//!
//! # Overlap is decided exactly, at build time
//!
//! Two sets whose requirements could both match one version would make routing ambiguous, so
//! [`Router::new`] refuses them and names both. A [`semver::VersionReq`] is an AND of
//! comparators, and (apart from pre-releases, below) every comparator accepts one interval of the
//! total order of versions, so a requirement accepts the intersection of its comparators'
//! intervals: again one interval. Two requirements overlap iff their intervals intersect in a
//! version both accept. [`overlap`] computes that intersection and returns the smallest such
//! version as a witness, which is then checked with [`VersionReq::matches`] itself.
//!
//! Pre-releases follow the semver crate's (and Cargo's) matching rule: a version with a
//! pre-release tag, such as `2.0.0-rc.1`, matches a requirement only if one of the requirement's
//! comparators names the same `major.minor.patch` *with* a pre-release tag. Some comparators
//! also exclude pre-releases outright (`=1.2`, `~1.2`, `1.2.*`, and the same-minor part of
//! `>=1.2`). So release versions and pre-release versions are accounted for separately: each
//! comparator contributes one interval for releases and one for pre-releases, and two
//! requirements overlap through a pre-release only if both name its `major.minor.patch` with a
//! pre-release tag. `>=1.0.0, <2.0.0` and `>=2.0.0-rc.1` therefore do not overlap: `2.0.0-rc.1`
//! is below the second's releases, and the first never admits pre-releases.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;

use apis::labels;
use apis::release::{Release, release_name};
use kube::runtime::reflector::{ObjectRef, Store};
use semver::{BuildMetadata, Comparator, Op, Prerelease, Version, VersionReq};

use crate::error::BuildError;

/// Where the version that selects a resource set comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Routing {
    /// From the `Release` named by the object's `release.giantswarm.io/version` label.
    Release,
    /// From the operator's own version; objects are selected server-side by the label
    /// `<operator>.giantswarm.io/version=<version>`.
    Legacy {
        /// This operator's version.
        version: Version,
    },
}

/// Looks Releases up by name, e.g. in a reflector cache.
pub trait ReleaseLookup {
    /// The Release called `name` (`v20.0.0`), if known.
    fn release(&self, name: &str) -> Option<Arc<Release>>;

    /// Every known Release (to find those giving a component some version).
    fn all_releases(&self) -> Vec<Arc<Release>>;
}

impl ReleaseLookup for Store<Release> {
    fn release(&self, name: &str) -> Option<Arc<Release>> {
        self.get(&ObjectRef::new(name))
    }

    fn all_releases(&self) -> Vec<Arc<Release>> {
        self.state()
    }
}

impl ReleaseLookup for HashMap<String, Arc<Release>> {
    fn release(&self, name: &str) -> Option<Arc<Release>> {
        self.get(name).cloned()
    }

    fn all_releases(&self) -> Vec<Arc<Release>> {
        self.values().cloned().collect()
    }
}

impl ReleaseLookup for BTreeMap<String, Arc<Release>> {
    fn release(&self, name: &str) -> Option<Arc<Release>> {
        self.get(name).cloned()
    }

    fn all_releases(&self) -> Vec<Arc<Release>> {
        self.values().cloned().collect()
    }
}

/// No Releases at all (legacy mode).
impl ReleaseLookup for () {
    fn release(&self, _: &str) -> Option<Arc<Release>> {
        None
    }

    fn all_releases(&self) -> Vec<Arc<Release>> {
        Vec::new()
    }
}

/// The operator version an object names itself, read by a controller's version source: used
/// when the object has no release label (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectVersion {
    /// Where it was read, as the user writes it: `spec.versionBundle.version`,
    /// `metadata.labels[aws-operator.giantswarm.io/version]`.
    pub field: String,
    /// The value found (not yet parsed).
    pub version: String,
}

/// Where the component version that routed an object came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VersionFrom {
    /// The component's version in the Release named by the `release.giantswarm.io/version` label.
    ReleaseLabel {
        /// The Release.
        release: String,
    },
    /// A field of the object ([`ObjectVersion`]); `release` is the one Release giving the
    /// component that version.
    Object {
        /// The field.
        field: String,
        /// The Release.
        release: String,
    },
    /// The operator's own version ([`Routing::Legacy`]).
    Own,
}

impl fmt::Display for VersionFrom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VersionFrom::ReleaseLabel { release } => {
                write!(f, "Release {release}, named by label {}", labels::RELEASE_VERSION)
            }
            VersionFrom::Object { field, release } => write!(
                f,
                "{field} (the object has no {} label); Release {release} gives the component this version",
                labels::RELEASE_VERSION
            ),
            VersionFrom::Own => write!(f, "the operator's own version"),
        }
    }
}

/// Why an object cannot be routed. Shown as the reason and message of a Warning event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unroutable {
    /// The object has no (or an empty) `release.giantswarm.io/version` label.
    MissingLabel,
    /// The Release the label names does not exist.
    ReleaseNotFound {
        /// The Release's name.
        release: String,
    },
    /// The Release has no component named like this operator.
    ComponentMissing {
        /// The Release's name.
        release: String,
        /// The component looked for.
        component: String,
    },
    /// The component's version is not a semantic version.
    InvalidComponentVersion {
        /// The Release's name.
        release: String,
        /// The component.
        component: String,
        /// The version found.
        version: String,
    },
    /// The object has no release label, and the version it names itself is not a semantic
    /// version.
    InvalidObjectVersion {
        /// The field read.
        field: String,
        /// The component (operator) it names a version of.
        component: String,
        /// The value found.
        version: String,
    },
    /// The object has no release label, and no Release gives the component the version the
    /// object names.
    NoReleaseForVersion {
        /// The field read.
        field: String,
        /// The component.
        component: String,
        /// The version.
        version: String,
    },
    /// The object has no release label, and several Releases give the component the version
    /// the object names.
    AmbiguousRelease {
        /// The field read.
        field: String,
        /// The component.
        component: String,
        /// The version.
        version: String,
        /// The Releases, sorted by name.
        releases: Vec<String>,
    },
}

impl Unroutable {
    /// The event reason.
    pub fn reason(&self) -> &'static str {
        match self {
            Unroutable::MissingLabel => "ReleaseLabelMissing",
            Unroutable::ReleaseNotFound { .. } => "ReleaseNotFound",
            Unroutable::ComponentMissing { .. } => "ComponentNotInRelease",
            Unroutable::InvalidComponentVersion { .. } => "InvalidComponentVersion",
            Unroutable::InvalidObjectVersion { .. } => "InvalidVersion",
            Unroutable::NoReleaseForVersion { .. } => "NoReleaseForVersion",
            Unroutable::AmbiguousRelease { .. } => "AmbiguousRelease",
        }
    }
}

impl fmt::Display for Unroutable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unroutable::MissingLabel => write!(
                f,
                "the object has no {} label; set it to the release this object runs (e.g. 20.1.0)",
                labels::RELEASE_VERSION
            ),
            Unroutable::ReleaseNotFound { release } => {
                write!(f, "Release {release} does not exist; create it or fix the {} label", labels::RELEASE_VERSION)
            }
            Unroutable::ComponentMissing { release, component } => {
                write!(
                    f,
                    "Release {release} has no component {component}, so no version of {component} handles this object"
                )
            }
            Unroutable::InvalidComponentVersion { release, component, version } => {
                write!(
                    f,
                    "Release {release} gives component {component} the version {version:?}, which is not a semantic version"
                )
            }
            Unroutable::InvalidObjectVersion { field, component, version } => write!(
                f,
                "{field} is {version:?}, which is not a semantic version: set it to the {component} version that runs this object (e.g. 4.7.0), or set the {} label to the release it runs",
                labels::RELEASE_VERSION
            ),
            Unroutable::NoReleaseForVersion { field, component, version } => write!(
                f,
                "{field} names {component} {version}, but no Release has component {component} at version {version}: create that Release, or set the {} label to the release this object runs",
                labels::RELEASE_VERSION
            ),
            Unroutable::AmbiguousRelease { field, component, version, releases } => write!(
                f,
                "{field} names {component} {version}, which the Releases {} all give {component}: set the {} label to the one this object runs",
                releases.join(", "),
                labels::RELEASE_VERSION
            ),
        }
    }
}

/// The router's decision for one object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    /// This set handles the object.
    Matched {
        /// Index of the set, in configuration order.
        set: usize,
        /// The component version that selected it.
        version: Version,
        /// The Release read (`None` in legacy mode).
        release: Option<String>,
        /// Where the version came from.
        from: VersionFrom,
    },
    /// Another version of this operator handles the object.
    NoMatch {
        /// The component version the object asks for, when known.
        version: Option<Version>,
        /// The Release read, if any.
        release: Option<String>,
    },
    /// The object cannot be routed; see [`Unroutable`].
    Unroutable(Unroutable),
}

/// Decides which resource set handles an object. Built once; routing is a pure function of the
/// object's labels and the Releases.
#[derive(Clone, Debug)]
pub struct Router {
    component: String,
    routing: Routing,
    sets: Vec<(String, VersionReq)>,
    /// Legacy mode: the set for the own version, decided at build time.
    legacy_set: Option<usize>,
}

impl Router {
    /// A router for the operator `component` over `sets` (name, requirement), in order.
    ///
    /// Fails if two sets share a name or overlap, or, in legacy mode, if no set handles the own
    /// version.
    pub fn new(
        component: impl Into<String>,
        routing: Routing,
        sets: impl IntoIterator<Item = (String, VersionReq)>,
    ) -> Result<Self, BuildError> {
        let component = component.into();
        if component.is_empty() {
            return Err(BuildError::MissingOperator);
        }
        let sets: Vec<_> = sets.into_iter().collect();
        if sets.is_empty() {
            return Err(BuildError::NoResourceSets);
        }
        for (i, (name, req)) in sets.iter().enumerate() {
            for (other, other_req) in &sets[i + 1..] {
                if name == other {
                    return Err(BuildError::DuplicateSetName(name.clone()));
                }
                if let Some(witness) = overlap(req, other_req) {
                    return Err(BuildError::OverlappingSets {
                        first: name.clone(),
                        first_requirement: req.to_string(),
                        second: other.clone(),
                        second_requirement: other_req.to_string(),
                        witness: witness.to_string(),
                    });
                }
            }
        }
        let legacy_set = match &routing {
            Routing::Release => None,
            Routing::Legacy { version } => Some(
                sets.iter()
                    .position(|(_, req)| req.matches(version))
                    .ok_or_else(|| BuildError::NoSetForOwnVersion(version.to_string()))?,
            ),
        };
        Ok(Self { component, routing, sets, legacy_set })
    }

    /// The component (operator) name.
    pub fn component(&self) -> &str {
        &self.component
    }

    /// The routing mode.
    pub fn routing(&self) -> &Routing {
        &self.routing
    }

    /// The name of set `index`.
    pub fn set_name(&self, index: usize) -> &str {
        self.sets.get(index).map(|(n, _)| n.as_str()).unwrap_or("")
    }

    /// The server-side label selector that legacy mode watches with.
    pub fn legacy_selector(&self) -> Option<String> {
        match &self.routing {
            Routing::Release => None,
            Routing::Legacy { version } => {
                Some(format!("{}={version}", labels::operator_version_label(&self.component)))
            }
        }
    }

    /// Route an object with these labels.
    pub fn route(&self, object_labels: &BTreeMap<String, String>, releases: &impl ReleaseLookup) -> Route {
        self.route_object(object_labels, None, releases)
    }

    /// Route an object with these labels that names `object_version` itself (read by the
    /// controller's version source): in release mode, an object without (or with an empty)
    /// release label is routed by that version (module docs). Legacy mode ignores it.
    pub fn route_object(
        &self,
        object_labels: &BTreeMap<String, String>,
        object_version: Option<&ObjectVersion>,
        releases: &impl ReleaseLookup,
    ) -> Route {
        let labelled = object_labels.get(labels::RELEASE_VERSION).is_some_and(|v| !v.trim().is_empty());
        if let (Routing::Release, false, Some(own)) = (&self.routing, labelled, object_version) {
            return self.route_by_object_version(own, releases);
        }
        match &self.routing {
            Routing::Legacy { version } => {
                let label = labels::operator_version_label(&self.component);
                let own = object_labels.get(&label).is_some_and(|v| v.trim_start_matches('v') == version.to_string());
                match (own, self.legacy_set) {
                    (true, Some(set)) => {
                        Route::Matched { set, version: version.clone(), release: None, from: VersionFrom::Own }
                    }
                    _ => Route::NoMatch {
                        version: object_labels.get(&label).and_then(|v| Version::parse(v.trim_start_matches('v')).ok()),
                        release: None,
                    },
                }
            }
            Routing::Release => {
                let Some(label) = object_labels.get(labels::RELEASE_VERSION).filter(|v| !v.trim().is_empty()) else {
                    return Route::Unroutable(Unroutable::MissingLabel);
                };
                let name = release_name(label.trim());
                let Some(release) = releases.release(&name) else {
                    return Route::Unroutable(Unroutable::ReleaseNotFound { release: name });
                };
                let Some(raw) = release.component_version(&self.component) else {
                    return Route::Unroutable(Unroutable::ComponentMissing {
                        release: name,
                        component: self.component.clone(),
                    });
                };
                let Ok(version) = Version::parse(raw.trim_start_matches('v')) else {
                    return Route::Unroutable(Unroutable::InvalidComponentVersion {
                        release: name,
                        component: self.component.clone(),
                        version: raw.to_string(),
                    });
                };
                // Sets are disjoint (checked at build time), so the first match is the only one.
                match self.sets.iter().position(|(_, req)| req.matches(&version)) {
                    Some(set) => Route::Matched {
                        set,
                        version,
                        from: VersionFrom::ReleaseLabel { release: name.clone() },
                        release: Some(name),
                    },
                    None => Route::NoMatch { version: Some(version), release: Some(name) },
                }
            }
        }
    }

    /// Release mode, no release label: the object's own version picks the set, the one Release
    /// giving the component that version is the object's Release.
    fn route_by_object_version(&self, own: &ObjectVersion, releases: &impl ReleaseLookup) -> Route {
        let raw = own.version.trim();
        let Ok(version) = Version::parse(raw.trim_start_matches('v')) else {
            return Route::Unroutable(Unroutable::InvalidObjectVersion {
                field: own.field.clone(),
                component: self.component.clone(),
                version: own.version.clone(),
            });
        };
        // Another operator version's object: decided before any Release is looked at, so that
        // such an object is left alone even where this process knows none of its Releases.
        let Some(set) = self.sets.iter().position(|(_, req)| req.matches(&version)) else {
            return Route::NoMatch { version: Some(version), release: None };
        };
        let mut names: Vec<String> = releases
            .all_releases()
            .iter()
            .filter(|r| {
                r.component_version(&self.component)
                    .and_then(|v| Version::parse(v.trim().trim_start_matches('v')).ok())
                    .is_some_and(|v| v == version)
            })
            .filter_map(|r| r.metadata.name.clone())
            .collect();
        names.sort();
        match names.len() {
            0 => Route::Unroutable(Unroutable::NoReleaseForVersion {
                field: own.field.clone(),
                component: self.component.clone(),
                version: version.to_string(),
            }),
            1 => {
                let release = names.remove(0);
                Route::Matched {
                    set,
                    version,
                    from: VersionFrom::Object { field: own.field.clone(), release: release.clone() },
                    release: Some(release),
                }
            }
            _ => Route::Unroutable(Unroutable::AmbiguousRelease {
                field: own.field.clone(),
                component: self.component.clone(),
                version: version.to_string(),
                releases: names,
            }),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Exact overlap of two requirements.

/// One end of an interval of versions.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Bound {
    Unbounded,
    Included(Version),
    Excluded(Version),
}

/// A non-empty-or-empty interval `lo .. hi` of the total order of versions.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Interval {
    lo: Bound,
    hi: Bound,
}

impl Interval {
    const ALL: Interval = Interval { lo: Bound::Unbounded, hi: Bound::Unbounded };

    fn new(lo: Bound, hi: Bound) -> Option<Interval> {
        Some(Interval { lo, hi })
    }

    fn intersect(&self, other: &Interval) -> Interval {
        Interval { lo: tighter_lower(&self.lo, &other.lo), hi: tighter_upper(&self.hi, &other.hi) }
    }

    fn admits_from_above(&self, v: &Version) -> bool {
        match &self.hi {
            Bound::Unbounded => true,
            Bound::Included(h) => v <= h,
            Bound::Excluded(h) => v < h,
        }
    }

    /// The smallest release version (no pre-release) in the interval.
    fn smallest_release(&self) -> Option<Version> {
        let candidate = match &self.lo {
            Bound::Unbounded => Some(Version::new(0, 0, 0)),
            Bound::Included(v) => Some(triple(v)),
            Bound::Excluded(v) if v.pre.is_empty() => release_after(v),
            // A release x.y.z is above all of its own pre-releases.
            Bound::Excluded(v) => Some(triple(v)),
        }?;
        self.admits_from_above(&candidate).then_some(candidate)
    }

    /// The smallest pre-release of `major.minor.patch` = `t` in the interval.
    fn smallest_prerelease_of(&self, t: &Version) -> Option<Version> {
        let floor = floor(t.major, t.minor, t.patch);
        let candidate = match &self.lo {
            Bound::Unbounded => Some(floor),
            Bound::Included(v) | Bound::Excluded(v) if triple(v) < *t => Some(floor),
            Bound::Included(v) if triple(v) == *t && !v.pre.is_empty() => Some(v.clone()),
            Bound::Excluded(v) if triple(v) == *t && !v.pre.is_empty() => {
                // The immediate successor of a pre-release p is p.0: nothing sorts between them.
                let mut next = v.clone();
                next.pre = Prerelease::new(&format!("{}.0", v.pre)).ok()?;
                Some(next)
            }
            _ => None,
        }?;
        self.admits_from_above(&candidate).then_some(candidate)
    }
}

fn tighter_lower(a: &Bound, b: &Bound) -> Bound {
    match (a, b) {
        (Bound::Unbounded, x) | (x, Bound::Unbounded) => x.clone(),
        (Bound::Included(x), Bound::Included(y)) => Bound::Included(x.max(y).clone()),
        (Bound::Excluded(x), Bound::Excluded(y)) => Bound::Excluded(x.max(y).clone()),
        (Bound::Included(i), Bound::Excluded(e)) | (Bound::Excluded(e), Bound::Included(i)) => {
            if i > e {
                Bound::Included(i.clone())
            } else {
                Bound::Excluded(e.clone())
            }
        }
    }
}

fn tighter_upper(a: &Bound, b: &Bound) -> Bound {
    match (a, b) {
        (Bound::Unbounded, x) | (x, Bound::Unbounded) => x.clone(),
        (Bound::Included(x), Bound::Included(y)) => Bound::Included(x.min(y).clone()),
        (Bound::Excluded(x), Bound::Excluded(y)) => Bound::Excluded(x.min(y).clone()),
        (Bound::Included(i), Bound::Excluded(e)) | (Bound::Excluded(e), Bound::Included(i)) => {
            if i < e {
                Bound::Included(i.clone())
            } else {
                Bound::Excluded(e.clone())
            }
        }
    }
}

/// `major.minor.patch` of `v`, as a release.
fn triple(v: &Version) -> Version {
    Version::new(v.major, v.minor, v.patch)
}

/// The smallest version with this `major.minor.patch`: its pre-release `0`.
fn floor(major: u64, minor: u64, patch: u64) -> Version {
    Version { major, minor, patch, pre: lowest_prerelease(), build: BuildMetadata::EMPTY }
}

fn lowest_prerelease() -> Prerelease {
    // "0" is a valid pre-release, and the smallest: numeric identifiers sort first.
    Prerelease::new("0").unwrap_or(Prerelease::EMPTY)
}

/// The smallest release above the release `v`.
fn release_after(v: &Version) -> Option<Version> {
    if let Some(patch) = v.patch.checked_add(1) {
        return Some(Version::new(v.major, v.minor, patch));
    }
    if let Some(minor) = v.minor.checked_add(1) {
        return Some(Version::new(v.major, minor, 0));
    }
    v.major.checked_add(1).map(|major| Version::new(major, 0, 0))
}

/// The smallest version of the next major.
fn next_major(major: u64) -> Option<Version> {
    major.checked_add(1).map(|m| floor(m, 0, 0))
}

/// The smallest version of the next minor.
fn next_minor(major: u64, minor: u64) -> Option<Version> {
    minor.checked_add(1).map(|m| floor(major, m, 0)).or_else(|| next_major(major))
}

/// The smallest version of the next patch.
fn next_patch(major: u64, minor: u64, patch: u64) -> Option<Version> {
    patch.checked_add(1).map(|p| floor(major, minor, p)).or_else(|| next_minor(major, minor))
}

fn lower_at(v: Option<Version>) -> Option<Bound> {
    v.map(Bound::Included)
}

fn upper_before(v: Option<Version>) -> Bound {
    v.map_or(Bound::Unbounded, Bound::Excluded)
}

/// The versions one comparator accepts (before the pre-release compatibility rule): an interval
/// for releases and one for pre-releases; `None` is empty.
struct Accepted {
    releases: Option<Interval>,
    prereleases: Option<Interval>,
}

impl Accepted {
    fn both(i: Option<Interval>) -> Accepted {
        Accepted { releases: i.clone(), prereleases: i }
    }
}

fn accepted(c: &Comparator) -> Accepted {
    use Bound::{Excluded, Included, Unbounded};
    let major = c.major;
    match (c.op, c.minor, c.patch) {
        // = and * (a wildcard never carries a patch; treat a full one as exact).
        (Op::Exact | Op::Wildcard, Some(minor), Some(patch)) => {
            let v = Version { major, minor, patch, pre: c.pre.clone(), build: BuildMetadata::EMPTY };
            let point = Interval::new(Included(v.clone()), Included(v));
            if c.pre.is_empty() {
                Accepted { releases: point, prereleases: None }
            } else {
                Accepted { releases: None, prereleases: point }
            }
        }
        (Op::Exact | Op::Wildcard, Some(minor), None) => Accepted {
            releases: Interval::new(Included(Version::new(major, minor, 0)), upper_before(next_minor(major, minor))),
            prereleases: None,
        },
        (Op::Exact | Op::Wildcard, None, _) => Accepted {
            releases: Interval::new(Included(Version::new(major, 0, 0)), upper_before(next_major(major))),
            prereleases: None,
        },
        (Op::Greater, Some(minor), Some(patch)) => {
            let v = Version { major, minor, patch, pre: c.pre.clone(), build: BuildMetadata::EMPTY };
            Accepted::both(Interval::new(Excluded(v), Unbounded))
        }
        (Op::Greater, Some(minor), None) => {
            Accepted::both(lower_at(next_minor(major, minor)).and_then(|lo| Interval::new(lo, Unbounded)))
        }
        (Op::Greater, None, _) => {
            Accepted::both(lower_at(next_major(major)).and_then(|lo| Interval::new(lo, Unbounded)))
        }
        (Op::GreaterEq, Some(minor), Some(patch)) => {
            let v = Version { major, minor, patch, pre: c.pre.clone(), build: BuildMetadata::EMPTY };
            Accepted::both(Interval::new(Included(v), Unbounded))
        }
        // `>=1.2` = `=1.2` (releases of 1.2.x only) or `>1.2`.
        (Op::GreaterEq, Some(minor), None) => Accepted {
            releases: Interval::new(Included(Version::new(major, minor, 0)), Unbounded),
            prereleases: lower_at(next_minor(major, minor)).and_then(|lo| Interval::new(lo, Unbounded)),
        },
        (Op::GreaterEq, None, _) => Accepted {
            releases: Interval::new(Included(Version::new(major, 0, 0)), Unbounded),
            prereleases: lower_at(next_major(major)).and_then(|lo| Interval::new(lo, Unbounded)),
        },
        (Op::Less, Some(minor), Some(patch)) => {
            let v = Version { major, minor, patch, pre: c.pre.clone(), build: BuildMetadata::EMPTY };
            Accepted::both(Interval::new(Unbounded, Excluded(v)))
        }
        (Op::Less, Some(minor), None) => Accepted::both(Interval::new(Unbounded, Excluded(floor(major, minor, 0)))),
        (Op::Less, None, _) => Accepted::both(Interval::new(Unbounded, Excluded(floor(major, 0, 0)))),
        (Op::LessEq, Some(minor), Some(patch)) => {
            let v = Version { major, minor, patch, pre: c.pre.clone(), build: BuildMetadata::EMPTY };
            Accepted::both(Interval::new(Unbounded, Included(v)))
        }
        // `<=1.2` = `=1.2` (releases of 1.2.x only) or `<1.2`.
        (Op::LessEq, Some(minor), None) => Accepted {
            releases: Interval::new(Unbounded, upper_before(next_minor(major, minor))),
            prereleases: Interval::new(Unbounded, Excluded(floor(major, minor, 0))),
        },
        (Op::LessEq, None, _) => Accepted {
            releases: Interval::new(Unbounded, upper_before(next_major(major))),
            prereleases: Interval::new(Unbounded, Excluded(floor(major, 0, 0))),
        },
        (Op::Tilde, Some(minor), Some(patch)) => {
            let v = Version { major, minor, patch, pre: c.pre.clone(), build: BuildMetadata::EMPTY };
            Accepted::both(Interval::new(Included(v), upper_before(next_minor(major, minor))))
        }
        // A partial tilde compares the (empty) pre-release: releases only.
        (Op::Tilde, Some(minor), None) => Accepted {
            releases: Interval::new(Included(Version::new(major, minor, 0)), upper_before(next_minor(major, minor))),
            prereleases: None,
        },
        (Op::Tilde, None, _) => Accepted {
            releases: Interval::new(Included(Version::new(major, 0, 0)), upper_before(next_major(major))),
            prereleases: None,
        },
        (Op::Caret, None, _) => {
            Accepted::both(Interval::new(Included(floor(major, 0, 0)), upper_before(next_major(major))))
        }
        (Op::Caret, Some(minor), None) => {
            let hi = if major > 0 { next_major(major) } else { next_minor(0, minor) };
            Accepted::both(Interval::new(Included(floor(major, minor, 0)), upper_before(hi)))
        }
        (Op::Caret, Some(minor), Some(patch)) => {
            let v = Version { major, minor, patch, pre: c.pre.clone(), build: BuildMetadata::EMPTY };
            let hi = if major > 0 {
                next_major(major)
            } else if minor > 0 {
                next_minor(0, minor)
            } else {
                next_patch(0, 0, patch)
            };
            Accepted::both(Interval::new(Included(v), upper_before(hi)))
        }
        // An operator added by a future semver release: assume it may accept anything; the
        // witness is still checked with `VersionReq::matches`.
        _ => Accepted::both(Some(Interval::ALL)),
    }
}

/// What a whole requirement accepts: the intersections of its comparators, plus the
/// `major.minor.patch` triples whose pre-releases it admits.
struct ReqSpace {
    releases: Option<Interval>,
    prereleases: Option<Interval>,
    prerelease_triples: Vec<Version>,
}

fn req_space(req: &VersionReq) -> ReqSpace {
    let mut releases = Some(Interval::ALL);
    let mut prereleases = Some(Interval::ALL);
    let mut prerelease_triples = Vec::new();
    for c in &req.comparators {
        let a = accepted(c);
        releases = releases.zip(a.releases).map(|(x, y)| x.intersect(&y));
        prereleases = prereleases.zip(a.prereleases).map(|(x, y)| x.intersect(&y));
        if let (Some(minor), Some(patch), false) = (c.minor, c.patch, c.pre.is_empty()) {
            prerelease_triples.push(Version::new(c.major, minor, patch));
        }
    }
    ReqSpace { releases, prereleases, prerelease_triples }
}

/// The smallest version both requirements match, if any (see the module docs for how
/// pre-releases count).
pub fn overlap(a: &VersionReq, b: &VersionReq) -> Option<Version> {
    let (sa, sb) = (req_space(a), req_space(b));
    let mut candidates = Vec::new();
    if let (Some(ra), Some(rb)) = (&sa.releases, &sb.releases) {
        candidates.extend(ra.intersect(rb).smallest_release());
    }
    if let (Some(pa), Some(pb)) = (&sa.prereleases, &sb.prereleases) {
        let both = pa.intersect(pb);
        for t in sa.prerelease_triples.iter().filter(|t| sb.prerelease_triples.contains(t)) {
            candidates.extend(both.smallest_prerelease_of(t));
        }
    }
    candidates.sort();
    candidates.into_iter().find(|v| a.matches(v) && b.matches(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(s: &str) -> VersionReq {
        VersionReq::parse(s).unwrap()
    }

    fn release(name: &str, components: &[(&str, &str)]) -> Arc<Release> {
        let components: Vec<_> = components.iter().map(|(n, v)| serde_json::json!({"name": n, "version": v})).collect();
        Arc::new(
            serde_json::from_value(serde_json::json!({
                "apiVersion": "release.giantswarm.io/v1alpha1", "kind": "Release",
                "metadata": {"name": name},
                "spec": {"components": components, "date": "2026-01-01T00:00:00Z", "state": "active"}
            }))
            .unwrap(),
        )
    }

    fn releases() -> HashMap<String, Arc<Release>> {
        [
            release("v20.0.0", &[("aws-operator", "14.2.0"), ("kubernetes", "1.30.1")]),
            release("v21.0.0", &[("aws-operator", "15.0.1")]),
            release("v22.0.0", &[("aws-operator", "16.0.0-beta.1")]),
            release("v23.0.0", &[("kvm-operator", "4.0.0")]),
            release("v24.0.0", &[("aws-operator", "not-a-version")]),
            release("v25.0.0", &[("aws-operator", "99.0.0")]),
        ]
        .into_iter()
        .map(|r| (r.metadata.name.clone().unwrap(), r))
        .collect()
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn router() -> Router {
        Router::new(
            "aws-operator",
            Routing::Release,
            [
                ("v14".to_string(), req(">=14.0.0, <15.0.0")),
                ("v15".to_string(), req("^15.0.0")),
                ("v16-beta".to_string(), req(">=16.0.0-beta.1, <16.0.0")),
            ],
        )
        .unwrap()
    }

    #[test]
    fn one_match_picks_the_set_whose_requirement_matches_the_component_version() {
        let r = router();
        let route = r.route(&labels(&[(labels::RELEASE_VERSION, "20.0.0")]), &releases());
        assert_eq!(
            route,
            Route::Matched {
                set: 0,
                version: Version::new(14, 2, 0),
                release: Some("v20.0.0".into()),
                from: VersionFrom::ReleaseLabel { release: "v20.0.0".into() }
            }
        );
        let route = r.route(&labels(&[(labels::RELEASE_VERSION, "21.0.0")]), &releases());
        assert!(matches!(route, Route::Matched { set: 1, .. }));
        assert_eq!(r.set_name(1), "v15");
    }

    #[test]
    fn a_prerelease_component_routes_to_the_set_that_names_it() {
        let route = router().route(&labels(&[(labels::RELEASE_VERSION, "22.0.0")]), &releases());
        assert!(matches!(route, Route::Matched { set: 2, .. }), "{route:?}");
    }

    #[test]
    fn zero_matches_mean_another_operator_version_owns_the_object() {
        let route = router().route(&labels(&[(labels::RELEASE_VERSION, "25.0.0")]), &releases());
        assert_eq!(route, Route::NoMatch { version: Some(Version::new(99, 0, 0)), release: Some("v25.0.0".into()) });
    }

    #[test]
    fn missing_label_release_and_component_are_unroutable() {
        let r = router();
        assert_eq!(r.route(&labels(&[]), &releases()), Route::Unroutable(Unroutable::MissingLabel));
        assert_eq!(
            r.route(&labels(&[(labels::RELEASE_VERSION, " ")]), &releases()),
            Route::Unroutable(Unroutable::MissingLabel)
        );
        assert_eq!(
            r.route(&labels(&[(labels::RELEASE_VERSION, "19.0.0")]), &releases()),
            Route::Unroutable(Unroutable::ReleaseNotFound { release: "v19.0.0".into() })
        );
        let Route::Unroutable(problem) = r.route(&labels(&[(labels::RELEASE_VERSION, "23.0.0")]), &releases()) else {
            panic!("expected unroutable");
        };
        assert_eq!(problem.reason(), "ComponentNotInRelease");
        assert!(problem.to_string().contains("v23.0.0") && problem.to_string().contains("aws-operator"));
        let Route::Unroutable(problem) = r.route(&labels(&[(labels::RELEASE_VERSION, "24.0.0")]), &releases()) else {
            panic!("expected unroutable");
        };
        assert_eq!(problem.reason(), "InvalidComponentVersion");
    }

    #[test]
    fn the_label_may_carry_a_leading_v() {
        let route = router().route(&labels(&[(labels::RELEASE_VERSION, "v20.0.0")]), &releases());
        assert!(matches!(route, Route::Matched { set: 0, .. }));
    }

    fn bundle(version: &str) -> ObjectVersion {
        ObjectVersion { field: "spec.versionBundle.version".into(), version: version.into() }
    }

    #[test]
    fn without_the_release_label_the_objects_own_version_picks_the_set_and_its_one_release() {
        let r = router();
        let route = r.route_object(&labels(&[]), Some(&bundle("14.2.0")), &releases());
        assert_eq!(
            route,
            Route::Matched {
                set: 0,
                version: Version::new(14, 2, 0),
                release: Some("v20.0.0".into()),
                from: VersionFrom::Object { field: "spec.versionBundle.version".into(), release: "v20.0.0".into() },
            }
        );
        // A leading v, an empty release label and a Release writing the version with a v.
        let mut rs = releases();
        rs.insert("v21.0.0".into(), release("v21.0.0", &[("aws-operator", "v15.0.1")]));
        let route = r.route_object(&labels(&[(labels::RELEASE_VERSION, "")]), Some(&bundle("v15.0.1")), &rs);
        assert!(matches!(&route, Route::Matched { set: 1, release: Some(n), .. } if n == "v21.0.0"), "{route:?}");
        // An upgrade is a change of the version: the next reconcile takes the new set and Release.
        assert!(matches!(
            r.route_object(&labels(&[]), Some(&bundle("15.0.1")), &releases()),
            Route::Matched { set: 1, release: Some(n), .. } if n == "v21.0.0"
        ));
        assert_eq!(r.set_name(1), "v15");
    }

    #[test]
    fn the_release_label_wins_over_the_objects_own_version() {
        let r = router();
        let route =
            r.route_object(&labels(&[(labels::RELEASE_VERSION, "21.0.0")]), Some(&bundle("14.2.0")), &releases());
        assert!(
            matches!(&route, Route::Matched { set: 1, from: VersionFrom::ReleaseLabel { release }, .. } if release == "v21.0.0"),
            "{route:?}"
        );
        // Also when the label names a Release that does not exist.
        let route =
            r.route_object(&labels(&[(labels::RELEASE_VERSION, "19.0.0")]), Some(&bundle("14.2.0")), &releases());
        assert_eq!(route, Route::Unroutable(Unroutable::ReleaseNotFound { release: "v19.0.0".into() }));
    }

    #[test]
    fn an_own_version_of_another_operator_version_is_left_alone_even_without_its_release() {
        let r = router();
        for v in ["99.0.0", "4.7.0"] {
            assert_eq!(
                r.route_object(&labels(&[]), Some(&bundle(v)), &releases()),
                Route::NoMatch { version: Some(Version::parse(v).unwrap()), release: None }
            );
        }
    }

    #[test]
    fn an_own_version_without_its_one_release_is_unroutable_naming_the_field_and_the_fix() {
        let r = router();
        let Route::Unroutable(problem) = r.route_object(&labels(&[]), Some(&bundle("14.9.0")), &releases()) else {
            panic!("expected unroutable");
        };
        assert_eq!(problem.reason(), "NoReleaseForVersion");
        let text = problem.to_string();
        for part in
            ["spec.versionBundle.version", "aws-operator 14.9.0", "create that Release", labels::RELEASE_VERSION]
        {
            assert!(text.contains(part), "{part:?} in {text}");
        }

        let mut rs = releases();
        rs.insert("v20.1.0".into(), release("v20.1.0", &[("aws-operator", "14.2.0")]));
        let Route::Unroutable(problem) = r.route_object(&labels(&[]), Some(&bundle("14.2.0")), &rs) else {
            panic!("expected unroutable");
        };
        assert_eq!(
            problem,
            Unroutable::AmbiguousRelease {
                field: "spec.versionBundle.version".into(),
                component: "aws-operator".into(),
                version: "14.2.0".into(),
                releases: vec!["v20.0.0".into(), "v20.1.0".into()],
            }
        );
        let text = problem.to_string();
        assert!(text.contains("v20.0.0, v20.1.0") && text.contains(labels::RELEASE_VERSION), "{text}");

        let label = ObjectVersion {
            field: "metadata.labels[aws-operator.giantswarm.io/version]".into(),
            version: "fourteen".into(),
        };
        let Route::Unroutable(problem) = r.route_object(&labels(&[]), Some(&label), &releases()) else {
            panic!("expected unroutable");
        };
        assert_eq!(problem.reason(), "InvalidVersion");
        let text = problem.to_string();
        assert!(text.contains("metadata.labels[aws-operator.giantswarm.io/version] is \"fourteen\""), "{text}");
        // No version at all: the release label is missing, as without a version source.
        assert_eq!(r.route_object(&labels(&[]), None, &releases()), Route::Unroutable(Unroutable::MissingLabel));
    }

    #[test]
    fn overlapping_sets_are_refused_naming_both() {
        let err = Router::new(
            "aws-operator",
            Routing::Release,
            [
                ("old".to_string(), req(">=14.0.0, <15.0.0")),
                ("current".to_string(), req("^15")),
                ("wide".to_string(), req(">=14.5")),
            ],
        )
        .unwrap_err();
        match err {
            BuildError::OverlappingSets { first, second, witness, .. } => {
                assert_eq!((first.as_str(), second.as_str(), witness.as_str()), ("old", "wide", "14.5.0"));
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(matches!(
            Router::new("x", Routing::Release, [("a".to_string(), req("*")), ("a".to_string(), req("=1.0.0"))]),
            Err(BuildError::DuplicateSetName(_))
        ));
        assert_eq!(Router::new("x", Routing::Release, []).unwrap_err(), BuildError::NoResourceSets);
        assert_eq!(
            Router::new("", Routing::Release, [("a".to_string(), req("*"))]).unwrap_err(),
            BuildError::MissingOperator
        );
    }

    #[test]
    fn legacy_mode_routes_by_the_own_version_and_needs_a_set_for_it() {
        let r = Router::new(
            "kvm-operator",
            Routing::Legacy { version: Version::new(4, 1, 0) },
            [("v3".to_string(), req("^3")), ("v4".to_string(), req("^4"))],
        )
        .unwrap();
        assert_eq!(r.legacy_selector().as_deref(), Some("kvm-operator.giantswarm.io/version=4.1.0"));
        let own = labels(&[("kvm-operator.giantswarm.io/version", "4.1.0")]);
        assert_eq!(
            r.route(&own, &()),
            Route::Matched { set: 1, version: Version::new(4, 1, 0), release: None, from: VersionFrom::Own }
        );
        // A version of its own changes nothing in legacy mode.
        let bundle = ObjectVersion { field: "spec.versionBundle.version".into(), version: "4.1.0".into() };
        assert!(matches!(r.route_object(&labels(&[]), Some(&bundle), &()), Route::NoMatch { .. }));
        let other = labels(&[("kvm-operator.giantswarm.io/version", "3.9.0")]);
        assert_eq!(r.route(&other, &()), Route::NoMatch { version: Some(Version::new(3, 9, 0)), release: None });
        let err = Router::new(
            "kvm-operator",
            Routing::Legacy { version: Version::new(5, 0, 0) },
            [("v4".to_string(), req("^4"))],
        );
        assert_eq!(err.unwrap_err(), BuildError::NoSetForOwnVersion("5.0.0".into()));
    }

    #[test]
    fn overlap_cases() {
        let cases: &[(&str, &str, Option<&str>)] = &[
            (">=1.0.0, <2.0.0", ">=2.0.0", None),
            (">=1.0.0, <2.0.0", ">=1.9.9", Some("1.9.9")),
            ("^1.2", "~1.3", Some("1.3.0")),
            ("^1.2", "^2", None),
            ("=1.2.3", ">1.2.3", None),
            ("=1.2.3", ">=1.2.3", Some("1.2.3")),
            ("<=1.2", ">=1.2.5", Some("1.2.5")),
            ("<1.2", ">=1.2", None),
            ("^0.2", "^0.3", None),
            ("^0.0.3", "^0.0.4", None),
            ("~1", "1.*", Some("1.0.0")),
            ("*", "=7.0.0", Some("7.0.0")),
            ("1.2.*", "1.3.*", None),
            // Pre-releases only overlap when both name the same x.y.z with a pre-release.
            (">=1.0.0, <2.0.0", ">=2.0.0-rc.1", None),
            (">=2.0.0-rc.1, <2.0.0", ">=2.0.0-beta.1, <2.0.0-rc.2", Some("2.0.0-rc.1")),
            (">=2.0.0-rc.1, <2.0.0", "<2.0.0-rc.1", None),
            (">2.0.0-rc.1, <2.0.0", "<=2.0.0-rc.1.0, >=2.0.0-alpha", Some("2.0.0-rc.1.0")),
            (">2.0.0-rc.1, <2.0.0", "<2.0.0-rc.1.0, >=2.0.0-alpha", None),
            ("=2.0.0-rc.1", "^2.0.0-rc.1", Some("2.0.0-rc.1")),
            ("=2.0.0-rc.1", "^2.0.0-rc.2", None),
        ];
        for (a, b, want) in cases {
            let got = overlap(&req(a), &req(b)).map(|v| v.to_string());
            assert_eq!(got.as_deref(), *want, "{a} vs {b}");
            let back = overlap(&req(b), &req(a)).map(|v| v.to_string());
            assert_eq!(back.as_deref(), *want, "{b} vs {a} (symmetry)");
        }
    }

    /// Every pair of requirements from a varied list, against every version of a grid that
    /// includes pre-releases at and around the bounds: whenever some grid version matches both,
    /// `overlap` must find a witness, and every witness must match both.
    #[test]
    fn overlap_agrees_with_brute_force_on_a_grid() {
        let reqs = [
            "*",
            "^0",
            "^0.0",
            "^0.0.1",
            "^0.1",
            "^0.1.2",
            "^1",
            "^1.2",
            "^1.2.3",
            "^1.2.3-rc.1",
            "~1",
            "~1.2",
            "~1.2.3",
            "~1.2.3-beta",
            "=1",
            "=1.2",
            "=1.2.3",
            "=1.2.3-alpha",
            "1.*",
            "1.2.*",
            ">1",
            ">1.2",
            ">1.2.3",
            ">1.2.3-alpha",
            ">=1",
            ">=1.2",
            ">=1.2.3",
            ">=1.2.3-0",
            "<1",
            "<1.2",
            "<1.2.3",
            "<1.2.3-beta",
            "<=1",
            "<=1.2",
            "<=1.2.3",
            "<=1.2.3-alpha.0",
            ">=1.2.3-alpha, <1.2.3",
            ">=1.0.0, <2.0.0",
            ">=2.0.0-rc.1, <2.0.0",
            ">0.5, <1.2.3-rc.1",
            ">=1.2.3-rc.1, <=1.2.3-rc.1.0",
            "^2",
            "~0.1.2",
        ];
        let mut grid = Vec::new();
        for major in 0..=3u64 {
            for minor in 0..=3u64 {
                for patch in 0..=4u64 {
                    grid.push(Version::new(major, minor, patch));
                    for pre in ["0", "alpha", "alpha.0", "beta", "rc.1", "rc.1.0", "rc.2"] {
                        let mut v = Version::new(major, minor, patch);
                        v.pre = Prerelease::new(pre).unwrap();
                        grid.push(v);
                    }
                }
            }
        }
        for a in reqs {
            for b in reqs {
                let (ra, rb) = (req(a), req(b));
                let brute = grid.iter().find(|v| ra.matches(v) && rb.matches(v));
                let found = overlap(&ra, &rb);
                if let Some(w) = &found {
                    assert!(ra.matches(w) && rb.matches(w), "{a} vs {b}: witness {w} must match both");
                }
                if let Some(v) = brute {
                    let w = found.unwrap_or_else(|| panic!("{a} vs {b}: both match {v}, overlap found nothing"));
                    assert!(w <= *v, "{a} vs {b}: the witness {w} is the smallest common version, {v} is smaller");
                }
            }
        }
    }
}
