//! A small W3C WebDriver client over reqwest, driving headless Chromium through chromedriver.
//! Only what the admin page tests need: navigate, find, click, type, read, run a script, take
//! screenshots, resize. The driver runs in its own process group, which is killed (browser
//! included) when the [`Browser`] is dropped.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};
use tokio::process::{Child, Command};

/// The key W3C WebDriver uses for element references.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";
/// How long [`Browser::wait`] polls before failing.
pub const WAIT: Duration = Duration::from_secs(15);

fn which(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    names.iter().find_map(|name| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(name))
            .find(|candidate| candidate.is_file())
    })
}

/// A failed WebDriver command.
#[derive(Debug)]
pub struct WdError(pub String);

impl std::fmt::Display for WdError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

pub type WdResult<T> = Result<T, WdError>;

/// An element reference.
#[derive(Debug, Clone)]
pub struct Element(String);

/// One browser session.
pub struct Browser {
    http: reqwest::Client,
    session: String,
    driver: Child,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Runs `scenario` in a launched browser (a skip notice and nothing else when none can be
    /// launched), bounded by `bound` so a stuck browser fails the test instead of hanging the
    /// suite, and ends with a console free of errors.
    pub async fn run_bounded(bound: std::time::Duration, scenario: impl AsyncFnOnce(&Browser)) {
        let bounded = async {
            let Some(browser) = Browser::launch().await else {
                return;
            };
            scenario(&browser).await;
            browser.quit_with_a_clean_console().await;
        };
        tokio::time::timeout(bound, bounded)
            .await
            .expect("the browser scenario took too long");
    }

    /// Starts chromedriver and a headless Chromium session. `None` (with a message) when they
    /// are not installed and not required; a panic when they are required but missing.
    pub async fn launch() -> Option<Browser> {
        let chromium = which(&["chromium", "chromium-browser", "google-chrome"]);
        let driver = which(&["chromedriver"]);
        let (Some(chromium), Some(driver)) = (chromium, driver) else {
            crate::support::skip(
                crate::support::Needs::Browser,
                "chromium and chromedriver are not both on PATH \
                 (apt-get install chromium chromium-driver)",
            );
            return None;
        };
        match Self::start(&chromium, &driver).await {
            Ok(browser) => Some(browser),
            Err(err) => panic!("cannot start headless Chromium through chromedriver: {err}"),
        }
    }

    async fn start(chromium: &Path, driver: &Path) -> WdResult<Browser> {
        // chromedriver cannot pick a free port itself: take one and release it.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| WdError(format!("no free port: {e}")))?
            .port();
        let mut command = Command::new(driver);
        command
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        #[cfg(unix)]
        command.process_group(0);
        let child = command
            .spawn()
            .map_err(|e| WdError(format!("cannot run {}: {e}", driver.display())))?;
        let profile = tempfile::tempdir().map_err(|e| WdError(e.to_string()))?;
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .map_err(|e| WdError(e.to_string()))?;
        let root = format!("http://127.0.0.1:{port}");
        let mut browser = Browser {
            http,
            session: String::new(),
            driver: child,
            _profile: profile,
        };

        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let ready = browser
                .http
                .get(format!("{root}/status"))
                .send()
                .await
                .ok()
                .map(|r| r.json::<Value>());
            if let Some(body) = ready
                && body.await.is_ok_and(|v| v["value"]["ready"] == true)
            {
                break;
            }
            if Instant::now() > deadline {
                return Err(WdError("chromedriver did not become ready".into()));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }

        let args = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-extensions",
            "--hide-scrollbars",
            "--window-size=1280,900",
            "--lang=en-US",
        ]
        .into_iter()
        .map(str::to_owned)
        .chain([format!(
            "--user-data-dir={}",
            browser._profile.path().display()
        )])
        .collect::<Vec<_>>();
        let capabilities = json!({
            "capabilities": {
                "alwaysMatch": {
                    "browserName": "chrome",
                    "goog:chromeOptions": {
                        "binary": chromium.display().to_string(),
                        "args": args,
                    },
                    "goog:loggingPrefs": {"browser": "ALL"},
                    "timeouts": {"script": 10_000, "pageLoad": 30_000, "implicit": 0},
                }
            }
        });
        let response = browser
            .http
            .post(format!("{root}/session"))
            .json(&capabilities)
            .send()
            .await
            .map_err(|e| WdError(format!("new session: {e}")))?;
        let body: Value = response
            .json()
            .await
            .map_err(|e| WdError(format!("new session: {e}")))?;
        let id = body["value"]["sessionId"]
            .as_str()
            .ok_or_else(|| WdError(format!("new session refused: {body}")))?;
        browser.session = format!("{root}/session/{id}");
        Ok(browser)
    }

