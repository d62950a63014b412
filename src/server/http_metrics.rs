//! The API's own traffic as metrics: requests by route template (never the raw path, so the
//! series stay as few as the routes), method and status class, and a duration histogram per
//! route and method. A request no route matched counts under `route="unmatched"`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{MatchedPath, Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;

/// Upper bounds of the duration buckets, in seconds.
const BOUNDS: [f64; 10] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0];
/// The status classes counted, `1xx` to `5xx`.
const CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];

/// Requests so far, by route and method.
#[derive(Debug, Default)]
pub struct HttpMetrics {
    series: Mutex<BTreeMap<(String, &'static str), Series>>,
}

#[derive(Debug, Default)]
struct Series {
    by_class: [u64; CLASSES.len()],
    buckets: [u64; BOUNDS.len()],
    sum_seconds: f64,
    count: u64,
}

/// A method as a label: the standard ones by name, anything else as `OTHER` (a client cannot
/// make new series by inventing methods).
fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PATCH => "PATCH",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        _ => "OTHER",
    }
}

impl HttpMetrics {
    /// Records one answered request.
    pub fn observe(&self, route: &str, method: &Method, status: u16, took: Duration) {
        let mut series = self.series.lock().unwrap_or_else(|e| e.into_inner());
        let entry = series
            .entry((route.to_owned(), method_label(method)))
            .or_default();
        let class = usize::from(status / 100).clamp(1, CLASSES.len()) - 1;
        entry.by_class[class] += 1;
        let seconds = took.as_secs_f64();
        if let Some(bucket) = BOUNDS.iter().position(|bound| seconds <= *bound) {
            entry.buckets[bucket] += 1;
        }
        entry.sum_seconds += seconds;
        entry.count += 1;
    }

    /// The Prometheus text of both metrics.
    pub fn render(&self, out: &mut String) {
        let series = self.series.lock().unwrap_or_else(|e| e.into_inner());
        let _ = writeln!(
            out,
            "# HELP sentin8_cron_http_requests_total HTTP requests answered, by route template, method and status class.\n\
             # TYPE sentin8_cron_http_requests_total counter"
        );
        for ((route, method), s) in series.iter() {
            let route = super::system::label_value(route);
            for (class, count) in CLASSES.iter().zip(s.by_class) {
                if count > 0 {
                    let _ = writeln!(
                        out,
                        "sentin8_cron_http_requests_total{{route=\"{route}\",method=\"{method}\",status=\"{class}\"}} {count}"
                    );
                }
            }
        }
        let name = "sentin8_cron_http_request_duration_seconds";
        let _ = writeln!(
            out,
            "# HELP {name} Time to answer an HTTP request (to its response head), by route template and method.\n\
             # TYPE {name} histogram"
        );
        for ((route, method), s) in series.iter() {
            let route = super::system::label_value(route);
            let labels = format!("route=\"{route}\",method=\"{method}\"");
            let mut cumulative = 0;
            for (bound, count) in BOUNDS.iter().zip(s.buckets) {
                cumulative += count;
                let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{bound}\"}} {cumulative}");
            }
            let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {}", s.count);
            let _ = writeln!(out, "{name}_sum{{{labels}}} {}", s.sum_seconds);
            let _ = writeln!(out, "{name}_count{{{labels}}} {}", s.count);
        }
    }
}

/// The middleware that records each request.
pub async fn record(
    State(metrics): State<Arc<HttpMetrics>>,
    request: Request,
    next: Next,
) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |path| path.as_str().to_owned());
    let method = request.method().clone();
    let started = Instant::now();
    let response = next.run(request).await;
    metrics.observe(
        &route,
        &method,
        response.status().as_u16(),
        started.elapsed(),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_are_by_template_method_and_class_with_cumulative_buckets() {
        let metrics = HttpMetrics::default();
        let route = "/v1/schedules/{id}";
        metrics.observe(route, &Method::GET, 200, Duration::from_millis(3));
        metrics.observe(route, &Method::GET, 404, Duration::from_millis(30));
        metrics.observe(
            route,
            &Method::from_bytes(b"BREW").unwrap(),
            405,
            Duration::ZERO,
        );
        let mut out = String::new();
        metrics.render(&mut out);
        for line in [
            "sentin8_cron_http_requests_total{route=\"/v1/schedules/{id}\",method=\"GET\",status=\"2xx\"} 1",
            "sentin8_cron_http_requests_total{route=\"/v1/schedules/{id}\",method=\"GET\",status=\"4xx\"} 1",
            "sentin8_cron_http_requests_total{route=\"/v1/schedules/{id}\",method=\"OTHER\",status=\"4xx\"} 1",
            "sentin8_cron_http_request_duration_seconds_bucket{route=\"/v1/schedules/{id}\",method=\"GET\",le=\"0.005\"} 1",
            "sentin8_cron_http_request_duration_seconds_bucket{route=\"/v1/schedules/{id}\",method=\"GET\",le=\"0.05\"} 2",
            "sentin8_cron_http_request_duration_seconds_count{route=\"/v1/schedules/{id}\",method=\"GET\"} 2",
        ] {
            assert!(out.contains(line), "{line} in\n{out}");
        }
    }
}
