//! Outputs written whole or not at all: every file goes to a temporary file in its own directory and is
//! renamed into place when complete. Temporary files still open when the process is interrupted are
//! removed by [`remove_pending`] (the CLI calls it from its SIGINT/SIGTERM handler).
//!
//! A command's files are one [`OutputSet`]: while a set is open, finished files stay under their
//! temporary names and are renamed into place together by [`OutputSet::commit`]; a set dropped
//! without a commit (the command failed) removes them and the directories it created, so a failing
//! command leaves no new file. A set belongs to the thread that opened it (a nested `begin` on that
//! thread joins it): the CLI opens one per command.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Temporary files not yet renamed into place.
static PENDING: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// The open output set: nesting depth, finished files (temporary, final) and directories it created.
#[derive(Default)]
struct Staging {
    depth: usize,
    files: Vec<(PathBuf, PathBuf)>,
    dirs: Vec<PathBuf>,
}

thread_local! {
    /// Per thread, so concurrent commands in one process (Python threads, parallel tests) each
    /// have their own set; a file written on another thread than its set's is renamed at once.
    static STAGING: std::cell::RefCell<Staging> = std::cell::RefCell::new(Staging::default());
}

fn staging<R>(f: impl FnOnce(&mut Staging) -> R) -> R {
    STAGING.with(|s| f(&mut s.borrow_mut()))
}

fn temp_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = format!(".{name}.tpusim-{}.tmp", std::process::id());
    path.with_file_name(tmp)
}

fn is_a_directory(path: &Path) -> std::io::Error {
    std::io::Error::other(format!("{} is a directory; a file is expected here", path.display()))
}

/// Creates `dir` and its missing parents; inside an open set, those it created are removed again
/// if the set is not committed.
pub fn create_dir_all(dir: &Path) -> std::io::Result<()> {
    if dir.as_os_str().is_empty() || dir.is_dir() {
        return Ok(());
    }
    if dir.exists() {
        return Err(std::io::Error::other(format!(
            "{} is a file; a directory is expected here",
            dir.display()
        )));
    }
    let missing: Vec<PathBuf> = dir
        .ancestors()
        .take_while(|a| !a.as_os_str().is_empty() && !a.exists())
        .map(Path::to_path_buf)
        .collect();
    std::fs::create_dir_all(dir)?;
    staging(|s| {
        if s.depth > 0 {
            s.dirs.extend(missing);
        }
    });
    Ok(())
}

fn parent_dir(path: &Path) -> std::io::Result<()> {
    match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(dir) => create_dir_all(dir),
        None => Ok(()),
    }
}

fn forget_pending(tmp: &Path) {
    if let Ok(mut p) = PENDING.lock() {
        p.retain(|x| x != tmp);
    }
}

/// A finished temporary file: renamed now, or staged until the open set commits.
fn finish(tmp: &Path, path: &Path) -> std::io::Result<()> {
    if path.is_dir() {
        return Err(is_a_directory(path));
    }
    let staged = staging(|s| {
        if s.depth == 0 {
            return false;
        }
        s.files.retain(|(_, p)| p != path);
        s.files.push((tmp.to_path_buf(), path.to_path_buf()));
        true
    });
    if staged {
        return Ok(());
    }
    std::fs::rename(tmp, path)?;
    forget_pending(tmp);
    Ok(())
}

/// Writes `path` through `fill`: the bytes land in a temporary file beside it, renamed over `path`
/// only when `fill` succeeded and the data are flushed (inside an open [`OutputSet`], when the set
/// commits). On any error the temporary file is removed and `path` is untouched.
pub fn write_with<E: From<std::io::Error>>(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> Result<(), E>,
) -> Result<(), E> {
    write_via_path(path, |tmp| -> Result<(), E> {
        let file = std::fs::File::create(tmp)?;
        let mut w = std::io::BufWriter::new(file);
        fill(&mut w)?;
        let file = w.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        Ok(())
    })
}

/// Like [`write_with`] for writers that need the file itself (seeking, zip archives): `fill` writes
/// the temporary path it is given; it replaces `path` only when `fill` succeeded.
pub fn write_via_path<E: From<std::io::Error>>(
    path: &Path,
    fill: impl FnOnce(&Path) -> Result<(), E>,
) -> Result<(), E> {
    if path.is_dir() {
        return Err(is_a_directory(path).into());
    }
    parent_dir(path)?;
    let tmp = temp_path(path);
    if let Ok(mut p) = PENDING.lock() {
        p.push(tmp.clone());
    }
    let result = fill(&tmp).and_then(|()| finish(&tmp, path).map_err(E::from));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
        forget_pending(&tmp);
    }
    result
}

/// Writes `bytes` to `path`, whole or not at all.
pub fn write_atomic(path: impl AsRef<Path>, bytes: impl AsRef<[u8]>) -> std::io::Result<()> {
    write_with(path.as_ref(), |w| w.write_all(bytes.as_ref()))
}

