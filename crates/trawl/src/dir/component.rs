//! A component of an index: one kind of file (a layout's graph file, the PQ codebooks, the
//! entry index, …), owned and registered by the index kind that writes it. It knows its file
//! names, the role the manifest records for them, and how to check one of them whole against
//! the files checked before it — so that verification (`trawl info DIR --verify`,
//! [`verify_files`]) and the manifest's file list ([`entries`]) are written once, over a
//! kind's list of components, instead of a switch on every file name of every kind.

use std::path::Path;

use serde::Serialize;

use crate::dir::manifest::{entry_of, Manifest, ManifestFile, MANIFEST_FILE};
use crate::dir::{DirError, FileError};

/// What a component's check found, in words (`trawl info DIR --verify` prints it).
pub type Verified = String;

/// One verified file.
#[derive(Debug, Clone, Serialize)]
pub struct VerifiedFile {
    /// File name in the index directory.
    pub name: String,
    /// Bytes.
    pub bytes: u64,
    /// What was checked, in words.
    pub checked: String,
}

/// One kind of file of an index. `Cx` is what the kind's checks share (the directory, the
/// build the first graph file set, a progress handle); `E` the kind's error.
pub trait Component<Cx: ?Sized, E>: Sync {
    /// The role the manifest records for this component's files (`pq`, `packed`, …).
    fn role(&self) -> &'static str;

    /// Whether the file `name` is one of this component's.
    fn owns(&self, name: &str) -> bool;

    /// Whether its files are checked before the others' (they set what the others are
    /// checked against: a graph file sets the build).
    fn first(&self) -> bool {
        false
    }

    /// The name of its one file, when the name is fixed (a component of files named at run
    /// time — a merge's vector segments — has none, and its kind lists them itself).
    fn file_name(&self) -> Option<&'static str> {
        None
    }

    /// Whether every index of its kind has its file ([`entries`] fails without it); else the
    /// file is optional (a second vector layout, the entry index).
    fn required(&self) -> bool {
        false
    }

    /// Reads the file `name` whole and checks it, alone and against what `cx` holds; returns
    /// what was checked.
    fn verify(&self, cx: &mut Cx, name: &str) -> Result<Verified, E>;
}

/// The component of `components` that owns the file `name`.
pub fn owner<'a, Cx: ?Sized, E>(
    components: &[&'a dyn Component<Cx, E>],
    name: &str,
) -> Option<&'a dyn Component<Cx, E>> {
    components.iter().copied().find(|c| c.owns(name))
}

/// The manifest entries of the fixed-name files of `components` found in `dir`, in the
/// components' order: a required file that is missing is an error, an optional one is left
/// out.
pub fn entries<Cx: ?Sized, E>(
    dir: &Path,
    components: &[&dyn Component<Cx, E>],
) -> Result<Vec<ManifestFile>, FileError> {
    let mut files = Vec::new();
    for c in components {
        let Some(name) = c.file_name() else {
            continue;
        };
        if c.required() || dir.join(name).is_file() {
            files.push(entry_of(dir, name, c.role())?);
        }
    }
    Ok(files)
}