    async fn command(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> WdResult<Value> {
        let url = format!("{}{path}", self.session);
        let mut request = self.http.request(method.clone(), &url);
        if let Some(body) = body {
            request = request.json(&body);
        } else if method == reqwest::Method::POST {
            request = request.json(&json!({}));
        }
        let response = request
            .send()
            .await
            .map_err(|e| WdError(format!("{method} {path}: {e}")))?;
        let status = response.status();
        let body: Value = response
            .json()
            .await
            .map_err(|e| WdError(format!("{method} {path}: {e}")))?;
        if status.is_success() {
            Ok(body["value"].clone())
        } else {
            Err(WdError(format!(
                "{method} {path}: {} ({})",
                body["value"]["error"], body["value"]["message"]
            )))
        }
    }

    async fn post(&self, path: &str, body: Value) -> WdResult<Value> {
        self.command(reqwest::Method::POST, path, Some(body)).await
    }

    async fn get(&self, path: &str) -> WdResult<Value> {
        self.command(reqwest::Method::GET, path, None).await
    }

    pub async fn goto(&self, url: &str) -> WdResult<()> {
        self.post("/url", json!({ "url": url })).await.map(drop)
    }

    pub async fn current_url(&self) -> WdResult<String> {
        Ok(self
            .get("/url")
            .await?
            .as_str()
            .unwrap_or_default()
            .to_owned())
    }

    /// All elements matching a CSS selector (none is not an error).
    pub async fn find_all(&self, css: &str) -> WdResult<Vec<Element>> {
        let found = self
            .post("/elements", json!({"using": "css selector", "value": css}))
            .await?;
        Ok(found
            .as_array()
            .map(|items| {
                items
                    .iter()
                    .filter_map(|e| e[ELEMENT].as_str().map(|id| Element(id.to_owned())))
                    .collect()
            })
            .unwrap_or_default())
    }

    pub async fn find(&self, css: &str) -> WdResult<Element> {
        self.find_all(css)
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| WdError(format!("no element matches {css:?}")))
    }

    pub async fn click(&self, element: &Element) -> WdResult<()> {
        self.post(&format!("/element/{}/click", element.0), json!({}))
            .await
            .map(drop)
    }

    pub async fn clear(&self, element: &Element) -> WdResult<()> {
        self.post(&format!("/element/{}/clear", element.0), json!({}))
            .await
            .map(drop)
    }

    pub async fn type_text(&self, element: &Element, text: &str) -> WdResult<()> {
        self.post(
            &format!("/element/{}/value", element.0),
            json!({ "text": text }),
        )
        .await
        .map(drop)
    }

    pub async fn text(&self, element: &Element) -> WdResult<String> {
        Ok(self
            .get(&format!("/element/{}/text", element.0))
            .await?
            .as_str()
            .unwrap_or_default()
            .to_owned())
    }

    pub async fn attribute(&self, element: &Element, name: &str) -> WdResult<Option<String>> {
        Ok(self
            .get(&format!("/element/{}/attribute/{name}", element.0))
            .await?
            .as_str()
            .map(str::to_owned))
    }

    pub async fn displayed(&self, element: &Element) -> WdResult<bool> {
        Ok(self
            .get(&format!("/element/{}/displayed", element.0))
            .await?
            == json!(true))
    }

    /// Runs a script in the page (WebDriver's script execution is not subject to the page's
    /// Content-Security-Policy).
    pub async fn script(&self, script: &str, args: Value) -> WdResult<Value> {
        self.post("/execute/sync", json!({ "script": script, "args": args }))
            .await
    }

