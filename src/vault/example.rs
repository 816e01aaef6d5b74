//! The example vault (`examples/vault/`), embedded in the binary so that `capvault demo` works
//! wherever capvault is installed.

use include_dir::{Dir as EmbeddedDir, include_dir};

use super::{Limits, OpenError, Vault};

/// Why the example vault could not be unpacked.
#[derive(Debug, thiserror::Error)]
pub enum ExampleError {
    /// The temporary folder, or a file or folder in it, could not be created.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The copy could not be opened as a vault.
    #[error(transparent)]
    Open(#[from] OpenError),
}

/// The files of `examples/vault/`, compiled in.
static EXAMPLE: EmbeddedDir<'static> = include_dir!("$CARGO_MANIFEST_DIR/examples/vault");

/// A copy of the example vault in a fresh temporary folder, removed when dropped.
pub struct ExampleVault {
    /// The vault opened on the copy.
    pub vault: Vault,
    /// Keeps the folder alive; dropping it deletes the copy.
    _dir: tempfile::TempDir,
}

/// Unpacks the example vault into a new temporary folder and opens it.
///
/// The folder is created empty by `tempfile`; every file is then written through the vault's
/// own root handle, so this goes through the capability layer like everything else.
pub fn unpack() -> Result<ExampleVault, ExampleError> {
    let dir = tempfile::Builder::new()
        .prefix("capvault-demo-")
        .tempdir()?;
    let root = dir.path().join("example-vault");
    let vault = {
        // Create the vault folder itself inside the private temp folder.
        let parent = Vault::open(dir.path(), Limits::default())?;
        parent.root.create_dir("example-vault")?;
        drop(parent);
        Vault::open(&root, Limits::default())?
    };
    write_tree(&vault, &EXAMPLE)?;
    Ok(ExampleVault { vault, _dir: dir })
}

fn write_tree(vault: &Vault, dir: &EmbeddedDir<'_>) -> std::io::Result<()> {
    for file in dir.files() {
        if let Some(parent) = file.path().parent().filter(|p| !p.as_os_str().is_empty()) {
            vault.root.create_dir_all(parent)?;
        }
        vault.root.write(file.path(), file.contents())?;
    }
    for sub in dir.dirs() {
        vault.root.create_dir_all(sub.path())?;
        write_tree(vault, sub)?;
    }
    Ok(())
}

/// Every embedded file as (vault path, contents), for tests and docs.
pub fn files() -> Vec<(String, &'static [u8])> {
    let mut out = Vec::new();
    collect(&EXAMPLE, &mut out);
    out.sort();
    out
}

fn collect(dir: &EmbeddedDir<'static>, out: &mut Vec<(String, &'static [u8])>) {
    for file in dir.files() {
        out.push((file.path().to_string_lossy().into_owned(), file.contents()));
    }
    for sub in dir.dirs() {
        collect(sub, out);
    }
}
