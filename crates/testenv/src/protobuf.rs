//! Decoding of Kubernetes protobuf request bodies, for the kinds that kubectl's typed clients
//! write with `Content-Type: application/vnd.kubernetes.protobuf` (checklist A6).
//!
//! client-go's generated clients send protobuf for built-in kinds: `kubectl drain` posts
//! Evictions that way, and `kubectl create namespace|configmap|secret|serviceaccount` the objects
//! they build. Everything else kubectl does (apply, patch, label, delete, create -f) uses JSON.
//! This module decodes the envelope (`k8s\0` + `runtime.Unknown`) and, driven by small field
//! tables transcribed from the upstream `generated.proto` files, the messages of those kinds into
//! the same JSON the server would have received. Other kinds answer 415, naming what is
//! supported.

use base64::Engine;
use serde_json::{Map, Value, json};

use crate::error::ApiError;

/// The magic prefix of Kubernetes protobuf payloads.
const MAGIC: &[u8] = b"k8s\0";
const MAX_DEPTH: usize = 32;

#[derive(Clone, Copy, Debug)]
enum Ty {
    Str,
    Int64,
    Bool,
    Time,
    Msg(&'static Desc),
    MapStr,
    MapBytes,
    RepeatedStr,
    RepeatedMsg(&'static Desc),
    FieldsV1,
}

#[derive(Debug)]
struct Desc(&'static [(u32, &'static str, Ty)]);

static OWNER_REFERENCE: Desc = Desc(&[
    (5, "apiVersion", Ty::Str),
    (1, "kind", Ty::Str),
    (3, "name", Ty::Str),
    (4, "uid", Ty::Str),
    (6, "controller", Ty::Bool),
    (7, "blockOwnerDeletion", Ty::Bool),
]);
static MANAGED_FIELDS_ENTRY: Desc = Desc(&[
    (1, "manager", Ty::Str),
    (2, "operation", Ty::Str),
    (3, "apiVersion", Ty::Str),
    (4, "time", Ty::Time),
    (6, "fieldsType", Ty::Str),
    (7, "fieldsV1", Ty::FieldsV1),
    (8, "subresource", Ty::Str),
]);
static OBJECT_META: Desc = Desc(&[
    (1, "name", Ty::Str),
    (2, "generateName", Ty::Str),
    (3, "namespace", Ty::Str),
    (4, "selfLink", Ty::Str),
    (5, "uid", Ty::Str),
    (6, "resourceVersion", Ty::Str),
    (7, "generation", Ty::Int64),
    (8, "creationTimestamp", Ty::Time),
    (9, "deletionTimestamp", Ty::Time),
    (10, "deletionGracePeriodSeconds", Ty::Int64),
    (11, "labels", Ty::MapStr),
    (12, "annotations", Ty::MapStr),
    (13, "ownerReferences", Ty::RepeatedMsg(&OWNER_REFERENCE)),
    (14, "finalizers", Ty::RepeatedStr),
    (17, "managedFields", Ty::RepeatedMsg(&MANAGED_FIELDS_ENTRY)),
]);
static PRECONDITIONS: Desc = Desc(&[(1, "uid", Ty::Str), (2, "resourceVersion", Ty::Str)]);
static DELETE_OPTIONS: Desc = Desc(&[
    (1, "gracePeriodSeconds", Ty::Int64),
    (2, "preconditions", Ty::Msg(&PRECONDITIONS)),
    (3, "orphanDependents", Ty::Bool),
    (4, "propagationPolicy", Ty::Str),
    (5, "dryRun", Ty::RepeatedStr),
]);
static EVICTION: Desc = Desc(&[(1, "metadata", Ty::Msg(&OBJECT_META)), (2, "deleteOptions", Ty::Msg(&DELETE_OPTIONS))]);
static CONFIG_MAP: Desc = Desc(&[
    (1, "metadata", Ty::Msg(&OBJECT_META)),
    (2, "data", Ty::MapStr),
    (3, "binaryData", Ty::MapBytes),
    (4, "immutable", Ty::Bool),
]);
static SECRET: Desc = Desc(&[
    (1, "metadata", Ty::Msg(&OBJECT_META)),
    (2, "data", Ty::MapBytes),
    (3, "type", Ty::Str),
    (4, "stringData", Ty::MapStr),
    (5, "immutable", Ty::Bool),
]);
static NAMESPACE_SPEC: Desc = Desc(&[(1, "finalizers", Ty::RepeatedStr)]);
static NAMESPACE: Desc = Desc(&[(1, "metadata", Ty::Msg(&OBJECT_META)), (2, "spec", Ty::Msg(&NAMESPACE_SPEC))]);
static OBJECT_REFERENCE: Desc = Desc(&[
    (1, "kind", Ty::Str),
    (2, "namespace", Ty::Str),
    (3, "name", Ty::Str),
    (4, "uid", Ty::Str),
    (5, "apiVersion", Ty::Str),
    (6, "resourceVersion", Ty::Str),
    (7, "fieldPath", Ty::Str),
]);
static LOCAL_OBJECT_REFERENCE: Desc = Desc(&[(1, "name", Ty::Str)]);
static SERVICE_ACCOUNT: Desc = Desc(&[
    (1, "metadata", Ty::Msg(&OBJECT_META)),
    (2, "secrets", Ty::RepeatedMsg(&OBJECT_REFERENCE)),
    (3, "imagePullSecrets", Ty::RepeatedMsg(&LOCAL_OBJECT_REFERENCE)),
    (4, "automountServiceAccountToken", Ty::Bool),
]);
static BINDING: Desc = Desc(&[(1, "metadata", Ty::Msg(&OBJECT_META)), (2, "target", Ty::Msg(&OBJECT_REFERENCE))]);
static TYPE_META: Desc = Desc(&[(1, "apiVersion", Ty::Str), (2, "kind", Ty::Str)]);

