//! plugins/: which files are candidates (`candidates`), loading them into a new host (`load`), the
//! runtime.log sentence each one gets (`plugin_rows`), what was read of each, to tell a file saved
//! since (`stale`), and the examples and scaffold that ship in the binary.

pub mod load;
pub mod plugin_rows;
pub mod stale;
pub mod candidates;
pub mod examples;
pub mod scaffold;
