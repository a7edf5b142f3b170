//! A component of an index: one kind of file (a layout's graph file, the PQ codebooks, the
//! entry index, …), owned and registered by the index kind that writes it. It knows its file
//! names, the role the manifest records for them, and how to check one of them whole against
//! the files checked before it — so that verification (`trawl info DIR --verify`) and the manifest are written once,
//! over a kind's list of components, instead of a switch on every file name of every kind.

/// What a component's check found, in words (`trawl info DIR --verify` prints it).
pub type Verified = String;

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

/// A component whose one file has a fixed name.
pub struct Named<Cx: ?Sized, E> {
    /// The file name.
    pub name: &'static str,
    /// The role the manifest records.
    pub role: &'static str,
    /// Checked before the other components' files.
    pub first: bool,
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
            verify: |cx, n| {
                *cx += 1;
                Ok(format!("{n} checked"))
            },
        };
        let b: Named<u32, String> = Named {
            name: "b.trawl",
            role: "b",
            first: false,
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
