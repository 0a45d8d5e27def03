//! The crate's layers: every import points down the layer table in `lib.rs`, and no circle of
//! imports joins the modules it names.

use std::path::Path;

#[test]
fn every_import_points_down_the_layer_table() {
    packaging::layers::assert_points_down(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
}
