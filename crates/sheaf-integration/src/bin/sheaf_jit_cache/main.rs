//! `sheaf-jit-cache`: shows, checks and trims the JIT's disk cache, shows
//! and checks artifact bundles, and makes the signing keys of a signed
//! remote cache (cargo feature `cli`).
//!
//! It finds the disk cache where the runtime does (`SHEAF_JIT_CACHE_DIR`,
//! else `$XDG_CACHE_HOME/sheaf-jit` or `$HOME/.cache/sheaf-jit`, on macOS
//! `$HOME/Library/Caches/sheaf-jit`; `--dir` overrides), opens it with the store's own checks (the folder's owner
//! and mode, its `secret`) but creates nothing
//! (`ArtifactStore::open_for_inspection`), and reads every entry, policy
//! file and bundle with the runtime's own code (`jit_store`,
//! `inspect_bundle`, `verify_bundle`): nothing here parses a file itself.
//! `stats` (without `--zero`), `list` and `verify` write nothing; `stats
//! --zero` rewrites the counters summed over runs; `prune` and `clear` delete
//! only what is provably the cache's own; `keygen` writes one new file,
//! never over another. Names are printed escaped
//! (`jit_store::Escaped`): a file name cannot forge a line.
//!
//! - `main.rs`: the command line, and how a report is printed.
//! - `report.rs`: what each command reports (the `--json` schema).
//! - `disk.rs`: the disk-cache commands.
//! - `bundle.rs`: the bundle commands.
//! - `text.rs`: durations and ages, read and written.

/// `println!`, but an error to return instead of a panic: stdout may be a
/// pipe whose reader left (`sheaf-jit-cache list | head`).
macro_rules! say {
    ($($arg:tt)*) => {
        std::io::Write::write_fmt(&mut std::io::stdout().lock(), format_args!("{}\n", format_args!($($arg)*)))?
    };
}

mod bundle;
mod disk;
mod report;
mod text;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use lexopt::prelude::*;
use sheaf_integration::settings::ByteSize;
use sheaf_integration::ErrorChain;

const USAGE: &str = "\
sheaf-jit-cache: show, check and trim the Sheaf JIT's disk cache and artifact bundles; make
signing keys

usage: sheaf-jit-cache [--dir DIR] [--json] COMMAND [OPTIONS]

commands:
  stats                 what the disk cache holds, in total, and what every process that used it
                        did (calls, hits, misses by tier and reason, compiles); --zero resets
                        the latter
  list                  every entry (key, size, last use) and every function's policy file
                        (its signatures, and the compiler it was learned with)
  verify                check every entry as the runtime does before loading it (owner, mode,
                        format, authentication tag under the folder's secret) and every policy
                        file; prints the reason for each refusal; exit status 1 if any
  prune                 delete entries: --older-than DURATION (unused that long), then the least
                        recently used down to --max-bytes N
  clear                 delete every entry and policy file that is the cache's own (the secret
                        stays)
  bundle inspect DIR    what an artifact bundle lists: compiler, runtime, variants
  bundle verify DIR     check a bundle as this program's runtime would before serving it, and
                        each of its entries; exit status 1 if anything is refused
  keygen FILE           make a builder's signing key for a signed remote cache (32 random
                        bytes, mode 0600, never over an existing file); prints its public key
                        (--public FILE: the public key of an existing one)

options:
  --dir DIR             the disk cache's folder (default: where the runtime keeps it:
                        SHEAF_JIT_CACHE_DIR, else $XDG_CACHE_HOME/sheaf-jit, else
                        $HOME/.cache/sheaf-jit; on macOS $HOME/Library/Caches/sheaf-jit)
  --json                print what the command found as one JSON object (schema in
                        docs/cli-json.md), errors included
  -h, --help            this text; `sheaf-jit-cache COMMAND --help` for a command's

Nothing is loaded or run: entries are only read and checked. stats, list and verify write
nothing; prune and clear delete only authentic entries and the runtime's policy files, and
say what they left.
";