/// The kinds whose protobuf bodies are understood.
const SUPPORTED: &[(&str, &str, &Desc)] = &[
    ("policy/v1", "Eviction", &EVICTION),
    ("v1", "ConfigMap", &CONFIG_MAP),
    ("v1", "Secret", &SECRET),
    ("v1", "Namespace", &NAMESPACE),
    ("v1", "ServiceAccount", &SERVICE_ACCOUNT),
    ("v1", "Binding", &BINDING),
    ("meta.k8s.io/v1", "DeleteOptions", &DELETE_OPTIONS),
    ("v1", "DeleteOptions", &DELETE_OPTIONS),
];

/// Whether a Content-Type is Kubernetes protobuf.
pub fn is_protobuf(content_type: &str) -> bool {
    content_type.split(';').next().unwrap_or("").trim() == "application/vnd.kubernetes.protobuf"
}

/// Decode a protobuf request body into the JSON object it stands for.
pub fn decode(body: &[u8]) -> Result<Value, ApiError> {
    let rest = body
        .strip_prefix(MAGIC)
        .ok_or_else(|| ApiError::bad_request("protobuf body does not start with the Kubernetes magic prefix"))?;
    let mut api_version = String::new();
    let mut kind = String::new();
    let mut raw: &[u8] = &[];
    let mut r = Reader(rest);
    while let Some((field, wire)) = r.key()? {
        match (field, wire) {
            (1, 2) => {
                let tm = decode_message(r.bytes()?, &TYPE_META, 0)?;
                api_version = tm.get("apiVersion").and_then(Value::as_str).unwrap_or("").to_string();
                kind = tm.get("kind").and_then(Value::as_str).unwrap_or("").to_string();
            }
            (2, 2) => raw = r.bytes()?,
            _ => r.skip(wire)?,
        }
    }
    let Some((_, _, desc)) = SUPPORTED.iter().find(|(v, k, _)| *v == api_version && *k == kind) else {
        let names: Vec<String> = SUPPORTED.iter().map(|(v, k, _)| format!("{v} {k}")).collect();
        return Err(ApiError {
            code: 415,
            reason: "UnsupportedMediaType",
            message: format!(
                "protobuf request bodies are supported only for {}; send {api_version} {kind} as application/json",
                names.join(", ")
            ),
            details: None,
        });
    };
    let mut obj = decode_message(raw, desc, 0)?;
    if let Some(map) = obj.as_object_mut() {
        map.insert("apiVersion".into(), json!(api_version));
        map.insert("kind".into(), json!(kind));
    }
    Ok(obj)
}

