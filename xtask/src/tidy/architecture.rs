//! House rules about the shape of the crates (part of the tidy test):
//!
//! 6. Each library crate's module graph is acyclic: its nodes are the
//!    crate's top-level modules (`src/x.rs` or `src/x/`, children of
//!    `lib.rs`), with an edge A → B when code (not comments) in any file of
//!    A names `crate::B`, or B inside a grouped `use crate::{B, ..}`. A
//!    cycle means two modules that cannot be read, tested or moved apart.
//! 7. No hand-written library file (`crates/*/src/**/*.rs`, bindgen's
//!    output aside) is over [`MAX_LINES`] lines: split it by concept.
//! 8. No `#[path = ...]` attribute (nor `path = ...` in a `cfg_attr`), but
//!    in [`PATH_INCLUDES`]: a test,
//!    benchmark or example uses `test-support`, a binary its library.
//! 9. Nothing in `crates/iree-safe` or `crates/iree-sys` (sources, tests,
//!    build scripts, README, Cargo.toml) names Sheaf or its `SHEAF_JIT_*`
//!    variables: they are IREE layers that any project can use, and Sheaf's
//!    names belong to `sheaf-integration`.
//!
//! The checks are pure functions over file names and texts, tested on
//! small synthetic trees (`checks`); the tests of `workspace` apply them
//! to the workspace.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::{code_of, is_comment, read, rust_files, GENERATED};
use crate::process::workspace_root;

/// The library crates whose module graphs must be acyclic.
pub(super) const LIBRARY_CRATES: &[&str] = &[
    "iree-sys",
    "iree-safe",
    "jit-cache",
    "jit-store",
    "sheaf-integration",
];

/// The most lines a hand-written library file may have.
const MAX_LINES: usize = 800;

/// The `#[path]` includes allowed, with the reason.
const PATH_INCLUDES: &[(&str, &str)] = &[
    (
        "xtask/src/source.rs",
        "includes crates/iree-sys/build/iree_source.rs: the iree-sys build script and xtask must \
         resolve the same IREE source, and a build script has no library to depend on; a \
         published helper crate would be a sixth published package for two files",
    ),
    (
        "xtask/src/manifest.rs",
        "includes crates/iree-sys/build/manifest.rs, the install manifest's format, for the \
         same reason: the build script reads what xtask writes",
    ),
    (
        "xtask/src/host.rs",
        "includes crates/iree-sys/build/drivers.rs, the HAL driver list and its CMake options, \
         so that build-iree and a dependent's build from source build the same drivers",
    ),
    (
        "xtask/src/cuda.rs",
        "includes crates/iree-sys/build/cuda_headers.rs: build-iree finds the CUDA headers \
         where the build script does before it falls back to NVIDIA's wheels",
    ),
];

/// The crates that must not name Sheaf.
const SHEAF_FREE_CRATES: &[&str] = &["crates/iree-safe", "crates/iree-sys"];

/// A module graph: each top-level module and the modules it names.
type Graph = BTreeMap<String, BTreeSet<String>>;

/// The code of `text`: its lines without comments and string contents.
fn code(text: &str) -> String {
    let lines = text.lines().filter(|line| !is_comment(line));
    lines.map(code_of).collect::<Vec<_>>().join("\n")
}

/// The identifier at the start of `text`, if any.
fn leading_ident(text: &str) -> Option<&str> {
    let end = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    (end > 0).then(|| &text[..end])
}

/// The first path segments under `crate::` that `code` names: `crate::a`
/// gives `a`, `crate::{a, b::{c, d}, e}` gives `a`, `b` and `e`.
fn crate_paths(code: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let rest = &code[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // The first identifier of each item at the group's top level.
            let mut depth = 0;
            let mut item_start = true;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => item_start = true,
                    c if c.is_whitespace() => {}
                    _ if item_start && depth == 0 => {
                        item_start = false;
                        if let Some(name) = leading_ident(&group[i..]) {
                            names.insert(name.to_owned());
                        }
                    }
                    _ => {}
                }
            }
        } else if let Some(name) = leading_ident(rest) {
            names.insert(name.to_owned());
        }
    }
    names
}

/// The top-level module a file belongs to, from its path under `src/`;
/// `None` for the crate root and for binaries (`src/bin/`).
fn top_module(relative: &Path) -> Option<String> {
    let first = relative.components().next()?.as_os_str().to_str()?;
    if relative.components().count() == 1 {
        let name = first.strip_suffix(".rs")?;
        return (name != "lib" && name != "main").then(|| name.to_owned());
    }
    (first != "bin").then(|| first.to_owned())
}