    pub async fn resize(&self, width: u32, height: u32) -> WdResult<()> {
        self.post("/window/rect", json!({ "width": width, "height": height }))
            .await
            .map(drop)
    }

    /// A PNG of the viewport, saved to `path`.
    pub async fn screenshot(&self, path: &Path) -> WdResult<()> {
        let encoded = self.get("/screenshot").await?;
        let png = base64::engine::general_purpose::STANDARD
            .decode(encoded.as_str().unwrap_or_default())
            .map_err(|e| WdError(format!("screenshot: {e}")))?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| WdError(e.to_string()))?;
        }
        std::fs::write(path, png).map_err(|e| WdError(format!("{}: {e}", path.display())))
    }

    /// The browser console's messages so far (best effort: empty where the driver cannot say).
    pub async fn console(&self) -> Vec<String> {
        self.post("/se/log", json!({"type": "browser"}))
            .await
            .ok()
            .and_then(|v| {
                v.as_array().map(|entries| {
                    entries
                        .iter()
                        .map(|e| format!("{} {}", e["level"], e["message"]))
                        .collect()
                })
            })
            .unwrap_or_default()
    }

    /// Polls `check` until it yields a value, or fails after [`WAIT`] naming `what`.
    pub async fn wait<T, F, Fut>(&self, what: &str, mut check: F) -> T
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = WdResult<Option<T>>>,
    {
        let deadline = Instant::now() + WAIT;
        let mut last = String::from("no answer yet");
        loop {
            match check().await {
                Ok(Some(value)) => return value,
                Ok(None) => {}
                Err(err) => last = err.to_string(),
            }
            if Instant::now() > deadline {
                let status = self.status_text().await;
                panic!(
                    "timed out waiting for {what} (last error: {last}; status line: {status:?})"
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The page's status line, for failure messages.
    pub async fn status_text(&self) -> String {
        match self.find("#status").await {
            Ok(status) => self.text(&status).await.unwrap_or_default(),
            Err(_) => String::new(),
        }
    }

    /// Waits until an element matching `css` is displayed, and returns it.
    pub async fn wait_visible(&self, css: &str) -> Element {
        self.wait(&format!("{css} to be visible"), || async {
            for element in self.find_all(css).await? {
                if self.displayed(&element).await? {
                    return Ok(Some(element));
                }
            }
            Ok(None)
        })
        .await
    }

    /// Waits until the element matching `css` shows text containing `needle`; returns the text.
    pub async fn wait_text(&self, css: &str, needle: &str) -> String {
        self.wait(&format!("{css} to contain {needle:?}"), || async {
            for element in self.find_all(css).await? {
                let text = self.text(&element).await?;
                if text.contains(needle) {
                    return Ok(Some(text));
                }
            }
            Ok(None)
        })
        .await
    }

    /// Waits until nothing matches `css`.
    pub async fn wait_gone(&self, css: &str) {
        self.wait(&format!("{css} to disappear"), || async {
            Ok(self.find_all(css).await?.is_empty().then_some(()))
        })
        .await
    }

    /// Ends the session (the driver closes the browser).
    pub async fn quit(&self) {
        let _ = self.command(reqwest::Method::DELETE, "", None).await;
    }

    /// Ends the session and fails if the browser logged a script error or a Content Security
    /// Policy violation. 4xx answers a scenario provokes are logged as failed loads; anything
    /// else at the error level is a bug.
    pub async fn quit_with_a_clean_console(&self) {
        let console = self.console().await;
        self.quit().await;
        let violations: Vec<&String> = console
            .iter()
            .filter(|line| {
                line.contains("Content Security Policy")
                    || line.contains("Uncaught")
                    || (line.contains("SEVERE") && !line.contains("Failed to load resource"))
            })
            .collect();
        assert!(violations.is_empty(), "browser console: {violations:#?}");
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // The driver leads its own process group; the browser's processes are in it too.
        #[cfg(unix)]
        if let Some(pid) = self.driver.id() {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", "--", &format!("-{pid}")])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
        let _ = self.driver.start_kill();
    }
}