/// A command's help text.
fn command_help(command: &str) -> Option<&'static str> {
    Some(match command {
        "stats" => {
            "usage: sheaf-jit-cache [--dir DIR] stats [--zero]\n\n\
             Prints the disk cache's folder, its size bound (SHEAF_JIT_CACHE_MAX_BYTES), the\n\
             compiler build recorded for its entries, how many entries and bytes it holds,\n\
             and how many policy files (one per function: what the cache's policy learned);\n\
             then the counters summed over every runtime that used the folder, each added\n\
             as it ended (its exit, or its last handle dropped): calls, hits, misses,\n\
             compiles and their time, and each tier's lookups (disk, remote) by outcome.\n\
             --zero  sets those counters to zero (as `ccache -z`) and prints what they held.\n"
        }
        "list" => {
            "usage: sheaf-jit-cache [--dir DIR] list\n\n\
             Lists every entry, most recently used first: its key (the SHA-256 of the\n\
             program, compiler, runtime and target; `JitRuntime::entries` shows the key of\n\
             each variant a process holds), its size and when it was last used; then every\n\
             policy file: the function (name and definition hash), whether it was learned\n\
             with the recorded compiler, its dynamic dims and the signatures it had cached.\n"
        }
        "verify" => {
            "usage: sheaf-jit-cache [--dir DIR] verify\n\n\
             Checks the folder (owner, mode, secret) as the runtime does when it opens it,\n\
             then reads every entry as a lookup does before loading it: a regular file no\n\
             other user can write, a well-formed header for its key, a size within the\n\
             bound, an HMAC-SHA256 tag that verifies under the folder's secret. Each entry\n\
             is printed with `ok` or the reason the runtime would refuse it (and delete it,\n\
             then compile again); nothing is deleted here. Policy files that a process\n\
             would not use are listed with the reason. Exit status 1 if anything is refused.\n"
        }
        "prune" => {
            "usage: sheaf-jit-cache [--dir DIR] prune [--older-than DURATION] [--max-bytes N]\n\n\
             --older-than DURATION  delete the entries not used for DURATION or longer\n\
             \x20                      (`90s`, `30m`, `12h`, `7d`, `2w`)\n\
             --max-bytes N          then delete the least recently used entries until the\n\
             \x20                      rest take at most N bytes (`4096`, `64K`, `512M`, `2G`)\n\n\
             At least one is needed. Only entries that verify (authentic under the folder's\n\
             secret) are deleted; any other file is left, and counted. Policy files stay. A\n\
             running process whose entry was deleted compiles it again.\n"
        }
        "clear" => {
            "usage: sheaf-jit-cache [--dir DIR] clear\n\n\
             Deletes every entry and every policy file that is provably the cache's own:\n\
             entries that verify (authentic under the folder's secret) and policy files that\n\
             read as one and carry the name the runtime gives them, regular files in a vmfb/\n\
             or policy/ that is no link, this user's and closed to others. Anything else\n\
             (what `verify` refuses, links, other names) is left, and counted. The folder,\n\
             its secret, the recorded compiler and the statistics (`stats --zero`) stay.\n\
             Running processes keep what they loaded and compile (then write) again what\n\
             they miss.\n"
        }
        "bundle" => {
            "usage: sheaf-jit-cache bundle inspect [--trusted-keys KEYS] DIR\n\
             \x20      sheaf-jit-cache bundle verify [--trusted-keys KEYS] DIR\n\n\
             inspect  prints the bundle's manifest: the compiler and runtime builds, who\n\
             \x20        signed it, each artifact (key, size) and each variant (function,\n\
             \x20        definition hash, signature, entry symbol, artifact).\n\
             verify   checks the bundle as this program's runtime checks it before serving\n\
             \x20        it (every folder and file yours or root's and writable by no one else,\n\
             \x20        the secret or the manifest's signature, the manifest, the runtime\n\
             \x20        build, the entries' sizes), then each entry's format and tag or\n\
             \x20        signature; prints the signer and the reason for each refusal. Exit\n\
             \x20        status 1 if anything is refused.\n\n\
             Both read the bundle as a runtime in this environment would: with\n\
             SHEAF_JIT_TRUSTED_KEYS set (or --trusted-keys KEYS, the same syntax: public\n\
             keys or files of them, separated by blanks or commas) only a bundle signed by\n\
             one of those keys is accepted; without, only an unsigned one.\n"
        }
        "keygen" => {
            "usage: sheaf-jit-cache keygen FILE\n\
             \x20      sheaf-jit-cache keygen --public FILE\n\n\
             Makes a builder's Ed25519 signing key in FILE (32 random bytes, mode 0600; an\n\
             existing file is never overwritten) and prints its public key,\n\
             `ed25519:<64 hex digits>`. Builders sign what they publish to the remote cache\n\
             with it (SHEAF_JIT_SIGNING_KEY_FILE); readers trust its public key\n\
             (SHEAF_JIT_TRUSTED_KEYS) and accept only what a trusted key signed.\n\
             With --public, prints the public key of the existing key FILE, which must be\n\
             closed to others as the runtime requires. See docs/cluster.md, \"CI builds,\n\
             everyone reads\".\n"
        }
        _ => return None,
    })
}

