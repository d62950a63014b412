//! Zone rules after the last transition a zone's file lists: its footer rule, for ever.

use chrono::{DateTime, SecondsFormat, Utc};

use super::*;

fn at(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .unwrap()
        .with_timezone(&Utc)
}

fn zone(name: &str) -> Zone {
    parse_timezone(name).unwrap()
}

fn fires(
    text: &str,
    tz: Zone,
    after: &str,
    count: usize,
) -> Vec<(String, String, Option<DstAdjustment>)> {
    let schedule = ZonedCron::new(
        CronExpr::parse(text).unwrap(),
        tz,
        OnDstGap::Shift,
        OnDstRepeat::Once,
    );
    schedule
        .fires_after(at(after))
        .take(count)
        .map(|fire| {
            (
                fire.at.to_rfc3339_opts(SecondsFormat::Secs, true),
                fire.local.to_rfc3339_opts(SecondsFormat::Secs, false),
                fire.dst,
            )
        })
        .collect()
}

#[test]
fn rules_continue_after_the_listed_transitions() {
    // July 2100 in New York is daylight time by the zone's rule.
    assert_eq!(
        fires(
            "0 12 * 7 *",
            zone("America/New_York"),
            "2100-06-30T00:00:00Z",
            2
        ),
        [
            (
                "2100-07-01T16:00:00Z".into(),
                "2100-07-01T12:00:00-04:00".into(),
                None
            ),
            (
                "2100-07-02T16:00:00Z".into(),
                "2100-07-02T12:00:00-04:00".into(),
                None
            ),
        ]
    );
    // 02:30 on the second Sunday of March is in the spring-forward gap every year, for ever.
    let skip = ZonedCron::new(
        CronExpr::parse("30 2 * 3 SUN#2").unwrap(),
        zone("America/New_York"),
        OnDstGap::Skip,
        OnDstRepeat::Once,
    );
    assert_eq!(skip.next_fire_after(at("2098-01-01T00:00:00Z")), None);
    let shift = ZonedCron::new(
        CronExpr::parse("30 2 * 3 SUN#2").unwrap(),
        zone("America/New_York"),
        OnDstGap::Shift,
        OnDstRepeat::Once,
    );
    let shifted: Vec<_> = shift
        .fires_after(at("2098-01-01T00:00:00Z"))
        .take(40)
        .collect();
    assert_eq!(shifted.len(), 40);
    for fire in &shifted {
        assert_eq!(fire.dst, Some(DstAdjustment::Shifted), "{fire:?}");
        assert_eq!(fire.local.format("%H:%M %:z").to_string(), "03:00 -04:00");
    }
    assert_eq!(
        shifted[2].at.to_rfc3339_opts(SecondsFormat::Secs, true),
        "2100-03-14T07:00:00Z"
    );
    // Southern hemisphere, half-hour DST, far ahead: Lord Howe in January 2500.
    assert_eq!(
        fires(
            "0 12 1 1 *",
            zone("Australia/Lord_Howe"),
            "2499-12-01T00:00:00Z",
            1
        ),
        [(
            "2500-01-01T01:00:00Z".into(),
            "2500-01-01T12:00:00+11:00".into(),
            None
        )]
    );
}
