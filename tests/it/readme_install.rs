//! README's install section against what the build needs: the Rust version it names is the
//! `rust-version` of Cargo.toml, and no dependency locked in Cargo.lock asks for a newer one
//! (`cargo install --locked` on that version would refuse it).

use std::path::PathBuf;

fn read(name: &str) -> String {
    std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(name)).unwrap()
}

/// The value of the first `rust-version = "..."` line of a manifest.
fn rust_version_of(manifest: &str) -> Option<String> {
    manifest.lines().find_map(|line| {
        let value = line.trim().strip_prefix("rust-version")?.trim_start();
        let value = value.strip_prefix('=')?.trim();
        Some(value.trim_matches('"').to_owned())
    })
}

/// `1.89` as (1, 89, 0), for comparing.
fn parsed(version: &str) -> Option<(u32, u32, u32)> {
    let mut parts = version.split('.').map(str::parse::<u32>);
    let major = parts.next()?.ok()?;
    let minor = parts.next().unwrap_or(Ok(0)).ok()?;
    let patch = parts.next().unwrap_or(Ok(0)).ok()?;
    Some((major, minor, patch))
}

fn install_section(readme: &str) -> &str {
    let start = readme
        .find("\n## Install\n")
        .expect("README has an Install section");
    let rest = &readme[start + 1..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |i| i + 3);
    &rest[..end]
}

#[test]
fn the_install_section_names_the_rust_version_of_cargo_toml() {
    let version = rust_version_of(&read("Cargo.toml")).expect("Cargo.toml has a rust-version");
    let readme = read("README.md");
    let section = install_section(&readme);
    assert!(
        section.contains(&format!("Rust {version} or later")),
        "README's install section must say \"Rust {version} or later\" (Cargo.toml's \
         rust-version):\n{section}"
    );
    // Every Rust version the section names as a requirement is that one.
    for (at, _) in section.match_indices("Rust 1.") {
        let named: String = section[at + "Rust ".len()..]
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .collect();
        assert_eq!(
            named.trim_end_matches('.'),
            version,
            "README's install section names another Rust version:\n{section}"
        );
    }
    for step in ["build-essential", "cargo install --locked --path ."] {
        assert!(section.contains(step), "missing {step:?} in:\n{section}");
    }
}

/// Reads the manifests of the locked registry packages that cargo has downloaded (those this
/// platform builds); a package that is not there (another platform's) is not checked.
#[test]
fn no_locked_dependency_needs_a_newer_rust_than_rust_version() {
    let ours = rust_version_of(&read("Cargo.toml")).unwrap();
    let ours_parsed = parsed(&ours).unwrap();
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")));
    let Some(sources) = cargo_home
        .map(|home| home.join("registry/src"))
        .and_then(|dir| std::fs::read_dir(dir).ok())
    else {
        eprintln!("no cargo registry sources to read; the locked dependencies were not checked");
        return;
    };
    let roots: Vec<PathBuf> = sources.flatten().map(|e| e.path()).collect();
    let lock = read("Cargo.lock");
    let mut checked = 0;
    let mut newer = Vec::new();
    for package in lock.split("[[package]]").skip(1) {
        let field = |name: &str| {
            package.lines().find_map(|line| {
                line.strip_prefix(name)?
                    .trim_start()
                    .strip_prefix("= ")
                    .map(|v| v.trim_matches('"').to_owned())
            })
        };
        let (Some(name), Some(version)) = (field("name"), field("version")) else {
            continue;
        };
        if !field("source").is_some_and(|s| s.starts_with("registry+")) {
            continue;
        }
        let Some(manifest) = roots
            .iter()
            .map(|root| root.join(format!("{name}-{version}/Cargo.toml")))
            .find_map(|path| std::fs::read_to_string(path).ok())
        else {
            continue;
        };
        checked += 1;
        if let Some(needed) = rust_version_of(&manifest)
            && parsed(&needed).is_some_and(|n| n > ours_parsed)
        {
            newer.push(format!("{name} {version} needs Rust {needed}"));
        }
    }
    assert!(
        newer.is_empty(),
        "Cargo.toml's rust-version is {ours}, but {}",
        newer.join(", ")
    );
    eprintln!("{checked} locked packages read");
}
