//! plugins/: which files are candidates (`candidates`), loading them into a new host (`load`), the
//! runtime.log sentence each one gets (`rows`), and the examples and scaffold that ship in the binary.

pub mod load;
pub mod plugin_rows;
pub mod stale;
pub mod candidates;
pub mod examples;
pub mod scaffold;
