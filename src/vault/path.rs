//! [`VaultPath`]: a path inside the vault, validated once at the boundary.
//!
//! Every path that arrives from a client (tool argument or resource URI) is parsed into a
//! `VaultPath` before anything else happens. A `VaultPath` can only hold normal, visible,
//! UTF-8 components joined by `/`, so code that receives one never has to think about `..`,
//! absolute paths, backslashes or hidden folders again.
//!
//! The parser is deliberately strict and literal: it never percent-decodes, never normalises
//! Unicode, never strips anything but one trailing `/` on folder arguments. What it cannot
//! prove harmless it refuses with a short message that does not echo the input (the input may
//! be an absolute host path, and error messages name only vault-relative paths).

use std::fmt;
use std::sync::Arc;

/// Longest accepted path, in bytes (Linux `PATH_MAX`).
pub const MAX_PATH_BYTES: usize = 4096;
/// Longest accepted path component, in bytes (Linux `NAME_MAX`).
pub const MAX_COMPONENT_BYTES: usize = 255;

/// A relative, normalised, UTF-8 path inside the vault, with `/` separators. Cheap to clone
/// (shared, immutable text): the model holds the same path in several indexes.
///
/// Invariants (upheld by every constructor): no empty components, no `.` or `..`, no
/// component that starts with `.` (hidden), no `\`, NUL or other control character, no `:`
/// except before a space (no drive letters, no `name:stream`), on Windows no name that Windows
/// reads as another file or a device ([`windows_alias`]),
/// no component over [`MAX_COMPONENT_BYTES`], total length at most [`MAX_PATH_BYTES`].
/// The empty path is the vault root; only [`VaultPath::root`] and [`VaultPath::parse_folder`]
/// produce it.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct VaultPath(Arc<str>);

/// Why a client-supplied path was refused. The messages are written for the model reading
/// them: they say what is wrong and what a valid path looks like.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PathError {
    #[error("the path is empty; give a path relative to the vault root, like `folder/Note.md`")]
    Empty,
    #[error("the path is longer than {MAX_PATH_BYTES} bytes")]
    TooLong,
    #[error("a path component is longer than {MAX_COMPONENT_BYTES} bytes")]
    ComponentTooLong,
    #[error(
        "absolute paths are not allowed; give a path relative to the vault root, like `folder/Note.md`"
    )]
    Absolute,
    #[error("`.` and `..` components are not allowed; give a path relative to the vault root")]
    DotComponent,
    #[error("empty path components (`//`) are not allowed")]
    EmptyComponent,
    #[error("backslashes are not allowed; separate folders with `/`")]
    Backslash,
    #[error(
        "drive letters (`C:`) and `name:stream` forms are not allowed; a `:` may only be followed by a space"
    )]
    Colon,
    #[error(
        "this is a URI, not a path: give the path inside the vault (for `capvault:///Notes/A.md`, `Notes/A.md`)"
    )]
    Uri,
    #[error("control characters are not allowed in vault paths")]
    ControlCharacter,
    #[error("hidden files and folders (names starting with `.`) are not accessible")]
    Hidden,
    #[error(
        "Windows reads this name as another file or a device (a short `NAME~1` name, a name ending in `.` or a space, or `CON`, `NUL`, `COM1`...); give the file's full name"
    )]
    WindowsAlias,
}

impl VaultPath {
    /// The vault root (the empty path).
    pub fn root() -> Self {
        VaultPath(Arc::from(""))
    }

