//! Print every CRD of the project as YAML (`make crds`).

fn main() {
    match apis::to_yaml(&apis::all_crds()) {
        Ok(yaml) => print!("{yaml}"),
        Err(e) => {
            eprintln!("cannot render the CRDs: {e}");
            std::process::exit(1);
        }
    }
}
