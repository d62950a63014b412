//! Zones whose shifts or offsets are not whole hours (Lord Howe, Chatham), fires that cross
//! many transitions, and UTC against the plain evaluator.

use super::*;

#[test]
fn lord_howe_half_hour_shift() {
    // 2025-10-05: 02:00 (+10:30) jumps to 02:30 (+11:00) at 2025-10-04T15:30Z.
    let shift = fires(
        "15 2 * * *",
        *LORD_HOWE,
        Shift,
        Once,
        "2025-10-04T00:00:00Z",
        2,
    );
    assert_eq!(
        shift,
        [
            (
                "2025-10-04T15:30:00Z".to_owned(),
                "2025-10-05T02:30:00+11:00".to_owned(),
                SHIFTED
            ),
            (
                "2025-10-05T15:15:00Z".to_owned(),
                "2025-10-06T02:15:00+11:00".to_owned(),
                None
            ),
        ]
    );
    let skip = fires(
        "15 2 * * *",
        *LORD_HOWE,
        Skip,
        Once,
        "2025-10-04T00:00:00Z",
        1,
    );
    assert_eq!(utc_marks(&skip), [("2025-10-05T15:15:00Z", None)]);
    // 02:30 is the first wall time after the gap: it exists and is not shifted.
    let exists = fires(
        "30 2 * * *",
        *LORD_HOWE,
        Shift,
        Once,
        "2025-10-04T00:00:00Z",
        1,
    );
    assert_eq!(utc_marks(&exists), [("2025-10-04T15:30:00Z", None)]);
    let merged = fires(
        "0,30 2 * * *",
        *LORD_HOWE,
        Shift,
        Once,
        "2025-10-04T00:00:00Z",
        2,
    );
    assert_eq!(
        utc_marks(&merged),
        [
            ("2025-10-04T15:30:00Z", SHIFTED),
            ("2025-10-05T15:00:00Z", None)
        ]
    );
    // 2025-04-06: 02:00 (+11:00) falls back to 01:30 (+10:30) at 2025-04-05T15:00Z.
    let twice = fires(
        "45 1 * * *",
        *LORD_HOWE,
        Shift,
        Twice,
        "2025-04-05T00:00:00Z",
        3,
    );
    assert_eq!(
        utc_marks(&twice),
        [
            ("2025-04-05T14:45:00Z", None),
            ("2025-04-05T15:15:00Z", REPEATED),
            ("2025-04-06T15:15:00Z", None)
        ]
    );
    let once = fires(
        "45 1 * * *",
        *LORD_HOWE,
        Shift,
        Once,
        "2025-04-05T00:00:00Z",
        2,
    );
    assert_eq!(
        utc_marks(&once),
        [
            ("2025-04-05T14:45:00Z", None),
            ("2025-04-06T15:15:00Z", None)
        ]
    );
    let interval = fires(
        "*/10 * * * *",
        *LORD_HOWE,
        Shift,
        Once,
        "2025-04-05T14:55:00Z",
        5,
    );
    assert_eq!(
        utc_marks(&interval),
        [
            ("2025-04-05T15:00:00Z", REPEATED),
            ("2025-04-05T15:10:00Z", REPEATED),
            ("2025-04-05T15:20:00Z", REPEATED),
            ("2025-04-05T15:30:00Z", None),
            ("2025-04-05T15:40:00Z", None)
        ]
    );
    assert_eq!(interval[0].1, "2025-04-06T01:30:00+10:30");
}

#[test]
fn chatham_quarter_hour_offsets() {
    // 2025-09-28: 02:45 (+12:45) jumps to 03:45 (+13:45) at 2025-09-27T14:00Z.
    let shift = fires(
        "0 3 * * *",
        *CHATHAM,
        Shift,
        Once,
        "2025-09-27T00:00:00Z",
        2,
    );
    assert_eq!(
        shift,
        [
            (
                "2025-09-27T14:00:00Z".to_owned(),
                "2025-09-28T03:45:00+13:45".to_owned(),
                SHIFTED
            ),
            (
                "2025-09-28T13:15:00Z".to_owned(),
                "2025-09-29T03:00:00+13:45".to_owned(),
                None
            ),
        ]
    );
    let skip = fires("0 3 * * *", *CHATHAM, Skip, Once, "2025-09-27T00:00:00Z", 1);
    assert_eq!(utc_marks(&skip), [("2025-09-28T13:15:00Z", None)]);
    let interval = fires(
        "*/30 * * * *",
        *CHATHAM,
        Shift,
        Once,
        "2025-09-27T13:30:00Z",
        3,
    );
    assert_eq!(
        utc_marks(&interval),
        [
            ("2025-09-27T13:45:00Z", None),
            ("2025-09-27T14:15:00Z", None),
            ("2025-09-27T14:45:00Z", None)
        ]
    );
    // 2025-04-06: 03:45 (+13:45) falls back to 02:45 (+12:45) at 2025-04-05T14:00Z.
    let twice = fires(
        "0 3 * * *",
        *CHATHAM,
        Shift,
        Twice,
        "2025-04-05T00:00:00Z",
        2,
    );
    assert_eq!(
        twice,
        [
            (
                "2025-04-05T13:15:00Z".to_owned(),
                "2025-04-06T03:00:00+13:45".to_owned(),
                None
            ),
            (
                "2025-04-05T14:15:00Z".to_owned(),
                "2025-04-06T03:00:00+12:45".to_owned(),
                REPEATED
            ),
        ]
    );
    let once = fires(
        "0 3 * * *",
        *CHATHAM,
        Shift,
        Once,
        "2025-04-05T00:00:00Z",
        2,
    );
    assert_eq!(
        utc_marks(&once),
        [
            ("2025-04-05T13:15:00Z", None),
            ("2025-04-06T14:15:00Z", None)
        ]
    );
}

#[test]
fn far_fires_cross_many_transitions() {
    let leap = schedule("0 0 29 2 *", *NEW_YORK, Shift, Once);
    assert_eq!(
        leap.next_after(at("2096-03-01T00:00:00Z")),
        Some(at("2104-02-29T05:00:00Z"))
    );
    assert_eq!(
        leap.next_after(at("2025-06-15T00:00:00Z")),
        Some(at("2028-02-29T05:00:00Z"))
    );
    let never = schedule("0 0 30 2 *", *NEW_YORK, Shift, Twice);
    assert_eq!(never.next_after(at("2025-01-01T00:00:00Z")), None);
    assert_eq!(
        never.validate(at("2025-01-01T00:00:00Z")),
        Err(CronError::NoFutureFire)
    );
}

#[test]
fn utc_zone_agrees_with_the_plain_evaluator() {
    for text in ["* * * * *", "0 0 29 2 *", "30 2 * * 1-5", "0 9 * * MON#2"] {
        let e = CronExpr::parse(text).unwrap();
        let mut t = at("2025-03-09T06:59:30Z");
        for _ in 0..50 {
            let plain = e.next_after(t).unwrap();
            assert_eq!(ZonedCron::utc(e).next_after(t), Some(plain), "{text}");
            t = plain;
        }
    }
}
