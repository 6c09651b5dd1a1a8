//! The compiler's diagnostics: severity, source location and message text,
//! parsed the same way from the embedding API's callback and from
//! `iree-compile`'s standard error.

use std::fmt;

/// How serious a [`Diagnostic`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Severity {
    /// A compilation error.
    Error,
    /// A warning.
    Warning,
    /// A note attached to another diagnostic.
    Note,
    /// An optimization remark.
    Remark,
}

impl Severity {
    /// The word MLIR prints for this severity (`error`, `warning`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Note => "note",
            Severity::Remark => "remark",
        }
    }

    /// From `enum iree_compiler_diagnostic_severity_t`; unknown values count
    /// as errors, as the compiler itself does.
    #[cfg(feature = "in-process-compiler")]
    pub(crate) fn from_c(severity: u32) -> Self {
        match severity {
            0 => Severity::Note,
            1 => Severity::Warning,
            3 => Severity::Remark,
            _ => Severity::Error,
        }
    }

    fn parse(word: &str) -> Option<Self> {
        Some(match word {
            "error" => Severity::Error,
            "warning" => Severity::Warning,
            "note" => Severity::Note,
            "remark" => Severity::Remark,
            _ => return None,
        })
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where in the MLIR source a [`Diagnostic`] points.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Location {
    /// The source's name. Both compilers feed the MLIR text as `<stdin>`.
    pub file: String,
    /// 1-based line.
    pub line: u32,
    /// 1-based column.
    pub column: u32,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.column)
    }
}

/// One message from the compiler.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Diagnostic {
    /// Error, warning, note or remark.
    pub severity: Severity,
    /// The source location, when the message starts with one.
    pub location: Option<Location>,
    /// The text after the location and severity; may span several lines
    /// (attached notes, the offending source line).
    pub message: String,
}

impl Diagnostic {
    /// A diagnostic that is not tied to a source location (such as the
    /// embedding API's own error messages).
    pub(crate) fn unlocated(severity: Severity, message: impl Into<String>) -> Self {
        Diagnostic {
            severity,
            location: None,
            message: message.into(),
        }
    }

    /// One message from the embedding API's diagnostic callback, which
    /// formats it as `file:line:col: message` (no severity word).
    #[cfg(any(test, feature = "in-process-compiler"))]
    pub(crate) fn from_callback(severity: Severity, text: &str) -> Self {
        let text = text.trim_end();
        match split_location(text) {
            Some((location, message)) => Diagnostic {
                severity,
                location: Some(location),
                message: message.to_owned(),
            },
            None => Diagnostic::unlocated(severity, text),
        }
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(location) = &self.location {
            write!(f, "{location}: ")?;
        }
        write!(f, "{}: {}", self.severity, self.message)
    }
}

/// Splits `iree-compile`'s standard error into diagnostics: a line
/// `file:line:col: severity: text` starts one, and the lines after it (the
/// quoted source line, the caret) belong to it. Lines before the first such
/// line (such as "Unknown command line argument") become unlocated errors.
pub(crate) fn parse_stderr(stderr: &str) -> Vec<Diagnostic> {
    let mut diagnostics: Vec<Diagnostic> = Vec::new();
    for line in stderr.lines() {
        let located = split_location(line).and_then(|(location, rest)| {
            let (word, message) = rest.split_once(": ")?;
            Some(Diagnostic {
                severity: Severity::parse(word)?,
                location: Some(location),
                message: message.to_owned(),
            })
        });
        match (located, diagnostics.last_mut()) {
            (Some(diagnostic), _) => diagnostics.push(diagnostic),
            (None, Some(last)) if last.location.is_some() => {
                last.message.push('\n');
                last.message.push_str(line);
            }
            (None, _) if line.trim().is_empty() => {}
            (None, _) => diagnostics.push(Diagnostic::unlocated(Severity::Error, line.trim())),
        }
    }
    for diagnostic in &mut diagnostics {
        diagnostic
            .message
            .truncate(diagnostic.message.trim_end().len());
    }
    diagnostics
}

