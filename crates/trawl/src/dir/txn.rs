//! Atomic writes into an index directory: every operation that writes index files (a build,
//! `trawl layout`, `trawl entry`) leaves the directory holding either the old index or the new
//! one, never a mix, whatever moment it is killed at.
//!
//! An operation ([`Txn`]) writes its new files into `DIR/.trawl-staging/`, the new manifest
//! last. The commit renames that directory to `DIR/.trawl-commit/` (one atomic rename: the
//! commit point), then *rolls forward*: moves each staged file over its final name, deletes
//! the index files the new manifest no longer lists (the stale layouts of an old graph) and
//! moves the manifest last. A directory holding `.trawl-commit/` is an index whose commit is
//! decided but unfinished; whoever comes next — the next writer, or the next reader to open
//! it — finishes the roll forward (it is idempotent), and removes a `.trawl-staging/` left
//! by a writer that died before its commit point.
//!
//! Locks (advisory `flock`): a writer holds `DIR/.trawl.lock` exclusively for its whole
//! operation (one writer at a time; a second is refused at once with [`TxnError::Busy`]).
//! The directory itself is the commit lock: the roll forward holds it exclusively, a reader
//! holds it shared while it opens the files (so it never sees a half-moved directory; once
//! open, its file descriptors keep the files it read even after a rebuild replaces them).

use std::fs::File;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use crate::dir::manifest::{Manifest, LOG_FILE, MANIFEST_FILE};
use crate::dir::FileError;

/// The writer lock file (empty; it only carries the `flock`).
pub const LOCK_FILE: &str = ".trawl.lock";
/// Where an operation writes its files before the commit.
pub const STAGING_DIR: &str = ".trawl-staging";
/// A decided commit being rolled forward.
pub const COMMIT_DIR: &str = ".trawl-commit";

/// Why an atomic write could not start or finish.
#[derive(Debug, thiserror::Error)]
pub enum TxnError {
    /// Another process is writing into the directory.
    #[error("{}: another trawl process is writing this index (it holds {LOCK_FILE}{holder}); wait for it to finish", dir.display())]
    Busy {
        /// The index directory.
        dir: PathBuf,
        /// Who holds the lock, as it wrote itself into the lock file (`: pid …`), or empty.
        holder: String,
    },
    /// The operating system refused (permissions, disk full).
    #[error(transparent)]
    File(#[from] FileError),
    /// A new build would replace an index whose write-ahead log holds acknowledged updates
    /// no merge has folded in (or a log that cannot be read): they would be lost.
    #[error(
        "{}: {what}; a new build would discard them: fold them in with `trawl merge {}` \
         first, or build into another directory (or remove this one)",
        dir.display(),
        dir.display()
    )]
    UnmergedUpdates {
        /// The index directory.
        dir: PathBuf,
        /// What the log holds, in words.
        what: String,
    },
}

impl TxnError {
    /// What kind of failure this is.
    pub fn kind(&self) -> crate::ErrorKind {
        match self {
            Self::Busy { .. } => crate::ErrorKind::Storage,
            Self::UnmergedUpdates { .. } => crate::ErrorKind::InvalidInput,
            Self::File(f) => match f.kind() {
                crate::ErrorKind::NotFound => crate::ErrorKind::Storage,
                k => k,
            },
        }
    }
}

fn io_err(path: &Path) -> impl Fn(std::io::Error) -> FileError + '_ {
    move |e| FileError::new(path, e.into())
}

/// An advisory lock held until dropped.
#[derive(Debug)]
pub(crate) struct Flock {
    file: File,
}

impl Flock {
    /// Locks `file` (`exclusive` or shared); `wait`: block until it is free, else fail at once
    /// (`Ok(None)`) when it is held.
    fn take(file: File, exclusive: bool, wait: bool) -> std::io::Result<Option<Self>> {
        let mut op = if exclusive {
            libc::LOCK_EX
        } else {
            libc::LOCK_SH
        };
        if !wait {
            op |= libc::LOCK_NB;
        }
        loop {
            // SAFETY: flock on a file descriptor this function owns; no memory is passed.
            let rc = unsafe { libc::flock(file.as_raw_fd(), op) };
            if rc == 0 {
                return Ok(Some(Self { file }));
            }
            let e = std::io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EWOULDBLOCK) if !wait => return Ok(None),
                _ => return Err(e),
            }
        }
    }

    /// The directory `dir` itself, locked (the commit lock).
    pub(crate) fn dir(dir: &Path, exclusive: bool) -> Result<Self, FileError> {
        let f = File::open(dir).map_err(io_err(dir))?;
        Self::take(f, exclusive, true)
            .map_err(io_err(dir))?
            .ok_or_else(|| FileError::new(dir, std::io::Error::other("lock not taken").into()))
    }

    /// Releases the lock.
    fn release(self) {
        drop(self.file);
    }
}

