//! The example plugins that ship in the binary, for `ovai init --examples` and `ovai demo`.

/// (file name, source) of each example, sorted by file name.
pub const EXAMPLES: &[(&str, &str)] = &[
    ("freeze.mjs", include_str!("../../plugins/freeze.mjs")),
    (
        "last-build.mjs",
        include_str!("../../plugins/last-build.mjs"),
    ),
    ("whoami.mjs", include_str!("../../plugins/whoami.mjs")),
];

/// Writes the examples into `dir`, leaving any file already there untouched (it is somebody's work).
/// Returns the files written.
pub fn write_into(dir: &std::path::Path) -> std::io::Result<Vec<&'static str>> {
    std::fs::create_dir_all(dir)?;
    let mut written = Vec::new();
    for (file, source) in EXAMPLES {
        let path = dir.join(file);
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(mut f) => {
                std::io::Write::write_all(&mut f, source.as_bytes())?;
                written.push(*file);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    Ok(written)
}