/// The module graph of a crate whose `src/` holds `files` (path under
/// `src/`, text).
fn module_graph(files: &[(PathBuf, String)]) -> Graph {
    let mut graph = Graph::new();
    for (path, _) in files {
        if let Some(module) = top_module(path) {
            graph.entry(module).or_default();
        }
    }
    for (path, text) in files {
        let Some(module) = top_module(path) else {
            continue;
        };
        let named: Vec<String> = crate_paths(&code(text))
            .into_iter()
            .filter(|name| *name != module && graph.contains_key(name))
            .collect();
        graph.get_mut(&module).expect("a node").extend(named);
    }
    graph
}

/// A cycle of `graph`, as the modules along it with the first repeated at
/// the end (`a → b → a`); `None` when it has none.
fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        OnPath,
        Done,
    }
    let mut marks: BTreeMap<&str, Mark> = graph.keys().map(|k| (k.as_str(), Mark::New)).collect();
    // Depth first, iteratively: the path from the root, and each node's
    // remaining successors.
    for root in graph.keys() {
        if marks[root.as_str()] != Mark::New {
            continue;
        }
        let mut path: Vec<&str> = vec![root.as_str()];
        let mut pending: Vec<Vec<&str>> = vec![graph[root].iter().map(String::as_str).collect()];
        marks.insert(root.as_str(), Mark::OnPath);
        while let Some(successors) = pending.last_mut() {
            match successors.pop() {
                Some(next) => match marks[next] {
                    Mark::OnPath => {
                        let start = path.iter().position(|&m| m == next).expect("on the path");
                        let mut cycle: Vec<String> =
                            path[start..].iter().map(|m| m.to_string()).collect();
                        cycle.push(next.to_owned());
                        return Some(cycle);
                    }
                    Mark::New => {
                        marks.insert(next, Mark::OnPath);
                        path.push(next);
                        pending.push(graph[next].iter().map(String::as_str).collect());
                    }
                    Mark::Done => {}
                },
                None => {
                    let done = path.pop().expect("a node per pending list");
                    marks.insert(done, Mark::Done);
                    pending.pop();
                }
            }
        }
    }
    None
}

/// The files of a crate's `src/`: (path under `src/`, text).
fn source_files(krate: &str) -> Vec<(PathBuf, String)> {
    let src = Path::new("crates").join(krate).join("src");
    rust_files()
        .into_iter()
        .filter_map(|path| {
            let relative = path.strip_prefix(&src).ok()?.to_path_buf();
            Some((relative, read(&path)))
        })
        .collect()
}

/// The files of `files` (path, text) over `max` lines: `path: N lines`.
fn long_files(files: &[(PathBuf, String)], max: usize) -> Vec<String> {
    files
        .iter()
        .filter(|(_, text)| text.lines().count() > max)
        .map(|(path, text)| format!("{}: {} lines", path.display(), text.lines().count()))
        .collect()
}

/// The attributes in code of `text` that set a module's path, `#[path =
/// ...]` or a `path = ...` inside `#[cfg_attr(...)]` (on one line or, as
/// rustfmt writes a long one, several): `(first line, text)`.
fn path_attributes(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    // A `#[cfg_attr(` not closed yet: its first line and its code so far.
    let mut open: Option<(usize, String)> = None;
    for (index, line) in text.lines().enumerate() {
        if is_comment(line) {
            continue;
        }
        let code: String = code_of(line).split_whitespace().collect();
        let (first, attribute) = match open.take() {
            Some((first, before)) => (first, before + &code),
            None if code.contains("#[cfg_attr(") => (index, code),
            None => {
                if code.contains("#[path=") {
                    found.push((index + 1, line.trim().to_owned()));
                }
                continue;
            }
        };
        if !attribute.contains(")]") {
            open = Some((first, attribute));
        } else if attribute.contains(",path=") {
            found.push((first + 1, attribute));
        }
    }
    found
}

/// The lines of `text` that name Sheaf, in any case: `(line, text)`.
fn sheaf_mentions(text: &str) -> Vec<(usize, String)> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| line.to_ascii_lowercase().contains("sheaf"))
        .map(|(index, line)| (index + 1, line.trim().to_owned()))
        .collect()
}

