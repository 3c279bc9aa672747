//! The registry's test support lives in `crates/testkit` (`registry`), shared with the benches
//! and the fuzz targets.

pub(crate) use rimthan_testkit::registry::*;
