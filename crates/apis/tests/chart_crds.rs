//! The CRDs shipped in the Helm charts are the ones the Rust types generate: a chart whose
//! `crds/` directory misses a CRD, holds one more, or holds a stale schema fails here.

use std::collections::BTreeMap;
use std::path::PathBuf;

fn charts_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../charts")
}

#[test]
fn chart_crds_match_the_rust_types() {
    let mut problems = Vec::new();
    for (chart, crds) in apis::chart_crds() {
        if apis::OPTIONAL_CHARTS.contains(&chart) && !charts_dir().join(chart).is_dir() {
            continue;
        }
        let dir = charts_dir().join(chart).join("crds");
        let mut on_disk: BTreeMap<String, String> = BTreeMap::new();
        if let Ok(entries) = std::fs::read_dir(&dir) {
            for entry in entries {
                let path = entry.unwrap().path();
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                on_disk.insert(name, std::fs::read_to_string(&path).unwrap());
            }
        }
        for crd in &crds {
            let file = apis::chart_crd_file(crd);
            let want = apis::to_yaml(std::slice::from_ref(crd)).unwrap();
            match on_disk.remove(&file) {
                None => problems.push(format!("charts/{chart}/crds/{file} is missing")),
                Some(have) if have != want => {
                    problems.push(format!("charts/{chart}/crds/{file} differs from the Rust type"))
                }
                Some(_) => {}
            }
        }
        for extra in on_disk.keys() {
            problems.push(format!("charts/{chart}/crds/{extra} is not generated from any Rust type"));
        }
    }
    assert!(problems.is_empty(), "{}\nrun `make chart-crds` and commit the result", problems.join("\n"));
}

#[test]
fn every_chart_ships_the_release_crd() {
    for (chart, crds) in apis::chart_crds() {
        assert!(
            crds.iter().any(|c| c.metadata.name.as_deref() == Some("releases.release.giantswarm.io")),
            "{chart} reconciles by Release, so its chart must ship the Release CRD"
        );
    }
}