/// Every text file under `dir` (relative to the root), build outputs aside.
fn text_files(dir: &Path) -> Vec<(PathBuf, String)> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(PathBuf, String)>) {
        let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
            return;
        };
        for entry in entries.flatten() {
            let path = dir.join(entry.file_name());
            if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
                if entry.file_name() != "target" {
                    walk(root, &path, out);
                }
            } else if let Ok(text) = std::fs::read_to_string(root.join(&path)) {
                out.push((path, text));
            }
        }
    }
    let mut files = Vec::new();
    walk(&workspace_root(), dir, &mut files);
    files.sort();
    files
}

/// The rules applied to the workspace.
mod workspace {
    use super::*;

    #[test]
    fn library_module_graphs_are_acyclic() {
        let mut cycles = Vec::new();
        for krate in LIBRARY_CRATES {
            let files = source_files(krate);
            assert!(!files.is_empty(), "crates/{krate}/src has no Rust files");
            if let Some(cycle) = find_cycle(&module_graph(&files)) {
                cycles.push(format!("{krate}: {}", cycle.join(" → ")));
            }
        }
        assert!(
            cycles.is_empty(),
            "these top-level modules name each other (`crate::x`) in a cycle; break it by moving \
             what both need into a module of its own, or the shared part into the lower one:\n  {}",
            cycles.join("\n  ")
        );
    }

    #[test]
    fn no_library_file_is_over_the_line_limit() {
        let root = workspace_root();
        let mut long = Vec::new();
        for entry in std::fs::read_dir(root.join("crates")).unwrap().flatten() {
            let krate = entry.file_name().to_string_lossy().into_owned();
            let files: Vec<(PathBuf, String)> = source_files(&krate)
                .into_iter()
                .map(|(path, text)| {
                    (
                        Path::new("crates").join(&krate).join("src").join(path),
                        text,
                    )
                })
                .filter(|(path, _)| !GENERATED.iter().any(|(file, _)| path == Path::new(file)))
                .collect();
            long.extend(long_files(&files, MAX_LINES));
        }
        long.sort();
        assert!(
            long.is_empty(),
            "library files over {MAX_LINES} lines: split each by concept into modules of its own \
             (a reader should find a concept from the file names):\n  {}",
            long.join("\n  ")
        );
    }

    #[test]
    fn no_path_attribute_but_the_allowed_includes() {
        let mut found = Vec::new();
        for path in rust_files() {
            if PATH_INCLUDES
                .iter()
                .any(|(file, _)| path == Path::new(file))
            {
                continue;
            }
            for (line, text) in path_attributes(&read(&path)) {
                found.push(format!("{}:{line}: {text}", path.display()));
            }
        }
        assert!(
            found.is_empty(),
            "`#[path]` includes another target's file: a test, benchmark or example uses \
             `test-support` (crates/test-support, a dev-dependency) or its crate's tests/common \
             module; a binary uses its package's library:\n  {}",
            found.join("\n  ")
        );
    }

    #[test]
    fn iree_safe_and_iree_sys_do_not_name_sheaf() {
        let mut found = Vec::new();
        for krate in SHEAF_FREE_CRATES {
            for (path, text) in text_files(Path::new(krate)) {
                for (line, text) in sheaf_mentions(&text) {
                    found.push(format!("{}:{line}: {text}", path.display()));
                }
            }
        }
        assert!(
            found.is_empty(),
            "iree-safe and iree-sys are IREE layers for any project: they must not name Sheaf or \
             a SHEAF_JIT_* variable. Say what the code does without the client's name, and move \
             Sheaf's settings to sheaf-integration (which passes them down as plain options):\n  {}",
            found.join("\n  ")
        );
    }
}

/// The rules' checks on small synthetic trees.
mod checks {
    use super::*;

    fn tree(files: &[(&str, &str)]) -> Vec<(PathBuf, String)> {
        files
            .iter()
            .map(|(path, text)| (PathBuf::from(path), text.to_string()))
            .collect()
    }

    fn edges(graph: &Graph) -> Vec<String> {
        let pairs = graph
            .iter()
            .flat_map(|(from, to)| to.iter().map(move |to| (from, to)));
        pairs.map(|(from, to)| format!("{from}->{to}")).collect()
    }

    #[test]
    fn crate_paths_reads_plain_and_grouped_uses_in_code() {
        let code = code(
            "use crate::alpha::Thing;\n\
             use crate::{beta, gamma::{delta, epsilon}, zeta::Z};\n\
             // use crate::commented;\n\
             let s = \"crate::in_a_string\";\n\
             pub(crate) fn f() -> crate::eta::Eta { $crate::theta!() } // crate::trailing\n\
             use crate::{\n    iota,\n    kappa::K,\n};\n\
             let x = notcrate::lambda;",
        );
        let names: Vec<String> = crate_paths(&code).into_iter().collect();
        assert_eq!(
            names,
            ["alpha", "beta", "eta", "gamma", "iota", "kappa", "theta", "zeta"]
        );
    }

