//! Architecture invariants that the compiler cannot check: `core` is the domain and the engine,
//! and reaches storage and HTTP only through the ports it defines.

use std::fs;
use std::path::{Path, PathBuf};

/// Crates that belong to the adapters, never to `core`.
const ADAPTER_CRATES: &[&str] = &["sqlx", "axum", "reqwest", "tower_http", "axum_server"];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("source folder is readable") {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            out.push(path);
        }
    }
}

/// The adapter crates a line of Rust names as a path (`sqlx::…`, `use axum…`, `::reqwest`).
fn adapter_mentions(line: &str) -> Vec<&'static str> {
    let code = line.split("//").next().unwrap_or_default();
    ADAPTER_CRATES
        .iter()
        .copied()
        .filter(|name| {
            code.match_indices(name).any(|(at, _)| {
                let before = code[..at].chars().next_back();
                let after = &code[at + name.len()..];
                let starts_a_path = !before.is_some_and(|c| c.is_alphanumeric() || c == '_');
                let used_as_path = after.starts_with("::")
                    || after.starts_with(';')
                    || after.starts_with(" as ")
                    || code.trim_start().starts_with("use ")
                        && after
                            .chars()
                            .next()
                            .is_none_or(|c| !c.is_alphanumeric() && c != '_');
                starts_a_path && used_as_path
            })
        })
        .collect()
}

#[test]
fn core_never_imports_storage_or_http_crates() {
    let core = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/core");
    let mut files = Vec::new();
    rust_files(&core, &mut files);
    assert!(
        files.len() > 10,
        "src/core should hold the engine's modules"
    );

    let mut offences = Vec::new();
    for file in &files {
        let text = fs::read_to_string(file).expect("source file is readable");
        for (number, line) in text.lines().enumerate() {
            for name in adapter_mentions(line) {
                offences.push(format!("{}:{}: {name}", file.display(), number + 1));
            }
        }
    }
    assert!(
        offences.is_empty(),
        "src/core must reach storage and HTTP only through its ports:\n{}",
        offences.join("\n")
    );
}

#[test]
fn the_check_recognises_every_spelling_of_an_import() {
    assert_eq!(adapter_mentions("use sqlx::PgPool;"), ["sqlx"]);
    assert_eq!(
        adapter_mentions("    let x = ::reqwest::Client::new();"),
        ["reqwest"]
    );
    assert_eq!(adapter_mentions("use axum;"), ["axum"]);
    assert_eq!(
        adapter_mentions("use axum::{Router, routing::get};"),
        ["axum"]
    );
    assert_eq!(adapter_mentions("fn f(r: axum::Json<u8>) {}"), ["axum"]);
    // Words that merely contain a name, and comments, are not imports.
    assert!(adapter_mentions("let sqlx_free = 1; // uses sqlx::query elsewhere").is_empty());
    assert!(adapter_mentions("/// the store (sqlx) lives in src/store").is_empty());
}

/// The longest a source file may be.
const FILE_LINES_MAX: usize = 600;

/// The longest an engine function may be.
const ENGINE_FN_LINES_MAX: usize = 100;

#[test]
fn no_source_file_outgrows_the_limit() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["src", "tests", "benches"] {
        rust_files(&root.join(dir), &mut files);
    }
    let mut over = Vec::new();
    for file in files {
        let lines = fs::read_to_string(&file).expect("readable").lines().count();
        let name = file
            .strip_prefix(root)
            .expect("under the root")
            .to_string_lossy()
            .replace('\\', "/");
        if lines > FILE_LINES_MAX {
            over.push(format!("{name}: {lines} lines (at most {FILE_LINES_MAX})"));
        }
    }
    assert!(over.is_empty(), "split these files:\n{}", over.join("\n"));
}

/// The functions of `source` longer than `max` lines (from the `fn` line to its closing brace
/// at the same indentation), as `name: lines`.
fn long_functions(source: &str, max: usize) -> Vec<String> {
    let lines: Vec<&str> = source.lines().collect();
    let mut long = Vec::new();
    for (start, line) in lines.iter().enumerate() {
        let code = line.trim_start();
        let indent = &line[..line.len() - code.len()];
        let signature = ["pub(super) ", "pub(crate) ", "pub ", "async ", "const "]
            .iter()
            .fold(code, |rest, prefix| {
                rest.strip_prefix(prefix).unwrap_or(rest)
            });
        let signature = signature.strip_prefix("async ").unwrap_or(signature);
        let Some(name) = signature.strip_prefix("fn ") else {
            continue;
        };
        if line.trim_end().ends_with(';') {
            continue;
        }
        let closing = format!("{indent}}}");
        let Some(end) = lines[start + 1..]
            .iter()
            .position(|l| l.trim_end() == closing)
        else {
            continue;
        };
        let length = end + 2;
        if length > max {
            let name: String = name
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            long.push(format!("{name}: {length} lines"));
        }
    }
    long
}

#[test]
fn no_engine_function_is_over_a_hundred_lines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/core");
    let mut files = vec![root.join("engine.rs")];
    rust_files(&root.join("engine"), &mut files);
    let mut long = Vec::new();
    for file in files {
        let source = fs::read_to_string(&file).expect("readable");
        for found in long_functions(&source, ENGINE_FN_LINES_MAX) {
            long.push(format!("{}: {found}", file.display()));
        }
    }
    assert!(
        long.is_empty(),
        "split these functions:\n{}",
        long.join("\n")
    );
}

#[test]
fn a_long_function_is_found() {
    let body = "    x();\n".repeat(5);
    let source = format!("impl A {{\n    pub(super) async fn go() {{\n{body}    }}\n}}\n");
    assert_eq!(long_functions(&source, 6), ["go: 7 lines"]);
    assert!(long_functions(&source, 7).is_empty());
}

/// Whether a line of the engine's parts names the `Engine` itself (not its configuration or
/// its error).
fn names_the_engine(line: &str) -> bool {
    line.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .any(|word| word == "Engine")
}

#[test]
fn no_part_of_the_engine_reaches_back_into_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/core/engine");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let mut back = Vec::new();
    for file in files {
        let source = fs::read_to_string(&file).expect("readable");
        for (n, line) in source.lines().enumerate() {
            if names_the_engine(line) && !line.trim_start().starts_with("//") {
                back.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(
        back.is_empty(),
        "the engine's parts take what they need (`parts::Parts`), not the engine:\n{}",
        back.join("\n")
    );
    assert!(names_the_engine("use super::{Engine, Outcome};"));
    assert!(!names_the_engine(
        "use super::parts::{EngineConfig, EngineError};"
    ));
}
