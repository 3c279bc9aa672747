//! The engine's test support lives in `crates/testkit` (`engine`), shared with the benches and
//! the fuzz targets.

pub(crate) use rimthan_testkit::engine::*;