/// Checks every file of the index in `dir` with the component of `components` that owns it:
/// the manifest's files (each must be there and match its entry, and no index file may be
/// there that it does not list), else every index file present; the files of the components
/// checked [`Component::first`] before the others. Returns the files in the order checked.
pub fn verify_files<Cx: ?Sized, E: From<DirError>>(
    dir: &Path,
    manifest: Option<&Manifest>,
    components: &[&dyn Component<Cx, E>],
    cx: &mut Cx,
) -> Result<Vec<VerifiedFile>, E> {
    let mismatch = |reason: String| DirError::Mismatch {
        dir: dir.to_path_buf(),
        reason,
    };
    let names: Vec<String> = match manifest {
        Some(m) => {
            let listed: Vec<&str> = m.files.iter().map(|f| f.name.as_str()).collect();
            m.check_files(dir, &listed)?;
            for f in &m.files {
                if !dir.join(&f.name).is_file() {
                    let reason = format!("{} is missing (the manifest lists it)", f.name);
                    return Err(mismatch(reason).into());
                }
            }
            for name in crate::dir::index_files(dir).map_err(DirError::from)? {
                if m.file(&name).is_none() {
                    let reason =
                        format!("{name} is not part of this index (its manifest does not list it)");
                    return Err(mismatch(reason).into());
                }
            }
            listed.iter().map(|n| n.to_string()).collect()
        }
        None => crate::dir::index_files(dir).map_err(DirError::from)?,
    };
    let mut ordered = names;
    ordered.sort_by_key(|n| !owner(components, n).is_some_and(|c| c.first()));
    let mut out = Vec::with_capacity(ordered.len());
    for name in ordered {
        let Some(c) = owner(components, &name) else {
            return Err(mismatch(format!("{name} is not a file of this index kind")).into());
        };
        let checked = c.verify(cx, &name)?;
        out.push(VerifiedFile {
            bytes: file_bytes(dir, &name).map_err(DirError::from)?,
            name,
            checked,
        });
    }
    Ok(out)
}

/// The manifest of `dir`, as a verified file (its checksum was checked when it was loaded).
pub fn verified_manifest(dir: &Path) -> Result<VerifiedFile, FileError> {
    Ok(VerifiedFile {
        name: MANIFEST_FILE.into(),
        bytes: file_bytes(dir, MANIFEST_FILE)?,
        checked: "checksum matches; lists every file with its size and header checksum".into(),
    })
}

fn file_bytes(dir: &Path, name: &str) -> Result<u64, FileError> {
    let path = dir.join(name);
    Ok(std::fs::metadata(&path)
        .map_err(|e| FileError::new(&path, e.into()))?
        .len())
}

/// A component whose one file has a fixed name.
pub struct Named<Cx: ?Sized, E> {
    /// The file name.
    pub name: &'static str,
    /// The role the manifest records.
    pub role: &'static str,
    /// Checked before the other components' files.
    pub first: bool,
    /// Every index of its kind has it.
    pub required: bool,
    /// The check.
    pub verify: fn(&mut Cx, &str) -> Result<Verified, E>,
}

impl<Cx: ?Sized, E> std::fmt::Debug for Named<Cx, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Named")
            .field("name", &self.name)
            .field("role", &self.role)
            .finish_non_exhaustive()
    }
}

impl<Cx: ?Sized, E> Component<Cx, E> for Named<Cx, E> {
    fn role(&self) -> &'static str {
        self.role
    }
    fn owns(&self, name: &str) -> bool {
        name == self.name
    }
    fn first(&self) -> bool {
        self.first
    }
    fn file_name(&self) -> Option<&'static str> {
        Some(self.name)
    }
    fn required(&self) -> bool {
        self.required
    }
    fn verify(&self, cx: &mut Cx, name: &str) -> Result<Verified, E> {
        (self.verify)(cx, name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_owner_of_a_file_is_the_component_naming_it() {
        let a: Named<u32, String> = Named {
            name: "a.trawl",
            role: "a",
            first: true,
            required: true,
            verify: |cx, n| {
                *cx += 1;
                Ok(format!("{n} checked"))
            },
        };
        let b: Named<u32, String> = Named {
            name: "b.trawl",
            role: "b",
            first: false,
            required: false,
            verify: |_, n| Err(format!("{n} is bad")),
        };
        let all: [&dyn Component<u32, String>; 2] = [&a, &b];
        let mut cx = 0;
        let c = owner(&all, "a.trawl").unwrap();
        assert_eq!((c.role(), c.first()), ("a", true));
        assert_eq!(c.verify(&mut cx, "a.trawl").unwrap(), "a.trawl checked");
        assert_eq!(cx, 1);
        assert!(owner(&all, "b.trawl")
            .unwrap()
            .verify(&mut cx, "b.trawl")
            .is_err());
        assert!(owner(&all, "c.trawl").is_none());
    }
}
