//! A generation: one host process tree and the tool table it loaded, with the config it was read with.
//! `ovai serve` builds the first; `ovai restart` builds the next beside it and retires the old one.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::SystemTime;

use crate::host::Host;
use crate::host::child::{Launch, node_program};
use crate::host::process::{HostInit, HostProcess};
use crate::host::sandbox::{self, NoBox, Secrets};
use crate::host::supervisor::Supervision;
use crate::instance::{Config, Instance};
use crate::plugins::load::{self, LoadError};
use crate::plugins::stale::{self, Change, Snapshot};
use crate::runtime_log::{RuntimeLog, timestamp};
use crate::tools::ToolTable;

pub struct Generation {
    /// 1 for the first start, one more for each restart: says which reading of plugins/ is served.
    pub number: u64,
    pub config: Arc<Config>,
    pub tools: ToolTable,
    /// The plugins rows of this reading, one per candidate, as written to runtime.log.
    pub rows: Vec<String>,
    pub loaded_at: String,
    pub host: Arc<Host>,
    /// The Node version the host reported.
    pub node: String,
    /// The box its host runs in, or why none.
    pub isolation: sandbox::Isolation,
    /// What that box may hold.
    pub bounds: crate::host::bounds::Bounds,
    /// What each candidate held when it was read, to tell which files changed since.
    snapshot: Snapshot,
    /// What the modules in plugins/' folders held when they were read.
    pub helpers: Arc<crate::helper_modules::Helpers>,
    /// The file names this reading serves.
    served: HashSet<String>,
}

impl Generation {
    /// The files of plugins/ this reading does not serve, as their rows name them.
    fn not_served(&self) -> impl Iterator<Item = &str> {
        self.rows
            .iter()
            .filter_map(|r| r.strip_prefix("plugins/")?.split_once(" is not served: "))
            .map(|(file, _)| file)
    }

    /// How many files of plugins/ this reading serves, and how many it does not (by their rows).
    pub fn plugin_counts(&self) -> (usize, usize) {
        (self.served.len(), self.not_served().count())
    }

    /// How many `.mjs` files of plugins/ this reading does not serve: tools left out (a `.ts` or `.js`
    /// beside them, told it is no tool, is not one).
    pub fn tools_not_served(&self) -> usize {
        self.not_served()
            .filter(|f| f.to_ascii_lowercase().ends_with(".mjs"))
            .count()
    }

    /// The tools both readings serve whose file's bytes differ: their new code runs from this reading
    /// on, whatever the tool list says.
    pub fn new_code_since(&self, before: &Generation) -> Vec<String> {
        let mut names: Vec<String> = self
            .served
            .iter()
            .filter(|f| before.served.contains(*f))
            .filter(|f| self.snapshot.digest(f) != before.snapshot.digest(f))
            .map(|f| f.strip_suffix(".mjs").unwrap_or(f).to_string())
            .collect();
        names.sort_unstable();
        names
    }

    /// The files in plugins/ that differ from this reading; `Err` when plugins/ cannot be read.
    pub fn stale(&self, inst: &Instance) -> std::io::Result<Vec<Change>> {
        stale::changes(&inst.plugins_dir(), &self.snapshot, &|f| {
            self.served.contains(f)
        })
    }
}

/// How a host of this instance is started; `shim` is where the host script was written.
pub fn launch(inst: &Instance, config: &Config, shim: &Path) -> Result<Launch, NoBox> {
    Ok(Launch {
        node: node_program(),
        shim: shim.to_path_buf(),
        cwd: inst.root.clone(),
        max_memory_mb: config.host_max_memory_mb,
        pass_env: config.plugin_env.clone(),
        isolation: sandbox::decide(config.host_isolation)?,
        secrets: Secrets {
            private_dir: inst.private_dir(),
            desks_dir: inst.desks_dir(),
            root: inst.root.clone(),
            files: tls_files(inst, config, false),
            fixed: tls_files(inst, config, true),
        },
        bounds: crate::host::bounds::Bounds {
            memory_mb: config.host_max_memory_mb,
            processes: config.host_max_processes,
        },
    })
}

