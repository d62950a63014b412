//! The README's examples, checked as they are written.

/// Every declaration file the README shows (a ```yaml block that starts with `schedules:` or
/// `calendars:`) loads and validates as it is written, its calendars too.
#[test]
fn the_readme_s_declaration_examples_validate() {
    use sentin8_cron::core::decl::{DeclFormat, declared_calendars, load_declarations};
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md");
    let now = chrono::Utc::now();
    let mut checked = 0;
    for block in readme.split("```yaml\n").skip(1) {
        let block = &block[..block.find("```").expect("a closed block")];
        if !block.starts_with("schedules:") && !block.starts_with("calendars:") {
            continue;
        }
        if let Err(err) = load_declarations(block, DeclFormat::Yaml, now) {
            panic!("README's declarations do not validate: {err}\n{block}");
        }
        if let Err(err) = declared_calendars(block, DeclFormat::Yaml) {
            panic!("README's calendars do not validate: {err}\n{block}");
        }
        checked += 1;
    }
    assert!(checked >= 2, "only {checked} declaration examples found");
}
