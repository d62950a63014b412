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