/// Checks that a file can be created at `path` (not a directory; its directory exists or can be
/// made, and is writable), before long work starts. Leaves nothing behind.
pub fn check_writable(path: &Path) -> std::io::Result<()> {
    if path.is_dir() {
        return Err(is_a_directory(path));
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let probe = path.with_file_name(format!(".{name}.probe"));
    // Directories made for the probe go again with it (unless a set keeps them for its files).
    let made: Vec<PathBuf> = probe
        .parent()
        .map(|d| {
            d.ancestors()
                .take_while(|a| !a.as_os_str().is_empty() && !a.exists())
                .map(Path::to_path_buf)
                .collect()
        })
        .unwrap_or_default();
    let result = (|| {
        if let Some(d) = probe.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(d)?;
        }
        std::fs::File::create(&probe)?;
        std::fs::remove_file(&probe)
    })();
    for d in &made {
        let _ = std::fs::remove_dir(d);
    }
    result
}

/// Checks that `dir` can hold the files named `files`: it is a directory or can be made (and is
/// writable), and none of them is a directory. Leaves nothing behind.
pub fn check_dir(dir: &Path, files: &[&str]) -> std::io::Result<()> {
    if dir.exists() && !dir.is_dir() {
        return Err(std::io::Error::other(format!(
            "{} is a file; a directory is expected here",
            dir.display()
        )));
    }
    for f in files {
        let p = dir.join(f);
        if p.is_dir() {
            return Err(is_a_directory(&p));
        }
    }
    check_writable(&dir.join(files.first().copied().unwrap_or("output")))
}

/// Removes every temporary file still being written (on an interrupt).
pub fn remove_pending() {
    if let Ok(p) = PENDING.lock() {
        for t in p.iter() {
            let _ = std::fs::remove_file(t);
        }
    }
}

/// The files of one command, renamed into place together (see the module doc).
#[must_use = "an output set not committed removes its files when dropped"]
pub struct OutputSet {
    open: bool,
}

impl OutputSet {
    /// Opens the set (or joins the one already open on this thread).
    pub fn begin() -> Self {
        staging(|s| s.depth += 1);
        OutputSet { open: true }
    }

    /// Renames every finished file of the set into place (the outermost set; a nested one leaves
    /// that to it). A rename that fails removes the temporary files not yet renamed.
    pub fn commit(mut self) -> std::io::Result<()> {
        self.open = false;
        let Some(files) = staging(|s| {
            s.depth -= 1;
            (s.depth == 0).then(|| {
                s.dirs.clear();
                std::mem::take(&mut s.files)
            })
        }) else {
            return Ok(());
        };
        let mut result = Ok(());
        for (tmp, path) in &files {
            if result.is_ok() {
                result = std::fs::rename(tmp, path)
                    .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", path.display())));
            }
            if result.is_err() {
                let _ = std::fs::remove_file(tmp);
            }
            forget_pending(tmp);
        }
        result
    }
}

impl Drop for OutputSet {
    fn drop(&mut self) {
        if !self.open {
            return;
        }
        let Some((files, mut dirs)) = staging(|s| {
            s.depth -= 1;
            (s.depth == 0).then(|| (std::mem::take(&mut s.files), std::mem::take(&mut s.dirs)))
        }) else {
            return;
        };
        for (tmp, _) in &files {
            let _ = std::fs::remove_file(tmp);
            forget_pending(tmp);
        }
        // Only directories the set made, and only when empty again: deepest first.
        dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
        for d in &dirs {
            let _ = std::fs::remove_dir(d);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_write_leaves_nothing_and_keeps_the_old_file() {
        let dir = std::env::temp_dir().join(format!("tpusim-output-{}", std::process::id()));
        let path = dir.join("out.json");
        write_atomic(&path, b"old").unwrap();
        let r = write_with(&path, |w| {
            w.write_all(b"half")?;
            Err(std::io::Error::other("interrupted"))
        });
        assert!(r.is_err());
        assert_eq!(std::fs::read(&path).unwrap(), b"old");
        let leftovers: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(leftovers.len(), 1, "{leftovers:?}");
        write_atomic(&path, b"new").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        check_writable(&path).unwrap();
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_set_not_committed_leaves_no_file_and_no_directory() {
        let dir = std::env::temp_dir().join(format!("tpusim-output-set-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let set = OutputSet::begin();
        write_atomic(dir.join("a/b/one.json"), b"1").unwrap();
        write_atomic(dir.join("two.csv"), b"2").unwrap();
        // Nothing is in place before the commit.
        assert!(!dir.join("two.csv").exists());
        drop(set);
        assert!(!dir.exists(), "the set made {} and must remove it", dir.display());

        let set = OutputSet::begin();
        write_atomic(dir.join("a/one.json"), b"1").unwrap();
        write_atomic(dir.join("two.csv"), b"2").unwrap();
        set.commit().unwrap();
        assert_eq!(std::fs::read(dir.join("a/one.json")).unwrap(), b"1");
        assert_eq!(std::fs::read(dir.join("two.csv")).unwrap(), b"2");
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_directory_where_a_file_is_expected_is_refused_up_front() {
        let dir = std::env::temp_dir().join(format!("tpusim-output-dir-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sweep.json")).unwrap();
        let e = check_dir(&dir, &["sweep.csv", "sweep.json"]).unwrap_err();
        assert!(e.to_string().contains("sweep.json is a directory"), "{e}");
        assert!(check_writable(&dir.join("sweep.json")).is_err());
        assert!(write_atomic(dir.join("sweep.json"), b"x").is_err());
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
