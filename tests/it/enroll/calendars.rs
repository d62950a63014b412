//! A declaration file's calendars, enrolled with its schedules in one transaction: written
//! before the schedules that name them, left alone when declared again unchanged, and a file
//! whose schedule names an undeclared, unknown calendar writes nothing.

use super::*;

const DOCUMENT: &str = r#"
calendars:
  holidays:
    description: public holidays
    entries:
      - { spec: "2031-12-25", note: Christmas Day }
      - "* * 1 1 *"
schedules:
  - schedule_type: billing.close
    cron: "0 18 * * MON-FRI"
    exclude: [holidays, "2031-12-24..2031-12-31"]
"#;

pub async fn declared_calendars_are_enrolled_before_the_schedules_that_name_them(db: Db) {
    let t = Enroll::new(db);
    let file = t.write("billing.yaml", DOCUMENT);
    let run = t.enroll(&["--file", &file]).await.ok();
    assert!(
        run.stdout.contains("calendar holidays: created"),
        "{}",
        run.stdout
    );
    let close = t.schedule("billing.close").await;
    assert_eq!(
        close.exclude.texts(),
        ["holidays", "2031-12-24..2031-12-31"]
    );
    let mut tx = t.store.tenant_begin(t.env).await.unwrap();
    let calendar = tx.calendar_list().await.unwrap().remove(0);
    tx.commit().await.unwrap();
    assert_eq!(
        (calendar.name.as_str(), calendar.description.as_str()),
        ("holidays", "public holidays")
    );
    assert_eq!(
        calendar.entry_texts()[0].note.as_deref(),
        Some("Christmas Day")
    );
    let audit: Vec<String> = t
        .audit()
        .await
        .iter()
        .filter(|a| a.resource_type == "calendar")
        .map(|a| a.action.clone())
        .collect();
    assert_eq!(audit, ["calendar.create"]);

    // Declared again unchanged: nothing written, nothing audited.
    let again = t.enroll(&["--file", &file]).await.ok();
    assert!(
        again.stdout.contains("calendar holidays: unchanged"),
        "{}",
        again.stdout
    );
    let changed = DOCUMENT.replace("\"* * 1 1 *\"", "\"* * 4 7 *\"");
    let file = t.write("billing.yaml", &changed);
    let dry = t.enroll(&["--file", &file, "--dry-run"]).await.ok();
    assert!(
        dry.stdout.contains("calendar holidays: would be updated"),
        "{}",
        dry.stdout
    );
    let json = t.enroll(&["--file", &file, "-o", "json"]).await.ok().json();
    assert_eq!(
        json["calendars"],
        json!([{"name": "holidays", "action": "updated"}])
    );

    // A schedule naming a calendar nobody declared or created: refused, nothing written.
    let unknown = DOCUMENT
        .replace("exclude: [holidays,", "exclude: [holidays, freeze,")
        .replace("billing.close", "billing.other");
    let file = t.write("other.yaml", &unknown);
    let refused = t.enroll(&["--file", &file]).await.invalid();
    assert!(
        refused.stderr.contains("no calendar named \"freeze\""),
        "{}",
        refused.stderr
    );
    assert!(!t.schedules().await.contains_key("billing.other"));
    // A bad calendar is the document's problem, named by field.
    let file = t.write(
        "bad.yaml",
        "calendars: { holidays: { entries: [\"2031-02-30\"] } }\nschedules: []\n",
    );
    let bad = t.enroll(&["--file", &file]).await.invalid();
    assert!(
        bad.stderr.contains("calendars.holidays.entries[0].spec"),
        "{}",
        bad.stderr
    );
}
