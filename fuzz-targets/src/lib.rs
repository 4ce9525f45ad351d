//! Nothing here: the fuzz targets are `tests/targets.rs` (see its header).
