//! Which plugin file a host's end is the doing of, by what the host itself said: the file on the held
//! main thread's stack (`where_held`), or the file it said, under its key, a plugin ended it from. Only a
//! file of plugins/ itself can be blamed: a place in a module it imports (`plugins/lib/x.mjs`) does not
//! say which of the files importing it set the work going.

use std::path::Path;

use super::import::ToImport;
use super::where_held::Frame;

/// The position of the file among `files` whose code holds the host: the innermost frame of the held
/// stack that is one of them (the loop's own code, not a helper that called it, such as a scheduler
/// another file exports); leaving out those `skip` says. Once that file is left out and the work goes on
/// (a file importing it runs it as a module still), the next one out on the stack is named.
pub fn holding<'a>(
    frames: &[Frame],
    files: impl Iterator<Item = &'a ToImport> + Clone,
    skip: impl Fn(usize) -> bool,
) -> Option<usize> {
    frames.iter().filter(|f| f.module).find_map(|frame| {
        files
            .clone()
            .enumerate()
            .find(|(i, f)| !skip(*i) && f.path == frame.file)
            .map(|(i, _)| i)
    })
}

/// The position of the file among `files` that the host said ended it, from the places in plugins/ on
/// the stack (`plugins/x.mjs:4:28`, innermost first): as for a held loop, the innermost that is one of
/// them; leaving out those `skip` says.
pub fn ending<'a>(
    places: &[String],
    files: impl Iterator<Item = &'a ToImport> + Clone,
    skip: impl Fn(usize) -> bool,
) -> Option<usize> {
    places.iter().find_map(|at| {
        let file = file_of(at)?;
        files
            .clone()
            .enumerate()
            .find(|(i, f)| {
                !skip(*i)
                    && Path::new(&f.path)
                        .file_name()
                        .is_some_and(|n| n.to_string_lossy() == file)
            })
            .map(|(i, _)| i)
    })
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
    fn only_a_file_of_plugins_itself_is_blamed() {
        let files = files();
        let places = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let b = places(&["plugins/b.mjs:4:28"]);
        assert_eq!(ending(&b, files.iter(), |_| false), Some(1));
        assert_eq!(ending(&b, files.iter(), |i| i == 1), None);
        let lib = places(&["plugins/lib/b.mjs:1:1"]);
        assert_eq!(ending(&lib, files.iter(), |_| false), None);
        let bad = places(&["plugins/b.mjs:x:1"]);
        assert_eq!(ending(&bad, files.iter(), |_| false), None);
        // Ended in b's code, called through a lib module from a's: b, then a once b is out.
        let nested = places(&[
            "plugins/b.mjs:1:1",
            "plugins/lib/x.mjs:2:2",
            "plugins/a.mjs:3:3",
        ]);
        assert_eq!(ending(&nested, files.iter(), |_| false), Some(1));
        assert_eq!(ending(&nested, files.iter(), |i| i == 1), Some(0));
        let frame = |file: &str| Frame {
            file: file.into(),
            line: 1,
            column: 1,
            module: true,
        };
        let frames = [frame("/ws/plugins/lib/x.mjs"), frame("/ws/plugins/a.mjs")];
        assert_eq!(holding(&frames, files.iter(), |_| false), Some(0));
        assert_eq!(holding(&frames[..1], files.iter(), |_| false), None);
        // a's loop, called from a timer b's scheduler set: a's code holds it; once a is out, b.
        let frames = [frame("/ws/plugins/a.mjs"), frame("/ws/plugins/b.mjs")];
        assert_eq!(holding(&frames, files.iter(), |_| false), Some(0));
        assert_eq!(holding(&frames, files.iter(), |i| i == 0), Some(1));
    }
}