    /// Parses a path to a file or folder. The empty string and a trailing `/` are refused.
    ///
    /// ```
    /// use capvault::vault::{PathError, VaultPath};
    ///
    /// let p = VaultPath::parse("Projects/Garden Plan.md").unwrap();
    /// assert_eq!(p.stem(), "Garden Plan");
    /// assert_eq!(VaultPath::parse("../secret.md"), Err(PathError::DotComponent));
    /// assert_eq!(VaultPath::parse(".obsidian/app.json"), Err(PathError::Hidden));
    /// // Never decoded: `%2e%2e` is a literal (and harmless) name.
    /// assert!(VaultPath::parse("%2e%2e/x.md").is_ok());
    /// ```
    pub fn parse(input: &str) -> Result<Self, PathError> {
        if input.is_empty() {
            return Err(PathError::Empty);
        }
        if input.len() > MAX_PATH_BYTES {
            return Err(PathError::TooLong);
        }
        if input.starts_with('/') {
            return Err(PathError::Absolute);
        }
        for component in input.split('/') {
            check_component(component).map_err(|e| match e {
                // `capvault:///Notes/A.md`, `file:///...`: a resource URI given as a path.
                PathError::Colon if input.contains("://") => PathError::Uri,
                e => e,
            })?;
        }
        Ok(VaultPath(Arc::from(input)))
    }

    /// Parses a folder argument: like [`VaultPath::parse`], but the empty string (and `/` alone
    /// is still refused) means the vault root and one trailing `/` is accepted.
    pub fn parse_folder(input: &str) -> Result<Self, PathError> {
        if input.is_empty() {
            return Ok(Self::root());
        }
        let trimmed = input.strip_suffix('/').unwrap_or(input);
        if trimmed.is_empty() {
            return Err(PathError::Absolute);
        }
        Self::parse(trimmed)
    }

    /// A path built by the capability layer itself for its own files (the config folder), which
    /// a client could never give. Only for naming such a file in logs and errors.
    pub(crate) fn internal(path: &str) -> Self {
        VaultPath(Arc::from(path))
    }

    /// The path as a `/`-separated string; empty for the root.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// True for the vault root.
    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }

    /// The components, in order (none for the root).
    pub fn components(&self) -> impl DoubleEndedIterator<Item = &str> {
        self.0.split('/').filter(|c| !c.is_empty())
    }

    /// The last component (the file or folder name), or `""` for the root.
    pub fn file_name(&self) -> &str {
        self.0.rsplit('/').next().unwrap_or("")
    }

    /// The file name without its last extension (`Note` for `a/Note.md`).
    pub fn stem(&self) -> &str {
        let name = self.file_name();
        match name.rfind('.') {
            Some(i) if i > 0 => &name[..i],
            _ => name,
        }
    }

    /// The extension after the last `.` of the file name, if any.
    pub fn extension(&self) -> Option<&str> {
        let name = self.file_name();
        match name.rfind('.') {
            Some(i) if i > 0 => Some(&name[i + 1..]),
            _ => None,
        }
    }

    /// Appends one component that has already passed [`check_component`].
    pub fn join(&self, component: &str) -> Result<Self, PathError> {
        check_component(component)?;
        let joined = if self.0.is_empty() {
            component.to_owned()
        } else {
            format!("{}/{}", self.0, component)
        };
        if joined.len() > MAX_PATH_BYTES {
            return Err(PathError::TooLong);
        }
        Ok(VaultPath(Arc::from(joined)))
    }

    /// The folder that holds this path (the root for a top-level name; `None` for the root).
    pub fn parent(&self) -> Option<VaultPath> {
        if self.is_root() {
            return None;
        }
        Some(match self.0.rfind('/') {
            Some(i) => VaultPath(Arc::from(&self.0[..i])),
            None => VaultPath::root(),
        })
    }

    /// True when `self` is `other` or lies below it (every path lies below the root).
    pub fn starts_with(&self, other: &VaultPath) -> bool {
        other.is_root()
            || self.0 == other.0
            || (self.0.starts_with(&*other.0)
                && self.0.as_bytes().get(other.0.len()) == Some(&b'/'))
    }
}

impl fmt::Display for VaultPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            f.write_str("/")
        } else {
            f.write_str(&self.0)
        }
    }
}

