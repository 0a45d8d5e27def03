//! A small typed model of a CloudFormation template, rendered to JSON.
//!
//! Upstream aws-operator renders YAML with Go `text/template` (reference §5.1); only the
//! resulting resources and properties matter to CloudFormation, so the templates here are built
//! as data and serialised as JSON, which CloudFormation accepts as a `TemplateBody` as well.
//!
//! Semantics kept from upstream:
//!
//! * **No `Parameters` section.** Every value is rendered inline, so a template fully describes
//!   what the stack should look like and can be compared, hashed and linted offline.
//! * **No `Conditions`.** Every choice (Route53 on or off, one or three masters, AWS-CNI) is made
//!   while rendering, so a resource is either in the template or not.
//! * **Deterministic output.** Object keys are emitted in sorted order whatever the `serde_json`
//!   feature set of the final binary, so [`Template::hash`] is stable across builds and the same
//!   inputs always give the same bytes.
//!
//! The intrinsic-function helpers (`r#ref`, [`get_att`], [`sub`], [`join`], [`base64`](fn@base64)) build
//! the JSON forms (`{"Ref": …}`, `{"Fn::GetAtt": […]}`, …) that the YAML short forms stand for.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

/// The largest `TemplateBody` the CloudFormation API accepts, in bytes. A larger template has to
/// be uploaded to S3 and passed by `TemplateURL` (up to 1 MB); the operator does that through the
/// cluster bucket.
pub const MAX_TEMPLATE_BODY_BYTES: usize = 51_200;

/// The only template format version CloudFormation knows.
pub const FORMAT_VERSION: &str = "2010-09-09";

/// A CloudFormation template: description, resources by logical ID, and outputs by key.
#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    /// Free text shown in the console; upstream puts the stack's purpose here.
    pub description: String,
    /// Resources by logical ID. Logical IDs are the identity CloudFormation tracks: renaming one
    /// deletes the old resource and creates a new one.
    pub resources: BTreeMap<String, Resource>,
    /// Outputs by key; the operator reads these instead of describing the resources.
    pub outputs: BTreeMap<String, Output>,
}

/// What CloudFormation does with a resource's physical counterpart when it leaves the stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeletionPolicy {
    /// Delete it (CloudFormation's default).
    Delete,
    /// Leave it in place.
    Retain,
    /// Take a snapshot first (volumes, databases).
    Snapshot,
}

impl DeletionPolicy {
    /// The name CloudFormation uses.
    pub fn as_str(self) -> &'static str {
        match self {
            DeletionPolicy::Delete => "Delete",
            DeletionPolicy::Retain => "Retain",
            DeletionPolicy::Snapshot => "Snapshot",
        }
    }
}

/// One resource of a template.
#[derive(Debug, Clone, PartialEq)]
pub struct Resource {
    /// The resource type, e.g. `AWS::EC2::VPC`.
    pub r#type: String,
    /// The `Properties` object.
    pub properties: Value,
    /// Logical IDs this resource must wait for, beyond those implied by `Ref`/`GetAtt`.
    pub depends_on: Vec<String>,
    /// The `UpdatePolicy` attribute (rolling updates of auto scaling groups).
    pub update_policy: Option<Value>,
    /// The `DeletionPolicy` attribute.
    pub deletion_policy: Option<DeletionPolicy>,
    /// The `UpdateReplacePolicy` attribute: what happens to the old physical resource when an
    /// update replaces it (same values as `DeletionPolicy`).
    pub update_replace_policy: Option<DeletionPolicy>,
}

impl Resource {
    /// A resource of type `r#type` with the given `Properties`.
    pub fn new(r#type: impl Into<String>, properties: Value) -> Self {
        Resource {
            r#type: r#type.into(),
            properties,
            depends_on: Vec::new(),
            update_policy: None,
            deletion_policy: None,
            update_replace_policy: None,
        }
    }

    /// Adds explicit dependencies (kept in the given order, duplicates dropped).
    pub fn depends_on<I, S>(mut self, ids: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        for id in ids {
            let id = id.into();
            if !self.depends_on.contains(&id) {
                self.depends_on.push(id);
            }
        }
        self
    }

