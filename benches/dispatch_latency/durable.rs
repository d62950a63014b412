//! How long answers waited to be durable: each serve's `sentin8_cron_outcome_durable_seconds`
//! histogram (from a call's answer to the commit that holds it, the answer written ahead or
//! the record), read from its `/metrics` before it stops. It covers the serve's whole run, the
//! warm-up minute included.

/// One serve's histogram: answers counted, and how many within each bound (seconds).
pub struct Durable {
    pub count: u64,
    pub within: Vec<(f64, u64)>,
}

impl Durable {
    /// Answers within `bound` seconds (a bound of the histogram).
    pub fn within(&self, bound: f64) -> Option<u64> {
        self.within
            .iter()
            .find(|(le, _)| (*le - bound).abs() < 1e-9)
            .map(|(_, n)| *n)
    }

    /// One line for the report.
    pub fn line(&self, serve: usize) -> String {
        let share = |bound: f64| match self.within(bound) {
            Some(n) if self.count > 0 => format!(
                "{n} within {bound} s ({:.2} %)",
                n as f64 * 100.0 / self.count as f64
            ),
            _ => format!("none counted within {bound} s"),
        };
        format!(
            "- answers made durable, serve #{serve} (`sentin8_cron_outcome_durable_seconds`, its \
             whole run): {}; {}; {}",
            self.count,
            share(0.1),
            share(0.25)
        )
    }
}

/// Reads the histogram from a serve's `/metrics` at `base` (`http://host:port`).
pub async fn read(base: &str) -> anyhow::Result<Durable> {
    let text = reqwest::get(format!("{base}/metrics"))
        .await?
        .error_for_status()?
        .text()
        .await?;
    Ok(parse(&text))
}

fn parse(text: &str) -> Durable {
    const NAME: &str = "sentin8_cron_outcome_durable_seconds";
    let mut durable = Durable {
        count: 0,
        within: Vec::new(),
    };
    for line in text.lines().filter(|l| l.starts_with(NAME)) {
        let Some((key, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(value) = value.parse::<f64>() else {
            continue;
        };
        if key == format!("{NAME}_count") {
            durable.count = value as u64;
        } else if let Some(le) = key
            .strip_prefix(&format!("{NAME}_bucket{{le=\""))
            .and_then(|rest| rest.strip_suffix("\"}"))
            .and_then(|le| le.parse::<f64>().ok())
        {
            durable.within.push((le, value as u64));
        }
    }
    durable
}