/// Checks one path component against every rule of [`VaultPath`].
pub fn check_component(component: &str) -> Result<(), PathError> {
    if component.is_empty() {
        return Err(PathError::EmptyComponent);
    }
    if component == "." || component == ".." {
        return Err(PathError::DotComponent);
    }
    if component.len() > MAX_COMPONENT_BYTES {
        return Err(PathError::ComponentTooLong);
    }
    if component.starts_with('.') {
        return Err(PathError::Hidden);
    }
    for c in component.chars() {
        if c == '\\' {
            return Err(PathError::Backslash);
        }
        if c.is_control() {
            return Err(PathError::ControlCharacter);
        }
    }
    if !colons_are_literal(component) {
        return Err(PathError::Colon);
    }
    if cfg!(windows) && windows_alias(component) {
        return Err(PathError::WindowsAlias);
    }
    Ok(())
}

/// Whether Windows would open something other than the file `component` spells: it is checked
/// on every path on Windows, and is plain string logic, tested on every platform.
///
/// - A short (8.3) name such as `OBSIDI~1`: NTFS may give every long name one, `.obsidian` and
///   `.git` included, so without this rule `OBSIDI~1/plugins` would reach the hidden folder (and
///   an excluded `Private` folder would be reached as `PRIVAT~1`). Recognised by its shape: at
///   most eight characters, then at most a three-character extension, with `~` and a digit.
/// - A name ending in `.` or a space: Windows drops them, so `Private.` opens `Private`.
/// - A DOS device name (`CON`, `NUL`, `AUX`, `PRN`, `COM1`-`COM9`, `LPT1`-`LPT9`, their
///   superscript-digit forms, `CONIN$`, `CONOUT$`, `CLOCK$`), in any case, with any extension
///   (`nul.md`) or trailing spaces before it: Windows 10 opens the device, and reading `CON`
///   waits for console input.
pub fn windows_alias(component: &str) -> bool {
    if component.ends_with(['.', ' ']) {
        return true;
    }
    let base = component
        .split('.')
        .next()
        .unwrap_or("")
        .trim_end_matches(' ');
    let named = ["CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$", "CLOCK$"]
        .iter()
        .any(|device| base.eq_ignore_ascii_case(device));
    // `COM` or `LPT` and one digit (superscript ¹²³ included); `get` fails off a char boundary.
    let numbered = base.get(..3).is_some_and(|prefix| {
        let mut rest = base[3..].chars();
        (prefix.eq_ignore_ascii_case("COM") || prefix.eq_ignore_ascii_case("LPT"))
            && matches!(
                (rest.next(), rest.next()),
                (Some('0'..='9' | '\u{b9}' | '\u{b2}' | '\u{b3}'), None)
            )
    });
    named || numbered || short_name_shape(component)
}

/// An 8.3 name with a `~N` tail: a base of one to eight characters holding `~` and a digit, and
/// an extension of at most three.
fn short_name_shape(component: &str) -> bool {
    let (base, ext) = match component.rsplit_once('.') {
        Some((base, ext)) => (base, ext),
        None => (component, ""),
    };
    let tilde_digit = base
        .as_bytes()
        .windows(2)
        .any(|w| w[0] == b'~' && w[1].is_ascii_digit());
    tilde_digit && base.chars().count() <= 8 && !base.contains('.') && ext.chars().count() <= 3
}