/// The TLS key the endpoint serves with and the one openovai.json names; with `folders`, the folders of
/// those and of the certificates instead (not the root itself, whose own files are read-only in the box).
fn tls_files(inst: &Instance, config: &Config, folders: bool) -> Vec<std::path::PathBuf> {
    let named = config.http.iter().filter_map(|h| h.tls.as_ref());
    if !folders {
        return named
            .map(|t| inst.root.join(&t.key))
            .chain(crate::instance::http::served_key())
            .collect();
    }
    let mut dirs: Vec<std::path::PathBuf> = named
        .flat_map(|t| [inst.root.join(&t.cert), inst.root.join(&t.key)])
        .chain(crate::instance::http::served_key())
        .filter_map(|f| f.parent().map(Path::to_path_buf))
        .filter(|d| d != &inst.root && d.is_dir())
        .collect();
    dirs.sort();
    dirs.dedup();
    dirs
}

/// What every call's context shares.
pub fn host_init(inst: &Instance, config: &Config) -> HostInit {
    HostInit {
        root: inst.root.display().to_string(),
        plugins_dir: inst.plugins_dir().display().to_string(),
        config: config.raw.clone(),
        max_answer_bytes: config.max_answer_bytes,
        log: None,
        strays: Default::default(),
        unread: Vec::new(),
        rescuer_first: false,
    }
}

pub async fn build(
    inst: &Instance,
    config: Config,
    number: u64,
    ids: &Arc<AtomicU64>,
    log: &Arc<RuntimeLog>,
) -> Result<Generation, LoadError> {
    // Off the event loop; failing, said before a host starts from what is there.
    let shim = inst.host_shim();
    let kept = tokio::task::spawn_blocking(move || crate::host::child::keep_shim(&shim)).await;
    if let Ok(Err(e)) = kept {
        log.row(
            crate::runtime_log::Topic::Server,
            &format!(
                "The plugin host's script, {}, could not be written again ({e}); a host started from it may \
                 fail.",
                inst.host_shim().display()
            ),
        );
    }
    let launch = launch(inst, &config, &inst.host_shim())?;
    let init = HostInit {
        log: Some(log.clone()),
        ..host_init(inst, &config)
    };
    let plugins_dir = inst.plugins_dir();
    // Reading and hashing every file is blocking work: off the daemon's thread, which serves the
    // sessions meanwhile (a restart).
    let dir = plugins_dir.clone();
    let scan = tokio::task::spawn_blocking(move || {
        let found = load::scan(&dir)?;
        let snapshot = Snapshot::take(&dir, &found);
        let helpers = crate::helper_modules::Helpers::take(&dir);
        let in_folders = crate::plugins::candidates::tools_in_folders(&dir);
        Ok::<_, LoadError>((found, snapshot, helpers, in_folders))
    });
    // The host starts while they are read: its start (its box, Node's own) needs none of them, and
    // is most of a restart's time.
    let (scanned, first) = tokio::join!(scan, HostProcess::start(&launch, &init));
    let (found, snapshot, helpers, in_folders) = scanned.map_err(|e| LoadError::Scan {
        dir: plugins_dir.display().to_string(),
        source: std::io::Error::other(e.to_string()),
    })??;
    let mut loaded = load::load(
        Some(first?),
        &plugins_dir,
        found,
        &launch,
        &init,
        ids,
        config.import_timeout,
    )
    .await?;
    loaded.refuse_changed(&plugins_dir, &snapshot);
    let (process, mut rows, files, plugins) = loaded.into_parts(&plugins_dir, &snapshot);
    let helpers = Arc::new(helpers);
    rows.extend(crate::helper_modules::capped_row(&helpers));
    rows.extend(
        in_folders
            .iter()
            .map(|(file, tool)| crate::plugins::plugin_rows::in_a_folder(file, tool.as_deref())),
    );
    let served = plugins.iter().map(|p| format!("{}.mjs", p.name)).collect();
    let node = process.node.clone();
    let isolation = launch.isolation.clone();
    let bounds = launch.bounds.clone();
    let host = Host::supervise(
        process,
        ids.clone(),
        Supervision {
            launch,
            init,
            files,
            helpers: helpers.clone(),
            import_timeout: config.import_timeout,
            hang_after: config.host_hang,
            log: log.clone(),
        },
    );
    Ok(Generation {
        number,
        config: Arc::new(config),
        tools: ToolTable::new(plugins),
        rows,
        loaded_at: timestamp(SystemTime::now()),
        host,
        node,
        isolation,
        bounds,
        snapshot,
        helpers,
        served,
    })
}