/// Takes `dir`'s writer lock without waiting (refused with [`TxnError::Busy`], naming the
/// holder, when another process has it) and writes who holds it into the lock file: the
/// process id, the host and `what` it does.
pub(crate) fn take_writer_lock(dir: &Path, what: &str) -> Result<Flock, TxnError> {
    use std::io::{Read, Seek, Write};
    let lock_path = dir.join(LOCK_FILE);
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(&lock_path)
        .map_err(io_err(&lock_path))?;
    let Some(mut lock) = Flock::take(f, true, false).map_err(io_err(&lock_path))? else {
        let mut holder = String::new();
        let _ = File::open(&lock_path).and_then(|mut f| f.read_to_string(&mut holder));
        let holder = holder.trim();
        return Err(TxnError::Busy {
            dir: dir.to_path_buf(),
            holder: if holder.is_empty() {
                String::new()
            } else {
                format!(": {holder}")
            },
        });
    };
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let text = format!(
        "pid {} on {}, {what}, since unix time {since}\n",
        std::process::id(),
        host.trim()
    );
    let f = &mut lock.file;
    let _ = f
        .set_len(0)
        .and_then(|()| f.rewind())
        .and_then(|()| f.write_all(text.as_bytes()));
    Ok(lock)
}

/// The state of `dir`'s writer lock, tried without waiting.
enum WriterLock {
    /// No writer ever wrote into the directory.
    NoFile,
    /// A writer runs now.
    Held,
    /// No writer runs; the lock is ours until dropped.
    Taken(Flock),
}

fn try_writer_lock(dir: &Path) -> Result<WriterLock, FileError> {
    let path = dir.join(LOCK_FILE);
    let f = match File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(WriterLock::NoFile),
        Err(e) => return Err(FileError::new(&path, e.into())),
    };
    Ok(match Flock::take(f, true, false).map_err(io_err(&path))? {
        Some(l) => WriterLock::Taken(l),
        None => WriterLock::Held,
    })
}

/// Brings `dir` to a settled state before a reader opens it: finishes a decided commit and
/// removes a dead writer's staging directory — when no writer is running (a running writer
/// does that itself, and readers wait for its commit on the directory lock). A reader that
/// cannot write (a read-only copy) still opens an index with nothing to recover; one with a
/// commit to finish gets the OS error.
pub(crate) fn settle_for_reading(dir: &Path) -> Result<(), FileError> {
    if !dir.join(COMMIT_DIR).exists() && !dir.join(STAGING_DIR).exists() {
        return Ok(());
    }
    match try_writer_lock(dir)? {
        WriterLock::Held => Ok(()),
        WriterLock::NoFile => recover(dir, false),
        WriterLock::Taken(l) => {
            let r = recover(dir, false);
            l.release();
            r
        }
    }
}

/// [`recover`] for a caller that holds the writer lock (a live index opening for writing):
/// a commit a killed writer decided is finished, its staging directory removed.
pub(crate) fn recover_held(dir: &Path) -> Result<(), FileError> {
    recover(dir, true)
}

/// Finishes a decided commit and removes a dead writer's staging directory (the caller holds
/// the writer lock, or knows no writer runs). A reader (`strict` false) that cannot remove the
/// staging directory (a read-only copy) goes on: the index itself is complete.
fn recover(dir: &Path, strict: bool) -> Result<(), FileError> {
    let lock = Flock::dir(dir, true)?;
    if dir.join(COMMIT_DIR).exists() {
        roll_forward(dir)?;
    }
    let staging = dir.join(STAGING_DIR);
    if staging.exists() {
        match std::fs::remove_dir_all(&staging) {
            Err(e) if strict => return Err(FileError::new(&staging, e.into())),
            _ => {}
        }
    }
    lock.release();
    Ok(())
}