    /// Sets the `UpdatePolicy` attribute.
    pub fn update_policy(mut self, policy: Value) -> Self {
        self.update_policy = Some(policy);
        self
    }

    /// Sets the `DeletionPolicy` attribute.
    pub fn deletion_policy(mut self, policy: DeletionPolicy) -> Self {
        self.deletion_policy = Some(policy);
        self
    }

    /// Sets the `UpdateReplacePolicy` attribute.
    pub fn update_replace_policy(mut self, policy: DeletionPolicy) -> Self {
        self.update_replace_policy = Some(policy);
        self
    }

    /// A property by name, for inspection in tests and by callers.
    pub fn property(&self, name: &str) -> Option<&Value> {
        self.properties.get(name)
    }

    fn to_value(&self) -> Value {
        let mut out = Map::new();
        out.insert("Type".into(), Value::String(self.r#type.clone()));
        if !is_empty_object(&self.properties) {
            out.insert("Properties".into(), self.properties.clone());
        }
        if !self.depends_on.is_empty() {
            out.insert("DependsOn".into(), json!(self.depends_on));
        }
        if let Some(policy) = &self.update_policy {
            out.insert("UpdatePolicy".into(), policy.clone());
        }
        if let Some(policy) = self.deletion_policy {
            out.insert("DeletionPolicy".into(), Value::String(policy.as_str().into()));
        }
        if let Some(policy) = self.update_replace_policy {
            out.insert("UpdateReplacePolicy".into(), Value::String(policy.as_str().into()));
        }
        Value::Object(out)
    }
}

/// One template output.
#[derive(Debug, Clone, PartialEq)]
pub struct Output {
    /// The value: a literal string or an intrinsic function that yields one.
    pub value: Value,
    /// Optional description.
    pub description: Option<String>,
}

impl Template {
    /// An empty template with the given description.
    pub fn new(description: impl Into<String>) -> Self {
        Template { description: description.into(), resources: BTreeMap::new(), outputs: BTreeMap::new() }
    }

    /// Adds (or replaces) a resource under `logical_id`.
    pub fn add(&mut self, logical_id: impl Into<String>, resource: Resource) {
        self.resources.insert(logical_id.into(), resource);
    }

    /// Adds (or replaces) an output.
    pub fn output(&mut self, key: impl Into<String>, value: Value, description: Option<&str>) {
        self.outputs.insert(key.into(), Output { value, description: description.map(str::to_owned) });
    }

    /// The resource with this logical ID, if any.
    pub fn resource(&self, logical_id: &str) -> Option<&Resource> {
        self.resources.get(logical_id)
    }

    /// Logical IDs of every resource of the given type, sorted.
    pub fn ids_of_type(&self, r#type: &str) -> Vec<&str> {
        self.resources.iter().filter(|(_, r)| r.r#type == r#type).map(|(id, _)| id.as_str()).collect()
    }

    /// The template as a JSON value with every object's keys in sorted order.
    pub fn to_value(&self) -> Value {
        let mut top = Map::new();
        top.insert("AWSTemplateFormatVersion".into(), Value::String(FORMAT_VERSION.into()));
        top.insert("Description".into(), Value::String(self.description.clone()));
        let resources: Map<String, Value> = self.resources.iter().map(|(id, r)| (id.clone(), r.to_value())).collect();
        top.insert("Resources".into(), Value::Object(resources));
        if !self.outputs.is_empty() {
            let outputs: Map<String, Value> = self
                .outputs
                .iter()
                .map(|(key, o)| {
                    let mut out = Map::new();
                    out.insert("Value".into(), o.value.clone());
                    if let Some(d) = &o.description {
                        out.insert("Description".into(), Value::String(d.clone()));
                    }
                    (key.clone(), Value::Object(out))
                })
                .collect();
            top.insert("Outputs".into(), Value::Object(outputs));
        }
        canonical(Value::Object(top))
    }

    /// Compact JSON, the form sent as `TemplateBody`.
    pub fn to_json(&self) -> String {
        self.to_value().to_string()
    }

    /// Indented JSON, for humans (`aws-operator render`, golden files).
    pub fn to_json_pretty(&self) -> String {
        format!("{:#}", self.to_value())
    }

    /// Hex-encoded SHA-256 of [`Template::to_json`]: equal hashes mean byte-identical templates.
    pub fn hash(&self) -> String {
        let digest = Sha256::digest(self.to_json().as_bytes());
        digest.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Size of the compact template body in bytes.
    pub fn body_len(&self) -> usize {
        self.to_json().len()
    }
}

/// The change hash of a stack: its template's hash ([`Template::hash`], or a canonical one the
/// caller chose) together with its stack tags. CloudFormation copies stack tags onto every
/// resource that takes tags, so a changed tag is a change to deploy; the order of the tags does
/// not matter.
pub fn stack_hash(template_hash: &str, tags: &[(String, String)]) -> String {
    let mut sorted: Vec<&(String, String)> = tags.iter().collect();
    sorted.sort();
    let mut hasher = Sha256::new();
    hasher.update(b"stack/v1\n");
    hasher.update(template_hash.as_bytes());
    for (key, value) in sorted {
        // Length prefixes keep ("ab","c") and ("a","bc") apart.
        hasher.update((key.len() as u64).to_be_bytes());
        hasher.update(key.as_bytes());
        hasher.update((value.len() as u64).to_be_bytes());
        hasher.update(value.as_bytes());
    }
    hasher.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// Rebuilds every object with its keys in sorted order. With `serde_json`'s default map this is
/// a no-op; with `preserve_order` (which another crate in the same binary may switch on) it is
/// what keeps [`Template::hash`] independent of the order properties were written in.
fn canonical(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let sorted: BTreeMap<String, Value> = map.into_iter().map(|(k, v)| (k, canonical(v))).collect();
            Value::Object(sorted.into_iter().collect())
        }
        Value::Array(items) => Value::Array(items.into_iter().map(canonical).collect()),
        other => other,
    }
}

fn is_empty_object(value: &Value) -> bool {
    matches!(value, Value::Object(m) if m.is_empty()) || value.is_null()
}

/// `{"Ref": logical_id}`: a resource's physical ID (or a pseudo parameter such as `AWS::Region`).
pub fn r#ref(logical_id: &str) -> Value {
    json!({ "Ref": logical_id })
}

/// `{"Fn::GetAtt": [logical_id, attribute]}`.
pub fn get_att(logical_id: &str, attribute: &str) -> Value {
    json!({ "Fn::GetAtt": [logical_id, attribute] })
}

/// `{"Fn::Sub": text}`: `${LogicalId}` and `${AWS::Region}`-style substitutions.
pub fn sub(text: &str) -> Value {
    json!({ "Fn::Sub": text })
}

/// `{"Fn::Join": [separator, parts]}`.
pub fn join(separator: &str, parts: Vec<Value>) -> Value {
    json!({ "Fn::Join": [separator, parts] })
}

/// `{"Fn::Base64": value}`.
pub fn base64(value: Value) -> Value {
    json!({ "Fn::Base64": value })
}

/// A CloudFormation tag list, `[{"Key": k, "Value": v}, …]`, in the given order.
pub fn tags<K: AsRef<str>, V: AsRef<str>>(pairs: &[(K, V)]) -> Value {
    Value::Array(pairs.iter().map(|(k, v)| json!({ "Key": k.as_ref(), "Value": v.as_ref() })).collect())
}

/// An IAM policy document with the 2012-10-17 language version.
pub fn policy_document(statements: Vec<Value>) -> Value {
    json!({ "Version": "2012-10-17", "Statement": statements })
}

/// An `Allow` statement.
pub fn allow(actions: &[&str], resource: Value) -> Value {
    json!({ "Effect": "Allow", "Action": actions, "Resource": resource })
}

/// An IAM `Allow` statement that applies only where `condition` (an IAM `Condition` block)
/// holds.
pub fn allow_if(actions: &[&str], resource: Value, condition: Value) -> Value {
    json!({ "Effect": "Allow", "Action": actions, "Resource": resource, "Condition": condition })
}

/// Why two templates could not be combined into one ([`Template::absorb`], [`Template::link`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CombineError {
    /// Both templates hold a different resource, or a different output, under one key.
    #[error("both parts define {0:?} differently")]
    Collision(String),
    /// A placeholder names a resource the template does not have.
    #[error("placeholder ${{{0}}} names no resource of the template")]
    UnknownPlaceholder(String),
}

impl Template {
    /// Adds every resource and output of `other`. A key both hold is fine when both hold the
    /// same thing (the version outputs every stack carries), and an error otherwise.
    pub fn absorb(&mut self, other: Template) -> Result<(), CombineError> {
        for (id, resource) in other.resources {
            match self.resources.get(&id) {
                Some(existing) if *existing != resource => return Err(CombineError::Collision(id)),
                _ => {
                    self.resources.insert(id, resource);
                }
            }
        }
        for (key, output) in other.outputs {
            match self.outputs.get(&key) {
                Some(existing) if *existing != output => return Err(CombineError::Collision(key)),
                _ => {
                    self.outputs.insert(key, output);
                }
            }
        }
        Ok(())
    }