/// A parsed command line.
#[derive(Debug)]
enum Command {
    Help(&'static str),
    Stats {
        /// Zero the counters summed over runs instead.
        zero: bool,
    },
    List,
    Verify,
    Prune {
        max_bytes: Option<u64>,
        older_than: Option<Duration>,
    },
    Clear,
    BundleInspect(BundleArgs),
    BundleVerify(BundleArgs),
    Keygen {
        file: PathBuf,
        /// Only print the public key of an existing key.
        public: bool,
    },
}

impl Command {
    /// Its name in the output (`--json`'s `command`).
    fn name(&self) -> &'static str {
        match self {
            Command::Help(_) => "help",
            Command::Stats { zero: false } => "stats",
            Command::Stats { zero: true } => "zero",
            Command::List => "list",
            Command::Verify => "verify",
            Command::Prune { .. } => "prune",
            Command::Clear => "clear",
            Command::BundleInspect(_) => "bundle inspect",
            Command::BundleVerify(_) => "bundle verify",
            Command::Keygen { .. } => "keygen",
        }
    }
}

/// What the bundle commands take.
#[derive(Debug)]
struct BundleArgs {
    dir: PathBuf,
    /// `--trusted-keys`: instead of `SHEAF_JIT_TRUSTED_KEYS`.
    trusted_keys: Option<OsString>,
}

/// How a command's report is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    /// Lines for a person.
    Text,
    /// One JSON object (`report.rs`).
    Json,
}

/// The command line after the program's name.
#[derive(Debug)]
struct Invocation {
    dir: Option<PathBuf>,
    format: Format,
    command: Command,
}

fn parse(mut parser: lexopt::Parser) -> Result<Invocation, lexopt::Error> {
    let mut dir = None;
    let mut format = Format::Text;
    let name = loop {
        match parser.next()? {
            Some(Long("dir")) => dir = Some(PathBuf::from(parser.value()?)),
            Some(Long("json")) => format = Format::Json,
            Some(Short('h') | Long("help")) => {
                return Ok(Invocation {
                    dir,
                    format,
                    command: Command::Help(USAGE),
                })
            }
            Some(Value(name)) => break name.string()?,
            Some(arg) => return Err(arg.unexpected()),
            None => {
                return Err(
                    "a command is needed: stats, list, verify, prune, clear, bundle or keygen \
                     (see --help)"
                        .into(),
                )
            }
        }
    };
    let help = command_help(&name).ok_or_else(|| {
        lexopt::Error::from(format!(
            "unknown command `{name}`: stats, list, verify, prune, clear, bundle or keygen (see \
             --help)"
        ))
    })?;
    let (mut max_bytes, mut older_than, mut public, mut zero) = (None, None, false, false);
    let mut trusted_keys = None;
    let mut operands: Vec<OsString> = Vec::new();
    while let Some(arg) = parser.next()? {
        match arg {
            Short('h') | Long("help") => {
                return Ok(Invocation {
                    dir,
                    format,
                    command: Command::Help(help),
                })
            }
            Long("dir") => dir = Some(PathBuf::from(parser.value()?)),
            Long("json") => format = Format::Json,
            Long("max-bytes") if name == "prune" => {
                let value = parser.value()?.string()?;
                let size: ByteSize = value
                    .parse()
                    .map_err(|e| format!("--max-bytes `{value}`: {e}"))?;
                max_bytes = Some(size.0);
            }
            Long("older-than") if name == "prune" => {
                let value = parser.value()?.string()?;
                older_than = Some(
                    text::parse_duration(&value)
                        .map_err(|e| format!("--older-than `{value}`: {e}"))?,
                );
            }
            Long("public") if name == "keygen" => public = true,
            Long("zero") if name == "stats" => zero = true,
            Long("trusted-keys") if name == "bundle" => trusted_keys = Some(parser.value()?),
            Value(operand) => operands.push(operand),
            arg => return Err(arg.unexpected()),
        }
    }
    let no_operands = |command: Command| {
        if let Some(extra) = operands.first() {
            return Err(lexopt::Error::UnexpectedArgument(extra.clone()));
        }
        Ok(command)
    };
    let command = match name.as_str() {
        "stats" => no_operands(Command::Stats { zero })?,
        "list" => no_operands(Command::List)?,
        "verify" => no_operands(Command::Verify)?,
        "clear" => no_operands(Command::Clear)?,
        "prune" if max_bytes.is_none() && older_than.is_none() => {
            return Err(
                "prune needs --older-than DURATION or --max-bytes N (see prune --help)".into(),
            )
        }
        "prune" => no_operands(Command::Prune {
            max_bytes,
            older_than,
        })?,
        "keygen" => match &operands[..] {
            [file] => Command::Keygen {
                file: file.into(),
                public,
            },
            _ => {
                return Err(
                    "usage: sheaf-jit-cache keygen [--public] FILE (see keygen --help)".into(),
                )
            }
        },
        _ => {
            let args = |dir: &OsString| BundleArgs {
                dir: dir.into(),
                trusted_keys,
            };
            match &operands[..] {
                [action, dir] if action == "inspect" => Command::BundleInspect(args(dir)),
                [action, dir] if action == "verify" => Command::BundleVerify(args(dir)),
                _ => {
                    return Err(
                        "usage: sheaf-jit-cache bundle inspect|verify [--trusted-keys \
                                KEYS] DIR (see bundle --help)"
                            .into(),
                    )
                }
            }
        }
    };
    Ok(Invocation {
        dir,
        format,
        command,
    })
}