fn bad(what: &str) -> ApiError {
    ApiError::bad_request(format!("malformed protobuf body: {what}"))
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Result<u64, ApiError> {
        let mut v: u64 = 0;
        for i in 0..10 {
            let (&b, rest) = self.0.split_first().ok_or_else(|| bad("truncated varint"))?;
            self.0 = rest;
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(bad("varint too long"))
    }

    fn key(&mut self) -> Result<Option<(u32, u8)>, ApiError> {
        if self.0.is_empty() {
            return Ok(None);
        }
        let k = self.varint()?;
        let field = u32::try_from(k >> 3).map_err(|_| bad("field number"))?;
        Ok(Some((field, (k & 7) as u8)))
    }

    fn bytes(&mut self) -> Result<&'a [u8], ApiError> {
        let len = usize::try_from(self.varint()?).map_err(|_| bad("length"))?;
        if len > self.0.len() {
            return Err(bad("truncated field"));
        }
        let (head, tail) = self.0.split_at(len);
        self.0 = tail;
        Ok(head)
    }

    fn skip(&mut self, wire: u8) -> Result<(), ApiError> {
        match wire {
            0 => self.varint().map(|_| ()),
            1 => self.advance(8),
            2 => self.bytes().map(|_| ()),
            5 => self.advance(4),
            _ => Err(bad("unsupported wire type")),
        }
    }

    fn advance(&mut self, n: usize) -> Result<(), ApiError> {
        if n > self.0.len() {
            return Err(bad("truncated field"));
        }
        self.0 = &self.0[n..];
        Ok(())
    }
}

fn utf8(b: &[u8]) -> Result<String, ApiError> {
    String::from_utf8(b.to_vec()).map_err(|_| bad("string is not UTF-8"))
}

fn decode_message(buf: &[u8], desc: &Desc, depth: usize) -> Result<Value, ApiError> {
    if depth > MAX_DEPTH {
        return Err(bad("nested too deeply"));
    }
    let mut out = Map::new();
    let mut r = Reader(buf);
    while let Some((field, wire)) = r.key()? {
        let Some((_, name, ty)) = desc.0.iter().find(|(n, _, _)| *n == field) else {
            r.skip(wire)?;
            continue;
        };
        let name = name.to_string();
        match (ty, wire) {
            // Go's marshaller writes zero-valued scalars; JSON's `omitempty` would drop them.
            (Ty::Str, 2) => {
                let s = utf8(r.bytes()?)?;
                if !s.is_empty() {
                    out.insert(name, json!(s));
                }
            }
            (Ty::Int64, 0) => {
                let n = r.varint()? as i64;
                if n != 0 {
                    out.insert(name, json!(n));
                }
            }
            (Ty::Bool, 0) => {
                out.insert(name, json!(r.varint()? != 0));
            }
            (Ty::Time, 2) => {
                let t = decode_time(r.bytes()?)?;
                out.insert(name, t);
            }
            (Ty::Msg(d), 2) => {
                out.insert(name, decode_message(r.bytes()?, d, depth + 1)?);
            }
            (Ty::MapStr | Ty::MapBytes, 2) => {
                let (k, v) = decode_entry(r.bytes()?, matches!(ty, Ty::MapBytes))?;
                let map = out.entry(name).or_insert_with(|| json!({}));
                if let Some(m) = map.as_object_mut() {
                    m.insert(k, v);
                }
            }
            (Ty::RepeatedStr, 2) => {
                let s = utf8(r.bytes()?)?;
                push(&mut out, name, json!(s));
            }
            (Ty::RepeatedMsg(d), 2) => {
                let m = decode_message(r.bytes()?, d, depth + 1)?;
                push(&mut out, name, m);
            }
            (Ty::FieldsV1, 2) => {
                // FieldsV1 { raw = 1 } holds JSON.
                let mut fr = Reader(r.bytes()?);
                while let Some((f, w)) = fr.key()? {
                    if (f, w) == (1, 2) {
                        let v: Value = serde_json::from_slice(fr.bytes()?).map_err(|_| bad("fieldsV1 is not JSON"))?;
                        out.insert(name.clone(), v);
                    } else {
                        fr.skip(w)?;
                    }
                }
            }
            (_, w) => return Err(bad(&format!("field {name} has wire type {w}"))),
        }
    }
    Ok(Value::Object(out))
}