    #[test]
    fn modules_are_the_children_of_the_crate_root() {
        assert_eq!(top_module(Path::new("lib.rs")), None);
        assert_eq!(top_module(Path::new("main.rs")), None);
        assert_eq!(top_module(Path::new("cache.rs")).as_deref(), Some("cache"));
        assert_eq!(
            top_module(Path::new("store/remote/wire.rs")).as_deref(),
            Some("store")
        );
        assert_eq!(top_module(Path::new("bin/soak/main.rs")), None);
    }

    #[test]
    fn the_graph_has_an_edge_per_module_named_by_another() {
        let graph = module_graph(&tree(&[
            ("lib.rs", "pub mod a; pub mod b; use crate::c::C;"),
            (
                "a.rs",
                "use crate::b::B; use crate::a::Own; use crate::missing::X;",
            ),
            ("b/mod.rs", "mod inner;"),
            ("b/inner.rs", "use crate::{c, a::{x, y}};"),
            ("c.rs", "// use crate::a;"),
        ]));
        assert_eq!(edges(&graph), ["a->b", "b->a", "b->c"]);
        assert_eq!(graph.len(), 3, "{graph:?}");
    }

    #[test]
    fn a_cycle_is_found_and_printed_along_its_edges() {
        let acyclic = module_graph(&tree(&[
            ("a.rs", "use crate::b;"),
            ("b.rs", "use crate::c;"),
            ("c.rs", ""),
            ("d.rs", "use crate::{a, c};"),
        ]));
        assert_eq!(find_cycle(&acyclic), None);
        let cyclic = module_graph(&tree(&[
            ("a.rs", "use crate::b;"),
            ("b.rs", "use crate::c;"),
            ("c.rs", "fn f() { crate::a::g() }"),
            ("d.rs", "use crate::a;"),
        ]));
        assert_eq!(
            find_cycle(&cyclic).unwrap(),
            ["a", "b", "c", "a"].map(str::to_owned)
        );
        let pair = module_graph(&tree(&[
            ("x.rs", "use crate::{y};"),
            ("y/mod.rs", "mod z;"),
            ("y/z.rs", "use crate::x::X;"),
        ]));
        assert_eq!(
            find_cycle(&pair).unwrap(),
            ["x", "y", "x"].map(str::to_owned)
        );
    }

    #[test]
    fn long_files_are_named_with_their_length() {
        let files = tree(&[("short.rs", "a\nb\n"), ("long.rs", "x\ny\nz\n")]);
        assert_eq!(long_files(&files, 2), ["long.rs: 3 lines"]);
        assert!(long_files(&files, 3).is_empty());
    }

    #[test]
    fn path_attributes_are_found_in_code_only() {
        // Written with `@` for `#`, so that this file has no such line.
        let text = "//! included by `@[path]` from xtask\n\
                    @[path = \"../common/stats.rs\"]\n\
                    mod stats;\n\
                    // @[path = \"commented.rs\"]\n\
                    @[path=\"tight.rs\"] mod tight;\n\
                    let s = \"@[path = x]\";"
            .replace('@', "#");
        let text = text.as_str();
        let found: Vec<usize> = path_attributes(text).into_iter().map(|(l, _)| l).collect();
        assert_eq!(found, [2, 5]);
        // Inside `cfg_attr`, on one line or on several as rustfmt writes it.
        let text = "@[cfg_attr(test, path = \"a.rs\")]\n\
                    mod a;\n\
                    @[cfg_attr(\n\
                        not(feature = \"tls\"),\n\
                        path = \"b.rs\"\n\
                    )]\n\
                    mod b;\n\
                    @[cfg_attr(test, allow(dead_code))]\n\
                    mod c;"
            .replace('@', "#");
        let found: Vec<usize> = path_attributes(&text).into_iter().map(|(l, _)| l).collect();
        assert_eq!(found, [1, 3]);
        assert!(PATH_INCLUDES
            .iter()
            .all(|(file, _)| workspace_root().join(file).is_file()));
    }

    #[test]
    fn sheaf_is_found_in_any_case() {
        let text = "let x = 1;\n// Sheaf's JIT\nenv(\"SHEAF_JIT_TRACE\")\nsheaves\nsheaf";
        let found: Vec<usize> = sheaf_mentions(text).into_iter().map(|(l, _)| l).collect();
        assert_eq!(found, [2, 3, 5]);
    }
}