/// Splits `file:line:col: rest` into its location and `rest`, taking the
/// first `:<digits>:<digits>: ` on the first line (file names may contain
/// `:` themselves).
fn split_location(text: &str) -> Option<(Location, &str)> {
    let first_line = text.lines().next()?;
    for (colon, _) in first_line.match_indices(':') {
        let file = &first_line[..colon];
        let after = &text[colon + 1..];
        let Some((line, after)) = after.split_once(':') else {
            continue;
        };
        let Some((column, rest)) = after.split_once(": ") else {
            continue;
        };
        if file.is_empty() || !is_number(line) || !is_number(column) {
            continue;
        }
        let (Ok(line), Ok(column)) = (line.parse(), column.parse()) else {
            continue;
        };
        return Some((
            Location {
                file: file.to_owned(),
                line,
                column,
            },
            rest,
        ));
    }
    None
}

fn is_number(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())
}

/// Renders diagnostics one per line, as `file:line:col: severity: message`.
pub(crate) fn render(diagnostics: &[Diagnostic]) -> String {
    let mut text = String::new();
    for (index, diagnostic) in diagnostics.iter().enumerate() {
        if index > 0 {
            text.push('\n');
        }
        text.push_str(&diagnostic.to_string());
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    const STDERR: &str = "\
<stdin>:3:3: error: type of return operand 0 ('tensor<4xf32>') doesn't match function result type ('tensor<4xi32>') in function @f
  return %x : tensor<4xf32>
  ^
<stdin>:3:3: note: see current operation: \"func.return\"(%arg0) : (tensor<4xf32>) -> ()
";

    #[test]
    fn stderr_lines_group_into_located_diagnostics() {
        let diagnostics = parse_stderr(STDERR);
        assert_eq!(diagnostics.len(), 2);
        let error = &diagnostics[0];
        assert_eq!(error.severity, Severity::Error);
        assert_eq!(
            error.location,
            Some(Location {
                file: "<stdin>".to_owned(),
                line: 3,
                column: 3
            })
        );
        assert!(error.message.starts_with("type of return operand 0"));
        assert!(error.message.ends_with("  ^"), "{:?}", error.message);
        assert_eq!(diagnostics[1].severity, Severity::Note);
        assert!(render(&diagnostics).starts_with("<stdin>:3:3: error: type of return"));
    }

    #[test]
    fn text_without_location_is_an_unlocated_error() {
        let diagnostics = parse_stderr("iree-compile: Unknown command line argument '--bogus'.\n");
        assert_eq!(diagnostics.len(), 1);
        assert_eq!(diagnostics[0].location, None);
        assert_eq!(diagnostics[0].severity, Severity::Error);
        assert!(diagnostics[0].message.contains("--bogus"));
    }

    #[test]
    fn callback_messages_have_a_location_but_no_severity_word() {
        let diagnostic = Diagnostic::from_callback(
            Severity::Error,
            "<stdin>:1:61: type mismatch\n\n<stdin>:1:61: see current operation\n",
        );
        assert_eq!(
            diagnostic.location.as_ref().map(|l| (l.line, l.column)),
            Some((1, 61))
        );
        assert_eq!(
            diagnostic.message,
            "type mismatch\n\n<stdin>:1:61: see current operation"
        );
        assert!(diagnostic
            .to_string()
            .starts_with("<stdin>:1:61: error: type mismatch"));
    }

    #[test]
    fn file_names_may_contain_colons() {
        let (location, rest) = split_location("C:/x.mlir:12:5: error: oops").unwrap();
        assert_eq!(location.file, "C:/x.mlir");
        assert_eq!((location.line, location.column), (12, 5));
        assert_eq!(rest, "error: oops");
        assert!(split_location("no location here").is_none());
        assert!(split_location("a:b:c: d").is_none());
    }
}
