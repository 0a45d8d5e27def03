//! Detection of duplicate keys in JSON request bodies, for `fieldValidation=Strict|Warn` (C10).
//!
//! `serde_json::Value` keeps the last of duplicate keys silently, as Go's decoder does; kube's
//! strict decoder reports them (`duplicate field "data"`), so the raw body is scanned once more.

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

/// Paths of duplicated keys, e.g. `data` or `spec.containers[0].name`. Bodies that are not
/// valid JSON yield nothing here: the decoder reports them.
pub fn duplicate_fields(body: &[u8]) -> Vec<String> {
    let mut found = Vec::new();
    let mut de = serde_json::Deserializer::from_slice(body);
    let _ = Scan { path: String::new(), found: &mut found, depth: 0 }.deserialize(&mut de);
    found
}

struct Scan<'a> {
    path: String,
    found: &'a mut Vec<String>,
    depth: usize,
}

impl<'de> DeserializeSeed<'de> for Scan<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Scan<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0;
        loop {
            let path = format!("{}[{i}]", self.path);
            let seed = Scan { path, found: &mut *self.found, depth: self.depth + 1 };
            if self.depth > 128 || seq.next_element_seed(seed)?.is_none() {
                return Ok(());
            }
            i += 1;
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = std::collections::HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            let path = if self.path.is_empty() { key.clone() } else { format!("{}.{key}", self.path) };
            if !seen.insert(key) {
                self.found.push(path.clone());
            }
            if self.depth > 128 {
                map.next_value::<serde::de::IgnoredAny>()?;
                continue;
            }
            map.next_value_seed(Scan { path, found: &mut *self.found, depth: self.depth + 1 })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_nested_duplicates() {
        let body = br#"{"data": {"k": "1", "k": "2"}, "data": {}, "items": [{"a": 1, "a": 2}]}"#;
        assert_eq!(duplicate_fields(body), ["data.k", "data", "items[0].a"]);
        assert!(duplicate_fields(br#"{"a": {"b": 1}, "b": 2}"#).is_empty());
        assert!(duplicate_fields(b"not json").is_empty());
    }
}
