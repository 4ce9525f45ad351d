//! Shell completions and man pages, generated from the CLI's own definition so they never drift
//! from what `hardshift --help` says.

use crate::failure::Failure;
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
pub struct CompletionsArgs {
    /// The shell to complete for; the script goes to stdout (e.g. `hardshift completions bash >
    /// /etc/bash_completion.d/hardshift`).
    pub shell: clap_complete::Shell,
}

#[derive(clap::Args)]
pub struct ManArgs {
    /// Where to write the pages (hardshift.1, hardshift-create.1, ...); created if missing.
    #[arg(long, default_value = "man")]
    pub out: PathBuf,
}

pub fn completions(a: CompletionsArgs, mut cli: clap::Command) -> Result<u8, Failure> {
    let name = cli.get_name().to_string();
    let mut out = Vec::new();
    clap_complete::generate(a.shell, &mut cli, name, &mut out);
    use std::io::Write;
    std::io::stdout()
        .write_all(&out)
        .map_err(|e| Failure::other(format!("stdout: {e}")))?;
    Ok(0)
}

/// Every page: the command's, then one per subcommand at any depth (`hardshift-release-pull.1`),
/// as (file name, roff).
pub fn pages(cli: &clap::Command) -> Vec<(String, Vec<u8>)> {
    let mut cli = cli.clone();
    cli.build();
    let mut out = Vec::new();
    collect(&cli, cli.get_name(), &mut out);
    out
}

fn collect(cmd: &clap::Command, name: &str, out: &mut Vec<(String, Vec<u8>)>) {
    // A subcommand's page is titled by its whole path, as `man hardshift-release-pull` finds it.
    let titled = cmd.clone().name(name.to_string()).bin_name(name.replace('-', " "));
    let mut roff = Vec::new();
    // Rendering into a Vec cannot fail.
    let _ = clap_mangen::Man::new(titled).render(&mut roff);
    out.push((format!("{name}.1"), roff));
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        collect(sub, &format!("{name}-{}", sub.get_name()), out);
    }
}

pub fn man(a: ManArgs, cli: clap::Command) -> Result<u8, Failure> {
    let pages = pages(&cli);
    make_dir(&a.out)?;
    for (file, roff) in &pages {
        let path = a.out.join(file);
        hardshift_generator::fsio::write_file_atomic(&path, roff, 0o644).map_err(|e| Failure::other(format!("{}: {e}", path.display())))?;
    }
    println!("{} man pages in {}", pages.len(), a.out.display());
    Ok(0)
}

/// `--out`: a directory, or a link to one (a distribution's `man1` often is), made when missing.
fn make_dir(dir: &Path) -> Result<(), Failure> {
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(Failure::input(format!(
            "{}: --out must be a directory, and this is not one (give another path)",
            dir.display()
        ))),
        Err(_) => std::fs::create_dir_all(dir).map_err(|e| Failure::other(format!("{}: {e}", dir.display()))),
    }
}
