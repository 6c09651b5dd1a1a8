//! [`CompilerVersion`]: which IREE compiler build produced an artifact.

use std::fmt;

/// Version of an embedding API (`ireeCompilerGetAPIVersion`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[expect(
    clippy::exhaustive_structs,
    reason = "a version is its major and minor number, compared in that order; callers build and \
        destructure it as a pair"
)]
pub struct ApiVersion {
    /// Major version: incompatible changes.
    pub major: u32,
    /// Minor version: additions.
    pub minor: u32,
}

impl ApiVersion {
    /// The API this driver is written and tested against (IREE 3.13 ships
    /// 1.4). Later 1.x versions only add symbols, so they are accepted too.
    pub const REQUIRED: ApiVersion = ApiVersion { major: 1, minor: 4 };

    /// Decodes `ireeCompilerGetAPIVersion`'s value: major in the upper bits,
    /// minor in the lower 16.
    #[cfg(any(test, feature = "in-process-compiler"))]
    pub(crate) fn from_packed(packed: i32) -> Self {
        let packed = packed as u32;
        ApiVersion {
            major: packed >> 16,
            minor: packed & 0xffff,
        }
    }

    /// True when this driver can use a compiler exporting this API.
    pub fn is_supported(self) -> bool {
        self.major == Self::REQUIRED.major && self.minor >= Self::REQUIRED.minor
    }
}

impl fmt::Display for ApiVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// The compiler's version and revision, as IREE reports them: the
/// embedding API's `ireeCompilerGetRevision` and `iree-compile --version`
/// both print `3.13.0rc20261016 @ 89ece87b...` for the same build.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CompilerVersion {
    build: String,
    api: Option<ApiVersion>,
}

impl CompilerVersion {
    /// From the build string (`<version> @ <revision>`, or empty for a
    /// development build) and, for a compiler behind the embedding API, its
    /// API version. Other [`Compiler`](super::Compiler) implementations
    /// (wrappers, test doubles) describe themselves with this.
    pub fn new(build: &str, api: Option<ApiVersion>) -> Self {
        CompilerVersion {
            build: build.trim().to_owned(),
            api,
        }
    }

    /// From the output of `iree-compile --version`
    /// (`IREE compiler version <build>` on one of its lines).
    pub(crate) fn from_version_output(output: &str) -> Option<Self> {
        let build = output
            .lines()
            .find_map(|line| line.trim().strip_prefix("IREE compiler version"))?;
        let build = build.trim();
        // The tool prints "(unknown)" where the library returns "".
        let build = if build == "(unknown)" { "" } else { build };
        Some(CompilerVersion::new(build, None))
    }

    /// The release, e.g. `3.13.0rc20261016`; empty for a development build
    /// that records none.
    pub fn version(&self) -> &str {
        match self.build.split_once(" @ ") {
            Some((version, _)) => version,
            None => &self.build,
        }
    }

    /// The source revision (a git hash), when the build records one.
    pub fn revision(&self) -> Option<&str> {
        self.build.split_once(" @ ").map(|(_, revision)| revision)
    }

    /// The whole build string as IREE prints it (`<version> @ <revision>`);
    /// empty for a development build that records neither.
    pub fn build(&self) -> &str {
        &self.build
    }

    /// The embedding API version (in-process compiler only).
    pub fn api_version(&self) -> Option<ApiVersion> {
        self.api
    }

    /// The IREE release, `major.minor` (`3.13` of `3.13.0rc20261016`);
    /// `None` for a development build that records no version.
    pub fn release(&self) -> Option<&str> {
        release_of(self.version())
    }

    /// True when the build string identifies the compiler (it is not empty),
    /// so that its artifacts can be cached on disk.
    pub fn is_identified(&self) -> bool {
        !self.build.is_empty()
    }
}

/// The `major.minor` of an IREE version (`3.13.0.dev`, `3.13.0rc2026…`).
pub(crate) fn release_of(version: &str) -> Option<&str> {
    let mut dots = version.match_indices('.').map(|(at, _)| at);
    let (_, second) = (dots.next()?, dots.next());
    let release = &version[..second.unwrap_or(version.len())];
    let numbers = release.split('.');
    (numbers.clone().count() == 2 && numbers.clone().all(|n| n.parse::<u32>().is_ok()))
        .then_some(release)
}

impl fmt::Display for CompilerVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.build.is_empty() {
            f.write_str("IREE compiler (unknown development build)")?;
        } else {
            write!(f, "IREE compiler {}", self.build)?;
        }
        if let Some(api) = self.api {
            write!(f, " (embedding API {api})")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BUILD: &str = "3.13.0rc20261016 @ 89ece87b89852100c0a4ac3d515e14842d090967";

    #[test]
    fn both_sources_agree() {
        let tool = CompilerVersion::from_version_output(&format!(
            "IREE (https://iree.dev):\n  IREE compiler version {BUILD}\n  LLVM version 24.0.0git\n"
        ))
        .unwrap();
        let library = CompilerVersion::new(BUILD, Some(ApiVersion::from_packed(0x1_0004)));
        assert_eq!(tool.build(), library.build());
        assert_eq!(library.version(), "3.13.0rc20261016");
        assert_eq!(
            library.revision(),
            Some("89ece87b89852100c0a4ac3d515e14842d090967")
        );
        assert_eq!(
            library.api_version(),
            Some(ApiVersion { major: 1, minor: 4 })
        );
        assert!(library.to_string().ends_with("(embedding API 1.4)"));
    }

    #[test]
    fn releases_are_major_dot_minor() {
        assert_eq!(release_of("3.13.0rc20261016"), Some("3.13"));
        assert_eq!(release_of("3.13.0.dev"), Some("3.13"));
        assert_eq!(release_of("3.10"), Some("3.10"));
        assert_eq!(release_of(""), None);
        assert_eq!(release_of("3"), None);
        assert_eq!(release_of("x.13.0"), None);
        let version = CompilerVersion::new(BUILD, None);
        assert_eq!(version.release(), Some("3.13"));
        assert_eq!(CompilerVersion::new("", None).release(), None);
    }

    #[test]
    fn development_builds_are_unidentified() {
        let tool =
            CompilerVersion::from_version_output("IREE compiler version (unknown)\n").unwrap();
        assert!(!tool.is_identified());
        assert_eq!(tool.revision(), None);
        assert!(CompilerVersion::from_version_output("something else").is_none());
    }

    #[test]
    fn api_versions_other_than_1_4_plus_are_refused() {
        assert!(ApiVersion::from_packed(0x1_0004).is_supported());
        assert!(ApiVersion::from_packed(0x1_0007).is_supported());
        assert!(!ApiVersion::from_packed(0x1_0003).is_supported());
        assert!(!ApiVersion::from_packed(0x2_0000).is_supported());
    }
}
