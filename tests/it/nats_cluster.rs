//! A throwaway NATS JetStream cluster: three `nats-server` processes (n1, n2, n3) on free
//! loopback ports, each with its own store directory and a generated configuration that routes
//! to the other two. A server can be killed (SIGKILL, no goodbye to its peers) and started again
//! on the same ports and store; every server is killed and the directory removed when the
//! cluster is dropped.
//!
//! The node-loss drill (`nats_drill.rs`) runs the relay against such a cluster. Shared by the node-loss test (`relay_cluster`) and the bench (`relay_node_loss`), so it
//! depends on nothing of either: failures are `Err(String)` with the servers' logs attached.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, consumer, stream};
use futures_util::StreamExt;

/// How long a server may take to answer its monitoring port after it was started.
const START_BOUND: Duration = Duration::from_secs(10);

/// The cluster's name in the servers' configurations.
const CLUSTER_NAME: &str = "s8c-drill";

/// `nats-server`: `SENTIN8_CRON_NATS_SERVER`, else the first on the `PATH`, else Debian's
/// package location (`/usr/sbin`, which an ordinary user's `PATH` may lack).
pub fn find_program() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("SENTIN8_CRON_NATS_SERVER").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(path));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin")])
        .map(|dir| dir.join("nats-server"))
        .find(|candidate| candidate.is_file())
}

/// One server of the cluster.
pub struct Node {
    /// `n1`, `n2` or `n3`: the server name JetStream reports (stream leaders, replicas).
    pub name: String,
    pub client_port: u16,
    pub monitor_port: u16,
    config: PathBuf,
    log: PathBuf,
    child: Option<Child>,
}

impl Node {
    /// `nats://127.0.0.1:<client port>`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.client_port)
    }

    pub fn running(&self) -> bool {
        self.child.is_some()
    }

    /// The last lines of this server's log, for failure messages.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }
}

/// Three clustered JetStream servers; all killed and their files removed on drop.
pub struct NatsCluster {
    program: PathBuf,
    pub nodes: Vec<Node>,
    http: reqwest::Client,
    // Last, so the servers are killed before their directory goes.
    _dir: tempfile::TempDir,
}