/// A `:` is harmless text on Unix ("Project: Plan.md" is a real note name in real vaults), but
/// Windows reads `C:` as a drive and `name:stream` as an alternate data stream. Accept a colon
/// only where neither reading is possible: after the first character and before a space, and
/// never on Windows.
fn colons_are_literal(component: &str) -> bool {
    if cfg!(windows) {
        return !component.contains(':');
    }
    let b = component.as_bytes();
    if b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':' {
        return false;
    }
    b.iter()
        .enumerate()
        .filter(|&(_, &c)| c == b':')
        .all(|(i, _)| i > 0 && b.get(i + 1) == Some(&b' '))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn accepts_ordinary_note_paths() {
        for ok in [
            "Note.md",
            "folder/Note.md",
            "a/b/c/Deep note with spaces.md",
            "Ünïcödé/日本語.md",
            "%2e%2e/x.md",
            "．．/x.md",
            "emoji 🎉.md",
        ] {
            let p = VaultPath::parse(ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
            assert_eq!(p.as_str(), ok);
        }
        // A `:` before a space, as in real note names, is a name on Unix; on Windows no file
        // name has a `:` (it names a stream there).
        let colon = "Themes/RedShift: OLED Blue Light Filter.md";
        assert_eq!(
            VaultPath::parse(colon).is_ok(),
            cfg!(not(windows)),
            "{colon}"
        );
    }

    #[test]
    fn refuses_each_attack_form_with_its_reason() {
        let cases: &[(&str, PathError)] = &[
            ("", PathError::Empty),
            ("/etc/passwd", PathError::Absolute),
            ("../x.md", PathError::DotComponent),
            ("a/../../x.md", PathError::DotComponent),
            ("./x.md", PathError::DotComponent),
            ("a//b.md", PathError::EmptyComponent),
            ("a/", PathError::EmptyComponent),
            ("a\\..\\b.md", PathError::Backslash),
            ("\\\\server\\share", PathError::Backslash),
            ("C:/Windows", PathError::Colon),
            ("capvault:///Notes/A.md", PathError::Uri),
            ("file:///home/me/vault/A.md", PathError::Uri),
            ("c:x", PathError::Colon),
            ("note.md:stream", PathError::Colon),
            ("note.md::$DATA", PathError::Colon),
            ("a/Z: drive.md", PathError::Colon),
            ("trailing:", PathError::Colon),
            (": x.md", PathError::Colon),
            ("a\0b", PathError::ControlCharacter),
            ("a\nb", PathError::ControlCharacter),
            ("a\u{85}b", PathError::ControlCharacter),
            (".obsidian/app.json", PathError::Hidden),
            ("notes/.Obsidian/x", PathError::Hidden),
            (".GIT/config", PathError::Hidden),
            ("notes/.env", PathError::Hidden),
            (".trash/x.md", PathError::Hidden),
        ];
        for (input, want) in cases {
            assert_eq!(
                VaultPath::parse(input).as_ref(),
                Err(want),
                "input {input:?}"
            );
        }
        let long_name = "a".repeat(5000);
        assert_eq!(
            VaultPath::parse(&long_name),
            Err(PathError::TooLong),
            "5,000-byte name"
        );
        let long_component = "a".repeat(256);
        assert_eq!(
            VaultPath::parse(&long_component),
            Err(PathError::ComponentTooLong)
        );
        assert!(VaultPath::parse(&"a".repeat(255)).is_ok());
    }

    /// What Windows would open as another file or a device, refused there, and only there (a
    /// name like `Draft~1.md` is an ordinary note on Linux and macOS).
    #[test]
    fn windows_aliases_are_refused_on_windows_only() {
        let aliases = [
            "OBSIDI~1",   // `.obsidian`'s short name: the hidden folder, plugins and all
            "obsidi~1",   // in any case
            "GIT~1",      // `.git`
            "PRIVAT~1",   // an excluded folder by its short name
            "NOTE~12.MD", // a short file name
            "Private.",   // Windows drops the dot: `Private`
            "Private ",   // and the space
            "note.md.",   // `note.md`
            "note.md . ", // both, repeated
            "CON",        // devices
            "con.md",     // with an extension
            "NUL.tar.gz", // and more than one
            "aux .md",    // spaces before the extension
            "Prn",
            "COM1",
            "lpt9.txt",
            "COM\u{b9}.md", // superscript one
            "LPT\u{b3}",
            "CONIN$",
            "conout$.md",
            "CLOCK$",
        ];
        for name in aliases {
            assert!(windows_alias(name), "{name:?} is a Windows alias");
            assert_eq!(
                VaultPath::parse(&format!("notes/{name}/x.md")).err(),
                cfg!(windows).then_some(PathError::WindowsAlias),
                "{name:?}"
            );
        }
        for name in [
            "Note.md",
            "CONTRACT.md", // starts with a device name, is not one
            "Console.md",
            "COM10.md", // only one digit names a device
            "LPT.md",
            "Nullable.md",
            "Draft ~1 of many.md", // too long for a short name
            "My Notes~1.md",
            "~1.md.bak", // the extension is too long
            "a~b.md",    // no digit after the tilde
            "Roadmap v1.0",
            " leading space.md",
            "LP\u{e9}.md", // a character across the device prefix's end
        ] {
            assert!(!windows_alias(name), "{name:?} is an ordinary name");
            assert!(VaultPath::parse(name).is_ok(), "{name:?}");
        }
    }

    #[test]
    fn folder_arguments_accept_root_and_one_trailing_slash() {
        assert!(VaultPath::parse_folder("").unwrap().is_root());
        assert_eq!(VaultPath::parse_folder("a/b/").unwrap().as_str(), "a/b");
        assert_eq!(VaultPath::parse_folder("/"), Err(PathError::Absolute));
        assert_eq!(
            VaultPath::parse_folder("a//"),
            Err(PathError::EmptyComponent)
        );
        assert_eq!(VaultPath::parse_folder("../"), Err(PathError::DotComponent));
    }

    #[test]
    fn name_helpers() {
        let p = VaultPath::parse("a/b/Note.v2.md").unwrap();
        assert_eq!(p.file_name(), "Note.v2.md");
        assert_eq!(p.stem(), "Note.v2");
        assert_eq!(p.extension(), Some("md"));
        assert!(p.starts_with(&VaultPath::parse("a/b").unwrap()));
        assert!(!p.starts_with(&VaultPath::parse("a/bb").unwrap()));
        assert!(
            !VaultPath::parse("ab/x")
                .unwrap()
                .starts_with(&VaultPath::parse("a").unwrap())
        );
        assert!(p.starts_with(&VaultPath::root()));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Any string is either refused or yields only normal, visible components, and the
        /// accepted path displays as exactly the input.
        #[test]
        fn any_string_is_refused_or_yields_only_normal_components(s in any::<String>()) {
            if let Ok(p) = VaultPath::parse(&s) {
                prop_assert_eq!(p.as_str(), s.as_str());
                prop_assert_eq!(p.to_string(), s.clone());
                prop_assert!(!p.is_root());
                for c in p.components() {
                    prop_assert!(!c.is_empty() && c != "." && c != "..");
                    prop_assert!(!c.starts_with('.'));
                    prop_assert!(!c.contains(['\\', '\0']));
                    prop_assert!(colons_are_literal(c));
                    prop_assert!(!(c.len() >= 2 && c.as_bytes()[0].is_ascii_alphabetic() && c.as_bytes()[1] == b':'));
                    prop_assert!(!c.contains(":$") && !c.ends_with(':'));
                    prop_assert!(c.len() <= MAX_COMPONENT_BYTES);
                }
                prop_assert!(s.len() <= MAX_PATH_BYTES);
                let std_path = std::path::Path::new(&s);
                prop_assert!(std_path.is_relative());
                for c in std_path.components() {
                    prop_assert!(matches!(c, std::path::Component::Normal(_)));
                }
                // Parsing is idempotent.
                prop_assert_eq!(VaultPath::parse(p.as_str()), Ok(p.clone()));
            }
        }

        /// Strings built from path-ish pieces (the interesting region) obey the same rules.
        #[test]
        fn pathish_strings_never_yield_dot_dot(parts in proptest::collection::vec(
            prop_oneof![
                Just("..".to_string()), Just(".".to_string()), Just("".to_string()),
                Just(".obsidian".to_string()), Just("a".to_string()), Just("b.md".to_string()),
                Just("\\".to_string()), Just("C:".to_string()), Just("%2e%2e".to_string()),
                "[a-z.]{1,4}",
            ], 0..6), lead in any::<bool>()) {
            let s = format!("{}{}", if lead { "/" } else { "" }, parts.join("/"));
            if let Ok(p) = VaultPath::parse(&s) {
                prop_assert!(p.components().all(|c| c != ".." && c != "." && !c.starts_with('.')));
                prop_assert!(!p.as_str().starts_with('/'));
            }
        }
    }
}