/// Moves a decided commit into place: each staged file over its final name, deletes the index
/// files the new manifest does not list, the manifest last, then removes the commit
/// directory. Idempotent: a roll forward interrupted at any point is finished by the next.
fn roll_forward(dir: &Path) -> Result<(), FileError> {
    let commit = dir.join(COMMIT_DIR);
    let staged_manifest = commit.join(MANIFEST_FILE);
    if staged_manifest.is_file() {
        for e in std::fs::read_dir(&commit).map_err(io_err(&commit))? {
            let e = e.map_err(io_err(&commit))?;
            let name = e.file_name();
            if name == MANIFEST_FILE {
                continue;
            }
            let from = e.path();
            if name.to_string_lossy().ends_with(".tmp") {
                std::fs::remove_file(&from).map_err(io_err(&from))?;
                continue;
            }
            let to = dir.join(&name);
            std::fs::rename(&from, &to).map_err(io_err(&to))?;
        }
        sync_dir(dir)?;
        let m = Manifest::load_from(&staged_manifest)?;
        // The index files the new manifest does not list belong to the index it replaces
        // (the stale layouts of an old graph, the files of another kind, merged-away vector
        // segments): a trawl file is known by its bytes (`crate::dir::index_files`), so no list of
        // any kind's file names is needed.
        for name in crate::dir::index_files(dir)? {
            if m.file(&name).is_none() {
                remove_if_present(&dir.join(name))?;
            }
        }
        if m.log_seq.is_none() {
            // A new build: the write-ahead log of the index it replaces is stale.
            remove_if_present(&dir.join(LOG_FILE))?;
        }
        let to = dir.join(MANIFEST_FILE);
        std::fs::rename(&staged_manifest, &to).map_err(io_err(&to))?;
        sync_dir(dir)?;
    }
    std::fs::remove_dir_all(&commit).map_err(io_err(&commit))?;
    sync_dir(dir)
}

fn remove_if_present(path: &Path) -> Result<(), FileError> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(FileError::new(path, e.into())),
        _ => Ok(()),
    }
}

/// Makes the directory's entries (renames, new files) durable.
fn sync_dir(dir: &Path) -> Result<(), FileError> {
    File::open(dir)
        .and_then(|f| f.sync_all())
        .map_err(io_err(dir))
}

/// One atomic write into an index directory: files go to [`Txn::path`], and
/// [`Txn::commit`] makes them the index. Dropped without a commit, it removes its staging
/// directory and the index is untouched.
#[derive(Debug)]
pub struct Txn {
    dir: PathBuf,
    staging: PathBuf,
    writer: Option<Flock>,
    committed: bool,
}

impl Txn {
    /// Starts writing into `dir` (created if missing): takes the writer lock (refused at once
    /// when another process holds it), finishes or clears what a dead writer left, and makes
    /// an empty staging directory.
    pub fn begin(dir: &Path) -> Result<Self, TxnError> {
        std::fs::create_dir_all(dir).map_err(io_err(dir))?;
        let writer = take_writer_lock(dir, "writing")?;
        let mut txn = Self::begin_held(dir)?;
        txn.writer = Some(writer);
        Ok(txn)
    }

    /// [`Txn::begin`] for a new build that replaces whatever index `dir` holds: `keep`
    /// (called with the writer lock held and a dead writer's commit finished) refuses when the
    /// index replaced holds what the build would lose — the graph kind's write-ahead log with
    /// updates no merge folded in ([`crate::kinds::graph::refuse_unmerged_updates`]).
    pub fn begin_replacing(
        dir: &Path,
        keep: impl FnOnce(&Path) -> Result<(), TxnError>,
    ) -> Result<Self, TxnError> {
        let txn = Self::begin(dir)?;
        keep(dir)?;
        Ok(txn)
    }

    /// [`Txn::begin`] for a caller that already holds the writer lock (a live index open for
    /// writing, [`crate::kinds::graph::updates::live`]): nothing is locked again.
    pub(crate) fn begin_held(dir: &Path) -> Result<Self, TxnError> {
        recover(dir, true)?;
        let staging = dir.join(STAGING_DIR);
        std::fs::create_dir(&staging).map_err(io_err(&staging))?;
        Ok(Self {
            dir: dir.to_path_buf(),
            staging,
            writer: None,
            committed: false,
        })
    }

    /// The index directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The staging directory (a directory an index can be opened from once its files are in).
    pub fn staging(&self) -> &Path {
        &self.staging
    }

    /// Where to write the file `name` of the new index.
    pub fn path(&self, name: &str) -> PathBuf {
        self.staging.join(name)
    }

    /// Whether `name` was written in this operation.
    pub fn has(&self, name: &str) -> bool {
        self.staging.join(name).is_file()
    }

    /// Commits: writes `manifest` (describing the new index) into the staging directory, then
    /// makes the staged files the index (see the module docs). Returns the manifest's bytes.
    pub fn commit(mut self, manifest: &Manifest) -> Result<u64, TxnError> {
        let bytes = manifest.write_to(&self.staging.join(MANIFEST_FILE))?;
        sync_dir(&self.staging)?;
        let lock = Flock::dir(&self.dir, true)?;
        let commit = self.dir.join(COMMIT_DIR);
        std::fs::rename(&self.staging, &commit).map_err(io_err(&commit))?;
        self.committed = true;
        sync_dir(&self.dir)?;
        roll_forward(&self.dir)?;
        lock.release();
        if let Some(w) = self.writer.take() {
            w.release();
        }
        Ok(bytes)
    }
}

impl Drop for Txn {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_dir_all(&self.staging);
        }
    }
}
