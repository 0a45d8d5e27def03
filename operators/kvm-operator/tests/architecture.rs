//! The crate's layers: every import points down the layer table in `lib.rs`, and no circle of
//! imports joins the modules it names.

use std::path::Path;

use packaging::layers::Crate;

#[test]
fn every_import_points_down_the_layer_table() {
    let krate = Crate::read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src")).unwrap();
    let check = krate.check().unwrap();
    println!("{check}");
    println!("largest files:");
    for module in krate.largest(5) {
        println!("  {} {}", module.file.display(), module.lines);
    }
    assert!(check.upward.is_empty(), "a module imports a layer below it in lib.rs's table:\n{check}");
    assert!(check.unit_circles.is_empty(), "modules import each other in a circle:\n{check}");
}
