//! Calendars and exclusions through the API: a calendar written from entries or from an
//! iCalendar file, named by a schedule's `exclude`, shown in its words and in the preview's
//! fires, kept while named, and refused field by field when wrong.

use std::sync::Arc;

use reqwest::{Method, StatusCode};
use sentin8_cron::core::store::Store;
use serde_json::{Value, json};

use crate::api::Api;

const HOLIDAYS_ICS: &str = "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//test//EN\r\n\
BEGIN:VEVENT\r\nUID:ny@test\r\nDTSTART;VALUE=DATE:20300101\r\nRRULE:FREQ=YEARLY\r\nSUMMARY:New Year's Day\r\nEND:VEVENT\r\n\
BEGIN:VEVENT\r\nUID:tg@test\r\nDTSTART;VALUE=DATE:20301128\r\nRRULE:FREQ=YEARLY;BYMONTH=11;BYDAY=4TH\r\nSUMMARY:Thanksgiving\r\nEND:VEVENT\r\n\
BEGIN:VEVENT\r\nUID:xmas@test\r\nDTSTART;VALUE=DATE:20301224\r\nDTEND;VALUE=DATE:20301227\r\nSUMMARY:Christmas break\r\nEND:VEVENT\r\n\
END:VCALENDAR\r\n";

fn path(api: &Api, name: &str) -> String {
    format!("/v1/calendars/{name}?target_env_id={}", api.env_a)
}

pub async fn calendars_are_written_named_and_shown_through_the_api(store: Arc<dyn Store>) {
    let api = Api::start(store).await;
    let token = api.writer();
    // From an iCalendar file: each event an entry, its summary the note.
    let (status, created, _) = api
        .call(
            Method::PUT,
            &path(&api, "holidays"),
            Some(&token),
            Some(json!({"description": "US holidays", "ical": HOLIDAYS_ICS})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(
        created["entries"],
        json!([
            {"spec": "* * 1 1 *", "note": "New Year's Day"},
            {"spec": "* * * 11 THU#4", "note": "Thanksgiving"},
            {"spec": "2030-12-24..2030-12-26", "note": "Christmas break"},
        ]),
        "{created}"
    );
    // Written again from entries: replaced, 200.
    let (status, replaced, _) = api
        .call(
            Method::PUT,
            &path(&api, "freeze"),
            Some(&token),
            Some(json!({"entries": [{"spec": "2030-06-01..2030-06-03", "note": "migration"}]})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{replaced}");
    let (status, replaced, _) = api
        .call(
            Method::PUT,
            &path(&api, "freeze"),
            Some(&token),
            Some(json!({"entries": [{"spec": "2030-06-02"}]})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{replaced}");
    assert_eq!(replaced["entries"], json!([{"spec": "2030-06-02"}]));

    // Wrong entries and a wrong file are refused by field.
    let (status, problem, _) = api
        .call(
            Method::PUT,
            &path(&api, "bad"),
            Some(&token),
            Some(json!({"entries": [{"spec": "2030-06-02"}, {"spec": "someday"}]})),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{problem}");
    assert_eq!(
        problem["errors"][0]["field"], "entries[1].spec",
        "{problem}"
    );
    let (status, problem, _) = api
        .call(
            Method::PUT,
            &path(&api, "bad"),
            Some(&token),
            Some(json!({"ical": "BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nSUMMARY:x\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"})),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{problem}");
    assert_eq!(problem["errors"][0]["field"], "ical", "{problem}");
    assert!(
        problem["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("line"),
        "{problem}"
    );
    let (status, problem, _) = api
        .call(
            Method::PUT,
            &path(&api, "9lives"),
            Some(&token),
            Some(json!({})),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{problem}");
    assert_eq!(problem["errors"][0]["field"], "name", "{problem}");

    // A schedule names it; the words and the preview show the exclusions.
    let mut body = api.new_schedule(api.env_a, "nightly");
    body["exclude"] = json!(["holidays", "* * * * SAT,SUN", "2030-07-04"]);
    let (status, schedule, _) = api
        .call(Method::POST, "/v1/schedules", Some(&token), Some(body))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{schedule}");
    assert_eq!(
        schedule["exclude"],
        json!(["holidays", "* * * * SAT,SUN", "2030-07-04"])
    );
    let words = schedule["description"].as_str().unwrap();
    assert!(
        words.ends_with("except holidays, * * * * SAT,SUN, 2030-07-04"),
        "{words}"
    );
    let (status, preview, _) = api
        .call(
            Method::GET,
            &format!(
                "/v1/admin/preview?target_env_id={}&cron=0%209%20*%20*%20*&timezone=America/New_York&after=2030-12-23T00:00:00Z&count=5&exclude=holidays",
                api.env_a
            ),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{preview}");
    let excluded: Vec<Value> = preview["fires"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["excluded"].clone())
        .collect();
    assert_eq!(
        excluded,
        [
            Value::Null,
            json!("holidays: 2030-12-24..2030-12-26 (Christmas break)"),
            json!("holidays: 2030-12-24..2030-12-26 (Christmas break)"),
            json!("holidays: 2030-12-24..2030-12-26 (Christmas break)"),
            Value::Null,
        ],
        "{preview}"
    );

    // Bad exclusions name their entry; an unknown calendar is refused.
    for (exclude, field) in [
        (json!(["2030-02-30"]), "exclude[0]"),
        (json!(["holidays", "* * 40 * *"]), "exclude[1]"),
        (json!(["nope"]), "exclude"),
        (json!("holidays"), "exclude"),
    ] {
        let mut body = api.new_schedule(api.env_a, "refused");
        body["exclude"] = exclude.clone();
        let (status, problem, _) = api
            .call(Method::POST, "/v1/schedules", Some(&token), Some(body))
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{exclude}: {problem}");
        assert_eq!(problem["errors"][0]["field"], field, "{exclude}: {problem}");
    }

    // Named, it stays; the answer names the schedule. A patch that drops it lets it go.
    let id = schedule["id"].as_str().unwrap();
    let (status, problem, _) = api
        .call(Method::DELETE, &path(&api, "holidays"), Some(&token), None)
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{problem}");
    assert!(
        problem["detail"].as_str().unwrap().contains(id),
        "{problem}"
    );
    let (status, patched, _) = api
        .call(
            Method::PATCH,
            &format!("/v1/schedules/{id}?target_env_id={}", api.env_a),
            Some(&token),
            Some(json!({"exclude": ["freeze"]})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{patched}");
    assert_eq!(patched["exclude"], json!(["freeze"]));
    let (status, _, _) = api
        .call(Method::DELETE, &path(&api, "holidays"), Some(&token), None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, list, _) = api
        .call(
            Method::GET,
            &format!("/v1/calendars?target_env_id={}", api.env_a),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let names: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["freeze"]);
    // Another environment sees none of them.
    let (_, other, _) = api
        .call(
            Method::GET,
            &format!("/v1/calendars?target_env_id={}", api.env_b),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(other["items"], json!([]));
    let (status, _, _) = api
        .call(
            Method::GET,
            &format!("/v1/calendars/freeze?target_env_id={}", api.env_b),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}
