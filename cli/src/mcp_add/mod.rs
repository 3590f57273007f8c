//! `airlock mcp add pypi:NAME[@VERSION] | npm:NAME[@VERSION]`: any MCP server from PyPI or
//! npm, hosted in one command.
//!
//! The server gets a folder of its own in the daemon's tools directory, named for it: a
//! virtualenv (`pypi.rs`) or a node project (`npm.rs`) with the package installed, the lock
//! file of every package installed with its archive's hash, and a manifest whose command runs
//! the package's executable under a shipped profile (`files.rs`). Everything is made in a
//! staging folder beside it and moved into place only when complete. Nothing installed runs
//! on this machine: wheels only, npm's install scripts off (the installers are run by
//! `installer.rs`); the tools are then listed by the daemon's loader in the server's sandbox
//! (`listing.rs`), and the manifest pins each to what was printed: the listing an operator
//! saw is the one a daemon serves, whatever the server lists when the daemon loads it.

mod files;
mod installer;
mod listing;
mod npm;
mod package;
mod pypi;

use std::io::Write;
use std::path::{Path, PathBuf};

use airlock_client::exit_code;

use crate::error::CliError;
use crate::output::Output;
use crate::server::Server;
use files::{LOCK_FILE, MANIFEST_FILE, ManifestChoices};
use package::{Package, Registry};

/// The longest manifest name (the daemon's rule: `[a-z][a-z0-9_]{0,63}`).
const MAX_NAME_LEN: usize = 64;

#[derive(Debug, clap::Args)]
pub struct AddArgs {
    /// The server's package: pypi:NAME[@VERSION] or npm:NAME[@VERSION] (the latest version
    /// when none is given; the lock records the one installed).
    #[arg(value_name = "REGISTRY:NAME[@VERSION]")]
    package: String,
    /// The daemon's tools directory; the server gets a folder of its own there [default:
    /// ./plugins, airlockd's own default].
    #[arg(long, value_name = "DIR", default_value = "plugins")]
    tools_dir: PathBuf,
    /// The server's manifest name; its tools are served as NAME__<tool> [default: the
    /// package's name without "mcp-server" and the like: `time` for mcp-server-time].
    #[arg(long, value_name = "NAME")]
    name: Option<String>,
    /// The package's executable to run [default: its only one, else the one named like the
    /// package].
    #[arg(long, value_name = "EXECUTABLE")]
    command: Option<String>,
    /// An argument for the server after its executable; repeat for more
    /// (`--arg=--repository --arg=/workspace`).
    #[arg(long = "arg", value_name = "ARG", allow_hyphen_values = true)]
    args: Vec<String>,
    /// What the daemon lists the server's tools in when it loads it: an empty folder, or an
    /// empty git repository for a server that refuses to start outside one.
    #[arg(long, value_name = "KIND", value_parser = ["empty", "git"])]
    listing_workspace: Option<String>,
    /// The server may change its workspace: its changes are captured and applied after each
    /// call, like any writing tool's, and each call takes its turn (`[mcp] workspace =
    /// "read-write"`); its tools' risk is `write` unless the manifest lowers one.
    #[arg(long)]
    writes: bool,
    /// Replace the server's folder if it exists.
    #[arg(long)]
    force: bool,
    /// The sandbox profiles the listing looks the server's profile up in [default: airlockd's,
    /// ./sandbox-profiles].
    #[arg(long, value_name = "DIR")]
    profiles_dir: Option<PathBuf>,
}