    /// Moves resource `from` to logical ID `to`; nothing may refer to it yet.
    pub fn rename(&mut self, from: &str, to: &str) -> Result<(), CombineError> {
        if self.resources.contains_key(to) {
            return Err(CombineError::Collision(to.to_owned()));
        }
        if let Some(resource) = self.resources.remove(from) {
            self.resources.insert(to.to_owned(), resource);
        }
        Ok(())
    }

    /// Turns placeholders into references: a string that is exactly `${Id}` becomes
    /// `{"Ref": "Id"}`, and a string that contains `${Id}` becomes `{"Fn::Sub": …}`, in
    /// properties and outputs. Strings already inside `Fn::Sub` are left as they are.
    ///
    /// This is how a stack is built from parts written for separate stacks: a part whose input
    /// is another stack's output (a subnet ID, a security group) is rendered with the
    /// placeholder of the resource that is now in the same template, then linked. Every
    /// placeholder must name a resource of the template.
    pub fn link(&mut self) -> Result<(), CombineError> {
        let ids: std::collections::BTreeSet<String> = self.resources.keys().cloned().collect();
        let mut unknown = None;
        for resource in self.resources.values_mut() {
            link_value(&mut resource.properties, &ids, &mut unknown);
        }
        for output in self.outputs.values_mut() {
            link_value(&mut output.value, &ids, &mut unknown);
        }
        match unknown {
            Some(id) => Err(CombineError::UnknownPlaceholder(id)),
            None => Ok(()),
        }
    }
}

/// `${logical_id}`: the placeholder [`Template::link`] turns into a reference.
pub fn placeholder(logical_id: &str) -> String {
    format!("${{{logical_id}}}")
}

fn link_value(value: &mut Value, ids: &std::collections::BTreeSet<String>, unknown: &mut Option<String>) {
    match value {
        Value::String(text) if text.contains("${") => {
            for name in placeholders(text) {
                if !ids.contains(name) && !name.starts_with("AWS::") {
                    unknown.get_or_insert_with(|| name.to_owned());
                }
            }
            let whole = text.strip_prefix("${").and_then(|t| t.strip_suffix('}')).filter(|t| !t.contains(['$', '}']));
            *value = match whole {
                Some(id) => r#ref(id),
                None => sub(text),
            };
        }
        Value::Array(items) => items.iter_mut().for_each(|v| link_value(v, ids, unknown)),
        Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                if key != "Fn::Sub" {
                    link_value(v, ids, unknown);
                }
            }
        }
        _ => {}
    }
}

