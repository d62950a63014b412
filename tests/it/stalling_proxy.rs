//! A TCP proxy on loopback that can be made to stop forwarding: the database behind it then
//! accepts connections and never answers, the outage that a refused connection does not
//! simulate (pool and connect timeouts are what a caller waits on).

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Forwards 127.0.0.1:port to an upstream address until dropped.
pub struct StallingProxy {
    pub addr: SocketAddr,
    stalled: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl StallingProxy {
    pub async fn start(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("proxy address");
        let (stalled, watcher) = watch::channel(false);
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let watcher = watcher.clone();
                tokio::spawn(async move {
                    let Ok(server) = TcpStream::connect(upstream).await else {
                        return;
                    };
                    let (client_read, client_write) = client.into_split();
                    let (server_read, server_write) = server.into_split();
                    tokio::join!(
                        pump(client_read, server_write, watcher.clone()),
                        pump(server_read, client_write, watcher),
                    );
                });
            }
        });
        Self {
            addr,
            stalled,
            task,
        }
    }

    /// Stops (true) or resumes (false) forwarding on every connection, open or new.
    pub fn stall(&self, stalled: bool) {
        self.stalled.send_replace(stalled);
    }
}

impl Drop for StallingProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Copies bytes one way, holding each chunk while the proxy is stalled.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut stalled: watch::Receiver<bool>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if stalled.wait_for(|s| !*s).await.is_err() {
            return;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