impl NatsCluster {
    /// Writes the three configurations and starts the servers. They are not a cluster yet:
    /// see [`NatsCluster::wait_for_jetstream`].
    pub async fn start(program: &Path) -> Result<NatsCluster, String> {
        let dir = tempfile::Builder::new()
            .prefix("s8c-nats-cluster-")
            .tempdir()
            .map_err(|e| format!("temporary directory: {e}"))?;
        let ports = free_ports(9)?;
        let cluster_ports = &ports[6..9];
        let routes: Vec<String> = cluster_ports
            .iter()
            .map(|port| format!("    \"nats-route://127.0.0.1:{port}\""))
            .collect();
        let mut nodes = Vec::new();
        for n in 0..3 {
            let name = format!("n{}", n + 1);
            let store = dir.path().join(&name);
            let config = dir.path().join(format!("{name}.conf"));
            let text = format!(
                "server_name: {name}\n\
                 listen: \"127.0.0.1:{client}\"\n\
                 http: \"127.0.0.1:{monitor}\"\n\
                 jetstream {{\n  store_dir: \"{store}\"\n  max_memory_store: 64MB\n  \
                 max_file_store: 1GB\n}}\n\
                 cluster {{\n  name: {CLUSTER_NAME}\n  listen: \"127.0.0.1:{cluster}\"\n  \
                 routes = [\n{routes}\n  ]\n}}\n",
                client = ports[n],
                monitor = ports[3 + n],
                store = store.display(),
                cluster = cluster_ports[n],
                routes = routes.join("\n"),
            );
            std::fs::write(&config, text).map_err(|e| format!("{}: {e}", config.display()))?;
            nodes.push(Node {
                log: dir.path().join(format!("{name}.log")),
                name,
                client_port: ports[n],
                monitor_port: ports[3 + n],
                config,
                child: None,
            });
        }
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(2))
            .no_proxy()
            .build()
            .map_err(|e| format!("HTTP client: {e}"))?;
        let mut cluster = NatsCluster {
            program: program.to_owned(),
            nodes,
            http,
            _dir: dir,
        };
        for n in 0..3 {
            cluster.spawn(n)?;
        }
        for n in 0..3 {
            cluster.wait_for_monitoring(n).await?;
        }
        Ok(cluster)
    }

    fn spawn(&mut self, n: usize) -> Result<(), String> {
        let node = &mut self.nodes[n];
        let child = Command::new(&self.program)
            .arg("-c")
            .arg(&node.config)
            .arg("-l")
            .arg(&node.log)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", self.program.display()))?;
        node.child = Some(child);
        Ok(())
    }

    /// Waits until server `n` answers on its monitoring port, or says why it did not.
    async fn wait_for_monitoring(&mut self, n: usize) -> Result<(), String> {
        let deadline = Instant::now() + START_BOUND;
        let url = format!("http://127.0.0.1:{}/varz", self.nodes[n].monitor_port);
        loop {
            if self.http.get(&url).send().await.is_ok() {
                return Ok(());
            }
            let node = &mut self.nodes[n];
            let exited = node
                .child
                .as_mut()
                .and_then(|child| child.try_wait().ok().flatten());
            if exited.is_some() || Instant::now() > deadline {
                return Err(format!(
                    "{} did not start ({}):\n{}",
                    node.name,
                    exited.map_or_else(
                        || format!("not up after {START_BOUND:?}"),
                        |s| s.to_string()
                    ),
                    node.log_tail()
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The seed list of all three servers, as the relay's bus URL takes it.
    pub fn urls(&self) -> String {
        self.nodes
            .iter()
            .map(Node::url)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// A client of the cluster (any server), named `name` for the monitoring pages.
    pub async fn client(&self, name: &str) -> Result<async_nats::Client, String> {
        let servers: Vec<String> = self.nodes.iter().map(Node::url).collect();
        async_nats::ConnectOptions::new()
            .name(name)
            .connection_timeout(Duration::from_secs(3))
            .connect(servers.as_slice())
            .await
            .map_err(|e| format!("cannot connect to the cluster: {e}"))
    }

    /// Waits until the cluster can hold a stream of three replicas (routes up, a JetStream
    /// meta leader elected, every server a peer), by creating and deleting one, for at most
    /// `bound`.
    pub async fn wait_for_jetstream(
        &self,
        js: &jetstream::Context,
        bound: Duration,
    ) -> Result<(), String> {
        let probe = stream::Config {
            name: "S8C_CLUSTER_PROBE".into(),
            subjects: vec!["s8c-cluster-probe.>".into()],
            num_replicas: 3,
            ..stream::Config::default()
        };
        let deadline = Instant::now() + bound;
        loop {
            match js.create_stream(probe.clone()).await {
                Ok(_) => break,
                Err(err) if Instant::now() > deadline => {
                    return Err(format!(
                        "the cluster did not take a 3-replica stream within {bound:?}: {err}\n{}",
                        self.logs()
                    ));
                }
                // Until the routes are up and a meta leader is elected, JetStream answers
                // "insufficient resources", "temporarily unavailable" or nothing at all.
                Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
            }
        }
        let _ = js.delete_stream(&probe.name).await;
        Ok(())
    }

    /// SIGKILLs server `n`: no lame-duck mode, no goodbye to its peers or clients.
    pub fn kill(&mut self, n: usize) {
        if let Some(mut child) = self.nodes[n].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts server `n` again on its ports and store, and waits for its monitoring port.
    pub async fn restart(&mut self, n: usize) -> Result<(), String> {
        self.kill(n);
        self.spawn(n)?;
        self.wait_for_monitoring(n).await
    }

    /// The index of the server on which a connection named `client_name` is open, from each
    /// server's `/connz`.
    pub async fn server_of_connection(&self, client_name: &str) -> Option<usize> {
        for (n, node) in self.nodes.iter().enumerate() {
            if !node.running() {
                continue;
            }
            let url = format!("http://127.0.0.1:{}/connz?limit=1024", node.monitor_port);
            let Ok(response) = self.http.get(&url).send().await else {
                continue;
            };
            let Ok(page) = response.json::<serde_json::Value>().await else {
                continue;
            };
            let found = page["connections"]
                .as_array()
                .is_some_and(|conns| conns.iter().any(|c| c["name"] == client_name));
            if found {
                return Some(n);
            }
        }
        None
    }

    /// The index of the server leading `stream`, if it has a leader now.
    pub async fn stream_leader(&self, js: &jetstream::Context, stream: &str) -> Option<usize> {
        let mut handle = js.get_stream(stream).await.ok()?;
        let info = handle.info().await.ok()?;
        let leader = info.cluster.as_ref()?.leader.clone()?;
        self.nodes.iter().position(|node| node.name == leader)
    }

    /// Asks the stream's leader to step down until server `n` leads it: each step down elects
    /// one of the other replicas at random. At most `tries` step downs; true when `n` leads.
    pub async fn move_stream_leader(
        &self,
        client: &async_nats::Client,
        js: &jetstream::Context,
        stream: &str,
        n: usize,
        tries: usize,
    ) -> bool {
        for _ in 0..tries {
            let Some(leader) = self.stream_leader(js, stream).await else {
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            };
            if leader == n {
                return true;
            }
            let subject = format!("$JS.API.STREAM.LEADER.STEPDOWN.{stream}");
            let _ = client.request(subject, bytes::Bytes::new()).await;
            // Wait (bounded) for the election that follows.
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(100)).await;
                match self.stream_leader(js, stream).await {
                    Some(now) if now != leader => break,
                    _ => {}
                }
            }
        }
        self.stream_leader(js, stream).await == Some(n)
    }

    /// Whether server `n` is a current (caught-up) replica of `stream`, or its leader.
    pub async fn is_current_replica(
        &self,
        js: &jetstream::Context,
        stream: &str,
        n: usize,
    ) -> bool {
        let Ok(mut handle) = js.get_stream(stream).await else {
            return false;
        };
        let Ok(info) = handle.info().await else {
            return false;
        };
        let Some(cluster) = &info.cluster else {
            return false;
        };
        let name = &self.nodes[n].name;
        cluster.leader.as_ref() == Some(name)
            || cluster
                .replicas
                .iter()
                .any(|peer| &peer.name == name && peer.current)
    }

    /// The last lines of every server's log.
    pub fn logs(&self) -> String {
        self.nodes
            .iter()
            .map(|node| format!("--- {} ---\n{}", node.name, node.log_tail()))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for NatsCluster {
    fn drop(&mut self) {
        for n in 0..self.nodes.len() {
            self.kill(n);
        }
    }
}

/// Every message's `Nats-Msg-Id` in `stream`, in stream order, read through an ephemeral pull
/// consumer (as a subscriber would read them), with the count the stream reports. Bounded: a
/// fetch that brings nothing ends the read.
pub async fn stream_message_ids(
    js: &jetstream::Context,
    stream: &str,
) -> Result<(Vec<String>, u64), String> {
    let mut handle = js
        .get_stream(stream)
        .await
        .map_err(|e| format!("stream {stream}: {e}"))?;
    let total = handle
        .info()
        .await
        .map_err(|e| format!("stream {stream}: {e}"))?
        .state
        .messages;
    let reader = handle
        .create_consumer(consumer::pull::Config {
            deliver_policy: consumer::DeliverPolicy::All,
            ack_policy: consumer::AckPolicy::None,
            inactive_threshold: Duration::from_secs(30),
            ..consumer::pull::Config::default()
        })
        .await
        .map_err(|e| format!("consumer on {stream}: {e}"))?;
    let mut ids = Vec::new();
    while (ids.len() as u64) < total {
        let mut batch = reader
            .fetch()
            .max_messages(1000)
            .expires(Duration::from_secs(2))
            .messages()
            .await
            .map_err(|e| format!("fetch from {stream}: {e}"))?;
        let before = ids.len();
        while let Some(message) = batch.next().await {
            let message = message.map_err(|e| format!("fetch from {stream}: {e}"))?;
            let id = message
                .headers
                .as_ref()
                .and_then(|h| h.get("Nats-Msg-Id"))
                .map(|v| v.as_str().to_owned())
                .unwrap_or_default();
            ids.push(id);
        }
        if ids.len() == before {
            break;
        }
    }
    Ok((ids, total))
}

/// `count` distinct free loopback ports: all held open until every one is found, so none is
/// handed out twice.
fn free_ports(count: usize) -> Result<Vec<u16>, String> {
    let listeners = (0..count)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("no free loopback port: {e}"))?;
    listeners
        .iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("no free loopback port: {e}"))
}

// ---------------------------------------------------------------------------------------------
// The drill