/// The names between `${` and `}` in `text`.
fn placeholders(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else { break };
        out.push(&after[..end]);
        rest = &after[end + 1..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_absorbed_once_and_collisions_are_refused() {
        let mut a = Template::new("a");
        a.add("Vpc", Resource::new("AWS::EC2::VPC", json!({ "CidrBlock": "10.0.0.0/16" })));
        a.output("OperatorVersion", json!("1.0.0"), None);
        let mut b = Template::new("b");
        b.add("Subnet", Resource::new("AWS::EC2::Subnet", json!({ "VpcId": placeholder("Vpc") })));
        b.output("OperatorVersion", json!("1.0.0"), None);
        a.absorb(b.clone()).expect("same output twice is fine");
        assert_eq!(a.resources.len(), 2);
        assert_eq!(a.description, "a");

        let mut other_version = b.clone();
        other_version.output("OperatorVersion", json!("2.0.0"), None);
        assert_eq!(a.clone().absorb(other_version), Err(CombineError::Collision("OperatorVersion".into())));
        let mut other_subnet = b;
        other_subnet.add("Subnet", Resource::new("AWS::EC2::Subnet", json!({ "CidrBlock": "10.0.1.0/24" })));
        assert_eq!(a.clone().absorb(other_subnet), Err(CombineError::Collision("Subnet".into())));

        assert_eq!(a.rename("Subnet", "Vpc"), Err(CombineError::Collision("Vpc".into())));
        a.rename("Subnet", "PrivateSubnet").expect("free name");
        assert!(a.resource("Subnet").is_none() && a.resource("PrivateSubnet").is_some());
    }

    #[test]
    fn placeholders_become_refs_or_subs_and_unknown_ones_are_refused() {
        let mut t = Template::new("t");
        t.add("Zone", Resource::new("AWS::Route53::HostedZone", json!({ "Name": "example.com." })));
        t.add(
            "Role",
            Resource::new(
                "AWS::IAM::Role",
                json!({
                    "Zone": placeholder("Zone"),
                    "Arns": [format!("arn:aws:route53:::hostedzone/{}", placeholder("Zone"))],
                    "Account": sub("arn:aws:iam::${AWS::AccountId}:root"),
                    "Plain": "no placeholder",
                }),
            ),
        );
        t.output("ZoneID", json!(placeholder("Zone")), None);
        t.link().expect("every placeholder is a resource");
        let role = &t.resources["Role"].properties;
        assert_eq!(role["Zone"], r#ref("Zone"));
        assert_eq!(role["Arns"][0], sub("arn:aws:route53:::hostedzone/${Zone}"));
        assert_eq!(role["Account"], sub("arn:aws:iam::${AWS::AccountId}:root"), "Fn::Sub is left as it is");
        assert_eq!(role["Plain"], "no placeholder");
        assert_eq!(t.outputs["ZoneID"].value, r#ref("Zone"));

        let mut dangling = Template::new("d");
        dangling.add("Eni", Resource::new("AWS::EC2::NetworkInterface", json!({ "SubnetId": placeholder("Subnet") })));
        assert_eq!(dangling.link(), Err(CombineError::UnknownPlaceholder("Subnet".into())));
    }

    #[test]
    fn the_stack_hash_follows_tags_but_not_their_order() {
        let tags = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
        };
        let base = stack_hash("abc", &tags(&[("giantswarm.io/cluster", "al9qy"), ("cost-center", "blue")]));
        assert_eq!(base.len(), 64);
        assert_eq!(base, stack_hash("abc", &tags(&[("cost-center", "blue"), ("giantswarm.io/cluster", "al9qy")])));
        assert_ne!(base, stack_hash("abd", &tags(&[("giantswarm.io/cluster", "al9qy"), ("cost-center", "blue")])));
        assert_ne!(base, stack_hash("abc", &tags(&[("giantswarm.io/cluster", "al9qy"), ("cost-center", "red")])));
        assert_ne!(base, stack_hash("abc", &tags(&[("giantswarm.io/cluster", "al9qy")])));
        assert_ne!(stack_hash("abc", &tags(&[("ab", "c")])), stack_hash("abc", &tags(&[("a", "bc")])));
    }

    fn sample() -> Template {
        let mut t = Template::new("sample");
        t.add("Vpc", Resource::new("AWS::EC2::VPC", json!({ "CidrBlock": "10.1.0.0/24", "EnableDnsSupport": true })));
        t.add(
            "Subnet",
            Resource::new("AWS::EC2::Subnet", json!({ "VpcId": r#ref("Vpc"), "CidrBlock": "10.1.0.0/27" }))
                .depends_on(["Vpc", "Vpc"]),
        );
        t.output("VPCID", r#ref("Vpc"), Some("the VPC"));
        t
    }

    #[test]
    fn renders_the_cloudformation_shape() {
        let v = sample().to_value();
        assert_eq!(v["AWSTemplateFormatVersion"], "2010-09-09");
        assert_eq!(v["Resources"]["Subnet"]["Type"], "AWS::EC2::Subnet");
        assert_eq!(v["Resources"]["Subnet"]["Properties"]["VpcId"], json!({ "Ref": "Vpc" }));
        assert_eq!(v["Resources"]["Subnet"]["DependsOn"], json!(["Vpc"]), "duplicates are dropped");
        assert!(v["Resources"]["Vpc"].get("DependsOn").is_none());
        assert_eq!(v["Outputs"]["VPCID"], json!({ "Value": { "Ref": "Vpc" }, "Description": "the VPC" }));
        assert!(v.get("Parameters").is_none());
    }

    #[test]
    fn json_is_deterministic_and_sorted() {
        let a = sample();
        // Same content written in a different order renders to the same bytes and hash.
        let mut b = Template::new("sample");
        b.output("VPCID", r#ref("Vpc"), Some("the VPC"));
        b.add(
            "Subnet",
            Resource::new("AWS::EC2::Subnet", json!({ "CidrBlock": "10.1.0.0/27", "VpcId": r#ref("Vpc") }))
                .depends_on(["Vpc"]),
        );
        b.add("Vpc", Resource::new("AWS::EC2::VPC", json!({ "EnableDnsSupport": true, "CidrBlock": "10.1.0.0/24" })));
        assert_eq!(a.to_json(), b.to_json());
        assert_eq!(a.hash(), b.hash());
        assert_eq!(a.hash().len(), 64);
        let json = a.to_json();
        let first = |needle: &str| json.find(needle).unwrap_or(usize::MAX);
        assert!(first("\"AWSTemplateFormatVersion\"") < first("\"Description\""));
        assert!(first("\"Outputs\"") < first("\"Resources\""));
        assert!(!json.contains('\n'));
        assert!(a.to_json_pretty().contains('\n'));
    }

    #[test]
    fn a_changed_property_changes_the_hash() {
        let a = sample();
        let mut b = sample();
        b.add("Vpc", Resource::new("AWS::EC2::VPC", json!({ "CidrBlock": "10.1.1.0/24", "EnableDnsSupport": true })));
        assert_ne!(a.hash(), b.hash());
    }

    #[test]
    fn intrinsics_have_the_cloudformation_forms() {
        assert_eq!(get_att("Lb", "DNSName"), json!({ "Fn::GetAtt": ["Lb", "DNSName"] }));
        assert_eq!(sub("${AWS::Region}"), json!({ "Fn::Sub": "${AWS::Region}" }));
        assert_eq!(join("", vec![r#ref("Eip"), json!("/32")]), json!({ "Fn::Join": ["", [{ "Ref": "Eip" }, "/32"]] }));
        assert_eq!(base64(json!("x")), json!({ "Fn::Base64": "x" }));
        assert_eq!(tags(&[("Name", "al9qy")]), json!([{ "Key": "Name", "Value": "al9qy" }]));
    }

    #[test]
    fn attributes_are_rendered_when_set() {
        let mut t = Template::new("x");
        t.add(
            "Asg",
            Resource::new("AWS::AutoScaling::AutoScalingGroup", json!({ "MinSize": "1" }))
                .update_policy(json!({ "AutoScalingRollingUpdate": { "MaxBatchSize": 1 } }))
                .deletion_policy(DeletionPolicy::Retain),
        );
        let v = t.to_value();
        assert_eq!(v["Resources"]["Asg"]["UpdatePolicy"]["AutoScalingRollingUpdate"]["MaxBatchSize"], 1);
        assert_eq!(v["Resources"]["Asg"]["DeletionPolicy"], "Retain");
        assert!(v.get("Outputs").is_none(), "an empty Outputs section is left out");
    }
}
