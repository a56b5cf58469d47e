//! Which plugin file a host's end is the doing of, by what the host itself said: the file on the held
//! main thread's stack (`where_held`), or the file it said, under its key, a plugin ended it from. Only a
//! file of plugins/ itself can be blamed: a place in a module it imports (`plugins/lib/x.mjs`) does not
//! say which of the files importing it set the work going.

use std::path::Path;

use super::protocol::ToImport;
use super::where_held::Frame;

/// The files among `files` on a held stack, innermost first, each by position with its own place there
/// (`plugins/x.mjs:3:5`), leaving out those `skip` says; only frames of ES modules loaded as files count.
pub fn held_by<'a>(
    frames: &[Frame],
    files: impl Iterator<Item = &'a ToImport> + Clone,
    plugins_dir: &Path,
    skip: impl Fn(usize) -> bool,
) -> Vec<(usize, String)> {
    let mut found: Vec<(usize, String)> = Vec::new();
    for frame in frames.iter().filter(|f| f.module) {
        let Some(i) = files.clone().position(|f| f.path == frame.file) else {
            continue;
        };
        if skip(i) || found.iter().any(|(j, _)| *j == i) {
            continue;
        }
        if let Some(at) = super::where_held::shown(std::slice::from_ref(frame), plugins_dir) {
            found.push((i, at));
        }
    }
    found
}

/// The files among `files` the host said were on its stack when a plugin ended it, from the places in
/// plugins/ (`plugins/x.mjs:4:28`, innermost first), each by position with its own place, leaving out
/// those `skip` says.
pub fn ended_by<'a>(
    places: &[String],
    files: impl Iterator<Item = &'a ToImport> + Clone,
    skip: impl Fn(usize) -> bool,
) -> Vec<(usize, String)> {
    let mut found: Vec<(usize, String)> = Vec::new();
    for at in places {
        let Some(file) = file_of(at) else { continue };
        let Some(i) = files.clone().position(|f| {
            Path::new(&f.path)
                .file_name()
                .is_some_and(|n| n.to_string_lossy() == file)
        }) else {
            continue;
        };
        if !skip(i) && !found.iter().any(|(j, _)| *j == i) {
            found.push((i, at.clone()));
        }
    }
    found
}

/// The file of plugins/ in a place as the host writes it: `x.mjs` of `plugins/x.mjs:4:28` (`lib/y.mjs`
/// of `plugins/lib/y.mjs:1:1`, which no file's name is).
fn file_of(at: &str) -> Option<&str> {
    let rel = at.strip_prefix("plugins/")?;
    let mut parts = rel.rsplitn(3, ':');
    let (column, line, file) = (parts.next()?, parts.next()?, parts.next()?);
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    (digits(column) && digits(line)).then_some(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files() -> Vec<ToImport> {
        ["a", "b"]
            .iter()
            .map(|n| ToImport {
                name: n.to_string(),
                path: format!("/ws/plugins/{n}.mjs"),
            })
            .collect()
    }

    #[test]
    fn the_files_on_the_stack_come_innermost_first_each_with_its_own_place() {
        let files = files();
        let places = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let nested = places(&[
            "plugins/b.mjs:1:1",
            "plugins/lib/x.mjs:2:2",
            "plugins/a.mjs:3:3",
            "plugins/b.mjs:4:4",
        ]);
        assert_eq!(
            ended_by(&nested, files.iter(), |_| false),
            [
                (1, "plugins/b.mjs:1:1".to_string()),
                (0, "plugins/a.mjs:3:3".to_string())
            ]
        );
        assert_eq!(
            ended_by(&nested, files.iter(), |i| i == 1),
            [(0, "plugins/a.mjs:3:3".to_string())]
        );
        let odd = places(&["plugins/lib/b.mjs:1:1", "plugins/b.mjs:x:1"]);
        assert!(ended_by(&odd, files.iter(), |_| false).is_empty());
        let frame = |file: &str, module| Frame {
            file: file.into(),
            line: 1,
            column: 2,
            module,
        };
        let frames = [
            frame("/ws/plugins/lib/x.mjs", true),
            frame("/ws/plugins/b.mjs", false),
            frame("/ws/plugins/a.mjs", true),
        ];
        assert_eq!(
            held_by(&frames, files.iter(), Path::new("/ws/plugins"), |_| false),
            [(0, "plugins/a.mjs:1:2".to_string())]
        );
    }
}
