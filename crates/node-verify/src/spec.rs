//! The Ignition 3.3.0 specification as a strict serde model: every struct refuses fields the
//! specification does not define, and required fields have no default.
//!
//! Field names and types follow coreos/ignition `config/v3_3/types/schema.go` (generated from
//! `config/v3_3/schema/ignition.json`; read at commit a5d574a8d2ad42a6f5702c6982d7c5f67ec05107).
//! `Option` marks what the schema marks `omitempty`; the fields that are plain `string` there
//! (`path`, `name`, `device`) are required here.
#![allow(missing_docs)]

use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Config {
    pub ignition: Ignition,
    pub kernel_arguments: Option<KernelArguments>,
    pub passwd: Option<Passwd>,
    pub storage: Option<Storage>,
    pub systemd: Option<Systemd>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Ignition {
    pub config: Option<IgnitionConfig>,
    pub proxy: Option<Proxy>,
    pub security: Option<Security>,
    pub timeouts: Option<Timeouts>,
    /// Required by validation: the config's spec version.
    pub version: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct IgnitionConfig {
    pub merge: Option<Vec<Resource>>,
    pub replace: Option<Resource>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Proxy {
    pub http_proxy: Option<String>,
    pub https_proxy: Option<String>,
    pub no_proxy: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Security {
    pub tls: Option<Tls>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Tls {
    pub certificate_authorities: Option<Vec<Resource>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Timeouts {
    pub http_response_headers: Option<i64>,
    pub http_total: Option<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct KernelArguments {
    pub should_exist: Option<Vec<String>>,
    pub should_not_exist: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Resource {
    pub compression: Option<String>,
    pub http_headers: Option<Vec<HttpHeader>>,
    pub source: Option<String>,
    pub verification: Option<Verification>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct HttpHeader {
    pub name: String,
    pub value: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Verification {
    pub hash: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Passwd {
    pub groups: Option<Vec<PasswdGroup>>,
    pub users: Option<Vec<PasswdUser>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PasswdGroup {
    pub gid: Option<i64>,
    pub name: String,
    pub password_hash: Option<String>,
    pub should_exist: Option<bool>,
    pub system: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PasswdUser {
    pub gecos: Option<String>,
    pub groups: Option<Vec<String>>,
    pub home_dir: Option<String>,
    pub name: String,
    pub no_create_home: Option<bool>,
    pub no_log_init: Option<bool>,
    pub no_user_group: Option<bool>,
    pub password_hash: Option<String>,
    pub primary_group: Option<String>,
    pub ssh_authorized_keys: Option<Vec<String>>,
    pub shell: Option<String>,
    pub should_exist: Option<bool>,
    pub system: Option<bool>,
    pub uid: Option<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Storage {
    pub directories: Option<Vec<Directory>>,
    pub disks: Option<Vec<Disk>>,
    pub files: Option<Vec<File>>,
    pub filesystems: Option<Vec<Filesystem>>,
    pub links: Option<Vec<Link>>,
    pub luks: Option<Vec<Luks>>,
    pub raid: Option<Vec<Raid>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NodeOwner {
    pub id: Option<i64>,
    pub name: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct File {
    pub group: Option<NodeOwner>,
    pub overwrite: Option<bool>,
    pub path: String,
    pub user: Option<NodeOwner>,
    pub append: Option<Vec<Resource>>,
    pub contents: Option<Resource>,
    pub mode: Option<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Directory {
    pub group: Option<NodeOwner>,
    pub overwrite: Option<bool>,
    pub path: String,
    pub user: Option<NodeOwner>,
    pub mode: Option<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Link {
    pub group: Option<NodeOwner>,
    pub overwrite: Option<bool>,
    pub path: String,
    pub user: Option<NodeOwner>,
    pub hard: Option<bool>,
    pub target: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Disk {
    pub device: String,
    pub partitions: Option<Vec<Partition>>,
    pub wipe_table: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Partition {
    pub guid: Option<String>,
    pub label: Option<String>,
    pub number: Option<i64>,
    pub resize: Option<bool>,
    pub should_exist: Option<bool>,
    #[serde(rename = "sizeMiB")]
    pub size_mib: Option<i64>,
    #[serde(rename = "startMiB")]
    pub start_mib: Option<i64>,
    pub type_guid: Option<String>,
    pub wipe_partition_entry: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Filesystem {
    pub device: String,
    pub format: Option<String>,
    pub label: Option<String>,
    pub mount_options: Option<Vec<String>>,
    pub options: Option<Vec<String>>,
    pub path: Option<String>,
    pub uuid: Option<String>,
    pub wipe_filesystem: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Luks {
    pub clevis: Option<Clevis>,
    pub device: Option<String>,
    pub key_file: Option<Resource>,
    pub label: Option<String>,
    pub name: String,
    pub options: Option<Vec<String>>,
    pub uuid: Option<String>,
    pub wipe_volume: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Clevis {
    pub custom: Option<ClevisCustom>,
    pub tang: Option<Vec<Tang>>,
    pub threshold: Option<i64>,
    pub tpm2: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ClevisCustom {
    pub config: Option<String>,
    pub needs_network: Option<bool>,
    pub pin: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Tang {
    pub thumbprint: Option<String>,
    pub url: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Raid {
    pub devices: Option<Vec<String>>,
    pub level: Option<String>,
    pub name: String,
    pub options: Option<Vec<String>>,
    pub spares: Option<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Systemd {
    pub units: Option<Vec<Unit>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Unit {
    pub contents: Option<String>,
    pub dropins: Option<Vec<Dropin>>,
    pub enabled: Option<bool>,
    pub mask: Option<bool>,
    pub name: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Dropin {
    pub contents: Option<String>,
    pub name: String,
}
