//! Outputs written whole or not at all: every file goes to a temporary file in its own directory and is
//! renamed into place when complete. Temporary files still open when the process is interrupted are
//! removed by [`remove_pending`] (the CLI calls it from its SIGINT/SIGTERM handler).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Temporary files not yet renamed into place.
static PENDING: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn temp_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = format!(".{name}.tpusim-{}.tmp", std::process::id());
    path.with_file_name(tmp)
}

/// Writes `path` through `fill`: the bytes land in a temporary file beside it, renamed over `path`
/// only when `fill` succeeded and the data are flushed. On any error the temporary file is removed
/// and `path` is untouched.
pub fn write_with<E: From<std::io::Error>>(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> Result<(), E>,
) -> Result<(), E> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = temp_path(path);
    if let Ok(mut p) = PENDING.lock() {
        p.push(tmp.clone());
    }
    let result = (|| -> Result<(), E> {
        let file = std::fs::File::create(&tmp)?;
        let mut w = std::io::BufWriter::new(file);
        fill(&mut w)?;
        let file = w.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)?;
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    if let Ok(mut p) = PENDING.lock() {
        p.retain(|x| x != &tmp);
    }
    result
}

/// Like [`write_with`] for writers that need the file itself (seeking, zip archives): `fill` writes
/// the temporary path it is given; it replaces `path` only when `fill` succeeded.
pub fn write_via_path<E: From<std::io::Error>>(
    path: &Path,
    fill: impl FnOnce(&Path) -> Result<(), E>,
) -> Result<(), E> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = temp_path(path);
    if let Ok(mut p) = PENDING.lock() {
        p.push(tmp.clone());
    }
    let result = fill(&tmp).and_then(|()| std::fs::rename(&tmp, path).map_err(E::from));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    if let Ok(mut p) = PENDING.lock() {
        p.retain(|x| x != &tmp);
    }
    result
}

/// Writes `bytes` to `path`, whole or not at all.
pub fn write_atomic(path: impl AsRef<Path>, bytes: impl AsRef<[u8]>) -> std::io::Result<()> {
    write_with(path.as_ref(), |w| w.write_all(bytes.as_ref()))
}

/// Checks that a file can be created at `path` (its directory exists or can be made, and is
/// writable), before long work starts. Leaves nothing behind.
pub fn check_writable(path: &Path) -> std::io::Result<()> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let probe = path.with_file_name(format!(".{name}.probe"));
    write_with(&probe, |_| Ok::<(), std::io::Error>(()))?;
    std::fs::remove_file(&probe)
}

/// Removes every temporary file still being written (on an interrupt).
pub fn remove_pending() {
    if let Ok(p) = PENDING.lock() {
        for t in p.iter() {
            let _ = std::fs::remove_file(t);
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
}