fn main() -> ExitCode {
    let invocation = match parse(lexopt::Parser::from_env()) {
        Ok(invocation) => invocation,
        Err(error) => {
            eprintln!("sheaf-jit-cache: {error}");
            return ExitCode::from(2);
        }
    };
    let format = invocation.format;
    let name = invocation.command.name();
    let outcome = match invocation.command {
        Command::Help(text) => {
            // A reader that left (`| head`) has what it wanted.
            let _ = std::io::Write::write_all(&mut std::io::stdout().lock(), text.as_bytes());
            return ExitCode::SUCCESS;
        }
        Command::BundleInspect(args) => bundle::inspect(args, format),
        Command::BundleVerify(args) => bundle::verify(args, format),
        Command::Keygen { file, public } => keygen(&file, public, format),
        command => disk::run(invocation.dir, command, format),
    };
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        // The reader of stdout left: it has what it wanted.
        Err(error)
            if error
                .downcast_ref::<std::io::Error>()
                .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe) =>
        {
            ExitCode::SUCCESS
        }
        Err(error) => {
            let error = ErrorChain(error.as_ref()).to_string();
            if format == Format::Json {
                let failed = report::Failed {
                    error: error.clone(),
                };
                let _ = print_json(name, false, failed);
            }
            eprintln!("sheaf-jit-cache: {error}");
            ExitCode::from(1)
        }
    }
}

/// Prints `report` of the command `name` as `format` says (as text with
/// `text`); `ok` is whether nothing was refused (the exit status).
fn show<T: serde::Serialize>(
    format: Format,
    name: &str,
    ok: bool,
    report: T,
    text: impl FnOnce(&T) -> std::io::Result<()>,
) -> Outcome {
    match format {
        Format::Text => text(&report)?,
        Format::Json => return print_json(name, ok, report),
    }
    Ok(ok)
}

/// Prints `report` of the command `name` as one JSON object and a newline.
fn print_json<T: serde::Serialize>(name: &str, ok: bool, report: T) -> Outcome {
    let output = report::Output {
        schema: report::SCHEMA,
        command: name,
        ok,
        report,
    };
    say!("{}", serde_json::to_string(&output)?);
    Ok(ok)
}

/// What a command returns: whether everything checked was good.
type Outcome = Result<bool, Box<dyn std::error::Error>>;

/// Makes the signing key `file` (or, `public`, reads it) and prints its
/// public key.
fn keygen(file: &std::path::Path, public: bool, format: Format) -> Outcome {
    let key = match public {
        true => jit_store::SigningKey::from_file(file)?,
        false => jit_store::SigningKey::create_file(file)?,
    };
    let report = report::Key {
        file: disk::shown_path(file),
        public_key: key.public_key().to_string(),
    };
    show(format, "keygen", true, report, |report| {
        say!("{}", report.public_key);
        Ok(())
    })
}
