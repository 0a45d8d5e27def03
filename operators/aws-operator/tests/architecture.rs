//! The crate's layers: every import points down the layer table in `lib.rs`, and no circle of
//! imports joins the modules it names.

use std::path::Path;

use packaging::layers::Crate;

/// Imports that still run up the table, each removed from this list as it is untangled.
const UNTANGLING: &[(&str, &str)] = &[("context", "controllers::drift")];

#[test]
fn every_import_points_down_the_layer_table() {
    let krate = Crate::read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src")).unwrap();
    let check = krate.check().unwrap();
    println!("{check}");
    println!("largest files:");
    for module in krate.largest(5) {
        println!("  {} {}", module.file.display(), module.lines);
    }
    let upward: Vec<(&str, &str)> = check.upward.iter().map(|(from, _, to, _)| (from.as_str(), to.as_str())).collect();
    assert_eq!(upward, UNTANGLING, "a module imports a layer below it in lib.rs's table:\n{check}");
    assert!(
        check.unit_circles.len() <= usize::from(!UNTANGLING.is_empty()),
        "modules import each other in a circle:\n{check}"
    );
}
