//! Print every CRD of the project as YAML (`make crds`), or write each chart's CRDs into
//! `<charts>/<chart>/crds/` (`crdgen --charts charts`, run by `make chart-crds`).

use std::path::Path;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.as_slice() {
        [] => apis::to_yaml(&apis::all_crds()).map(|yaml| print!("{yaml}")),
        [flag, dir] if flag == "--charts" => write_charts(Path::new(dir)),
        _ => Err("usage: crdgen [--charts <charts directory>]".to_string()),
    };
    if let Err(e) = result {
        eprintln!("crdgen: {e}");
        std::process::exit(1);
    }
}

/// Replace each chart's `crds/` files with the ones generated from the Rust types.
fn write_charts(charts: &Path) -> Result<(), String> {
    for (chart, crds) in apis::chart_crds() {
        if apis::OPTIONAL_CHARTS.contains(&chart) && !charts.join(chart).is_dir() {
            println!("skipped {chart}: no chart directory {}", charts.join(chart).display());
            continue;
        }
        let dir = charts.join(chart).join("crds");
        if dir.exists() {
            for entry in std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))? {
                let path = entry.map_err(|e| e.to_string())?.path();
                if path.extension().is_some_and(|x| x == "yaml") {
                    std::fs::remove_file(&path).map_err(|e| format!("{}: {e}", path.display()))?;
                }
            }
        }
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for crd in &crds {
            let path = dir.join(apis::chart_crd_file(crd));
            let yaml = apis::to_yaml(std::slice::from_ref(crd))?;
            std::fs::write(&path, yaml).map_err(|e| format!("{}: {e}", path.display()))?;
            println!("wrote {}", path.display());
        }
    }
    Ok(())
}