pub async fn run<O: Write, E: Write>(
    args: AddArgs,
    server: &Server,
    out: &mut Output<O, E>,
) -> Result<u8, CliError> {
    let package = Package::parse(&args.package).map_err(CliError::Usage)?;
    let name = match &args.name {
        Some(name) => check_name(name)?,
        None => package.server_name(),
    };
    std::fs::create_dir_all(&args.tools_dir).map_err(|err| {
        CliError::Usage(format!(
            "cannot use --tools-dir {}: {err}",
            args.tools_dir.display()
        ))
    })?;
    let folder = args.tools_dir.join(&name);
    if folder.exists() && !args.force {
        return Err(CliError::Usage(format!(
            "{} exists: pass --force to replace it, or --name to add the server under another name",
            folder.display()
        )));
    }
    let staging = Staging::new(&args.tools_dir, &name)?;
    out.line(&format!(
        "installing {package} from {} into {}",
        package.registry.title(),
        folder.display()
    ))?;
    let installed = match package.registry {
        Registry::Pypi => pypi::install(&staging.dir, &package),
        Registry::Npm => npm::install(&staging.dir, &package),
    }
    .map_err(CliError::Install)?;
    let (executable, command) = files::pick_executable(
        &installed.executables,
        &package.name,
        args.command.as_deref(),
    )
    .map_err(CliError::Usage)?;
    let mut command = command.to_vec();
    command.extend(args.args.iter().cloned());
    let written_by = format!(
        "airlock mcp add {}:{}@{}",
        package.registry.as_str(),
        package.name,
        installed.version
    );
    files::write_lock(&staging.dir, &package, &installed).map_err(CliError::Install)?;
    let choices = ManifestChoices {
        name: &name,
        command: &command,
        listing_workspace: args.listing_workspace.as_deref(),
        writes: args.writes,
        written_by: &written_by,
        pins: None,
    };
    files::write_manifest(&staging.dir, &package, &installed, &choices)
        .map_err(CliError::Install)?;
    staging.commit(&folder)?;
    out.stdout(&format!(
        "installed {}:{} {} and {} packages it needs, each with its archive's hash, in {}\n\
         wrote {}: server `{name}` runs `{executable}` under profile {}\n",
        package.registry.as_str(),
        package.name,
        installed.version,
        installed.packages.len().saturating_sub(1),
        folder.join(LOCK_FILE).display(),
        folder.join(MANIFEST_FILE).display(),
        installed.profile,
    ))?;
    out.line("listing its tools in its sandbox, as airlockd does when it loads it:")?;
    let Some(listed) = listing::check(&folder, args.profiles_dir.as_deref(), out)? else {
        out.line(&format!(
            "the server is installed, and airlockd would refuse it as it is: change {} \
             (its arguments, `[mcp] listing_workspace = \"git\"` for a server that needs a \
             repository) and run `airlock tools check {}`",
            folder.join(MANIFEST_FILE).display(),
            folder.display()
        ))?;
        return Ok(exit_code::CHECK_FAILED);
    };
    files::write_manifest(
        &folder,
        &package,
        &installed,
        &ManifestChoices {
            pins: Some(&listed),
            ..choices
        },
    )
    .map_err(CliError::Install)?;
    out.line(&format!(
        "pinned the {} tool(s) listed above in {}, each by its whole definition (description, \
         input schema, annotations: `airlock tools trust {name} --show` prints them in full once \
         a daemon has listed the server): a daemon serves them as pinned, and any other tool \
         only after a review",
        listed.len(),
        folder.join(MANIFEST_FILE).display()
    ))?;
    listing::probe(server, &name, &args.tools_dir, out).await?;
    Ok(exit_code::OK)
}

fn check_name(name: &str) -> Result<String, CliError> {
    let mut bytes = name.bytes();
    let valid = name.len() <= MAX_NAME_LEN
        && bytes.next().is_some_and(|b| b.is_ascii_lowercase())
        && bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if valid {
        Ok(name.to_owned())
    } else {
        Err(CliError::Usage(format!(
            "--name must match [a-z][a-z0-9_]{{0,{}}}, not `{name}`",
            MAX_NAME_LEN - 1
        )))
    }
}

/// The folder an install is made in, beside the server's; removed unless committed.
struct Staging {
    dir: PathBuf,
    committed: bool,
}

impl Staging {
    fn new(tools_dir: &Path, name: &str) -> Result<Staging, CliError> {
        let dir = tools_dir.join(format!(".{name}.adding-{}", std::process::id()));
        std::fs::create_dir(&dir)
            .map_err(|err| CliError::Install(format!("cannot create {}: {err}", dir.display())))?;
        Ok(Staging {
            dir,
            committed: false,
        })
    }

    /// Moves the install to `folder`, replacing what is there.
    fn commit(mut self, folder: &Path) -> Result<(), CliError> {
        let cannot = |what: &str, err: std::io::Error| {
            CliError::Install(format!("cannot {what} {}: {err}", folder.display()))
        };
        match std::fs::remove_dir_all(folder) {
            Ok(()) => {}
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
            Err(err) => return Err(cannot("replace", err)),
        }
        std::fs::rename(&self.dir, folder).map_err(|err| cannot("create", err))?;
        self.committed = true;
        Ok(())
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
