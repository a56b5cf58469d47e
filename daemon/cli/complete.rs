//! Completion that knows the instance: `ovai call <TAB>` offers the tools of the instance found from here
//! (its built-ins and the files in plugins/), `--seat <TAB>` and `ovai seat remove <TAB>` its seats. The
//! shell asks the binary itself (`COMPLETE=bash ovai …`); `ovai completions SHELL` prints the script that
//! wires a shell to it.

use clap_complete::engine::CompletionCandidate;

use crate::instance::find_root;

/// The tools a call could name here: the built-ins, and plugins/'s files by their tool names.
pub fn tools() -> Vec<CompletionCandidate> {
    let mut names: Vec<String> = crate::tools::BUILTINS
        .iter()
        .map(|s| s.to_string())
        .collect();
    if let Ok(inst) = find_root(None)
        && let Ok(dir) = std::fs::read_dir(inst.plugins_dir())
    {
        for entry in dir.flatten() {
            let file = entry.file_name().to_string_lossy().into_owned();
            if let Some(name) = file.strip_suffix(".mjs")
                && crate::names::why_not(name).is_none()
            {
                names.push(name.to_string());
            }
        }
    }
    names.sort();
    names.dedup();
    names.into_iter().map(CompletionCandidate::new).collect()
}

/// The seats of the instance found from here.
pub fn seats() -> Vec<CompletionCandidate> {
    let Ok(inst) = find_root(None) else {
        return Vec::new();
    };
    let Ok(book) = crate::seats::SeatBook::load(&inst) else {
        return Vec::new();
    };
    book.names().map(CompletionCandidate::new).collect()
}

/// The script that has `shell` complete `ovai` by asking this binary.
pub fn registration(shell: clap_complete::Shell) -> std::io::Result<()> {
    let name = shell.to_string();
    let shells = clap_complete::env::Shells::builtins();
    let Some(completer) = shells.completer(&name) else {
        return Err(std::io::Error::other(format!(
            "{name} is not a shell this ovai completes for; it knows {}",
            shells.names().collect::<Vec<_>>().join(", ")
        )));
    };
    let bin = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "ovai".into());
    let mut script = Vec::new();
    completer.write_registration("COMPLETE", "ovai", "ovai", &bin, &mut script)?;
    // Printed as every command prints: cut short (`| head`), it ends quietly, as by SIGPIPE.
    print!("{}", String::from_utf8_lossy(&script));
    Ok(())
}