fn push(out: &mut Map<String, Value>, name: String, v: Value) {
    let list = out.entry(name).or_insert_with(|| json!([]));
    if let Some(a) = list.as_array_mut() {
        a.push(v);
    }
}

fn decode_entry(buf: &[u8], bytes_value: bool) -> Result<(String, Value), ApiError> {
    let mut r = Reader(buf);
    let mut key = String::new();
    let mut value = json!("");
    while let Some((f, w)) = r.key()? {
        match (f, w) {
            (1, 2) => key = utf8(r.bytes()?)?,
            (2, 2) => {
                let b = r.bytes()?;
                value = if bytes_value {
                    json!(base64::engine::general_purpose::STANDARD.encode(b))
                } else {
                    json!(utf8(b)?)
                };
            }
            _ => r.skip(w)?,
        }
    }
    Ok((key, value))
}

fn decode_time(buf: &[u8]) -> Result<Value, ApiError> {
    let mut r = Reader(buf);
    let mut seconds: i64 = 0;
    while let Some((f, w)) = r.key()? {
        match (f, w) {
            (1, 0) => seconds = r.varint()? as i64,
            _ => r.skip(w)?,
        }
    }
    let t = jiff::Timestamp::from_second(seconds).map_err(|_| bad("time out of range"))?;
    Ok(json!(crate::api::format_time(t)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn varint(mut v: u64, out: &mut Vec<u8>) {
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(b);
                return;
            }
            out.push(b | 0x80);
        }
    }

    fn field_bytes(field: u32, bytes: &[u8], out: &mut Vec<u8>) {
        varint(u64::from(field) << 3 | 2, out);
        varint(bytes.len() as u64, out);
        out.extend_from_slice(bytes);
    }

    fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
        let mut tm = Vec::new();
        field_bytes(1, api_version.as_bytes(), &mut tm);
        field_bytes(2, kind.as_bytes(), &mut tm);
        let mut unknown = Vec::new();
        field_bytes(1, &tm, &mut unknown);
        field_bytes(2, raw, &mut unknown);
        let mut out = MAGIC.to_vec();
        out.extend(unknown);
        out
    }

    #[test]
    fn decodes_an_eviction_with_delete_options() {
        let mut meta = Vec::new();
        field_bytes(1, b"web-0", &mut meta);
        field_bytes(2, b"", &mut meta);
        field_bytes(3, b"shop", &mut meta);
        let mut opts = Vec::new();
        varint(1 << 3, &mut opts);
        varint(30, &mut opts);
        let mut raw = Vec::new();
        field_bytes(1, &meta, &mut raw);
        field_bytes(2, &opts, &mut raw);
        let v = decode(&envelope("policy/v1", "Eviction", &raw)).unwrap();
        assert_eq!(
            v,
            json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "web-0", "namespace": "shop"}, "deleteOptions": {"gracePeriodSeconds": 30}})
        );
    }

    #[test]
    fn decodes_maps_and_bytes() {
        let mut entry = Vec::new();
        field_bytes(1, b"k", &mut entry);
        field_bytes(2, b"\x00\x01", &mut entry);
        let mut raw = Vec::new();
        field_bytes(2, &entry, &mut raw);
        field_bytes(3, b"Opaque", &mut raw);
        let v = decode(&envelope("v1", "Secret", &raw)).unwrap();
        assert_eq!(v["data"]["k"], "AAE=");
        assert_eq!(v["type"], "Opaque");
    }

    #[test]
    fn unsupported_kinds_and_garbage_are_refused() {
        let e = decode(&envelope("apps/v1", "Deployment", &[])).unwrap_err();
        assert_eq!(e.code, 415);
        assert!(e.message.contains("policy/v1 Eviction"));
        assert_eq!(decode(b"nope").unwrap_err().code, 400);
        let mut truncated = envelope("v1", "ConfigMap", &[0x0a, 0x05, b'a']);
        truncated.truncate(truncated.len());
        assert_eq!(decode(&truncated).unwrap_err().code, 400);
    }
}
