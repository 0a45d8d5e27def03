//! A network link to the API server that a test can cut, to partition one client (one replica
//! of an operator, say) from the API server while the server stays up for everyone else.
//!
//! Cut, open connections drop and new ones hang without an answer until the link heals, as
//! behind a broken network: requests time out rather than fail fast, which is what a replica on
//! the wrong side of a partition sees.

use std::net::SocketAddr;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// A TCP forwarder on `127.0.0.1` in front of the API server, with a switch that cuts it.
/// Dropping the link stops accepting connections.
#[derive(Debug)]
pub struct Link {
    url: String,
    cut: watch::Sender<bool>,
    acceptor: JoinHandle<()>,
}

impl Link {
    /// Forward an ephemeral port of `127.0.0.1` to `upstream` (usually
    /// [`Handle::addr`](crate::Handle::addr)).
    pub async fn start(upstream: SocketAddr) -> std::io::Result<Link> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let url = format!("http://{}", listener.local_addr()?);
        let (cut, _) = watch::channel(false);
        let state = cut.subscribe();
        let acceptor = tokio::spawn(async move {
            while let Ok((inbound, _)) = listener.accept().await {
                tokio::spawn(forward(inbound, upstream, state.clone()));
            }
        });
        Ok(Link { url, cut, acceptor })
    }

    /// The link's URL (`http://127.0.0.1:PORT`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// A client that reaches the API server through this link, with `namespace` as its default.
    pub fn client(&self, namespace: &str) -> Result<kube::Client, kube::Error> {
        let uri = self.url.parse().map_err(|e: http::uri::InvalidUri| kube::Error::Service(Box::new(e)))?;
        let mut config = kube::Config::new(uri);
        config.default_namespace = namespace.into();
        kube::Client::try_from(config)
    }

    /// Cut the link (`true`) or heal it (`false`).
    pub fn set_cut(&self, cut: bool) {
        self.cut.send_replace(cut);
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        self.acceptor.abort();
    }
}

async fn forward(mut inbound: TcpStream, upstream: SocketAddr, mut cut: watch::Receiver<bool>) {
    if *cut.borrow() {
        // Hold the connection unanswered until the link heals.
        let _ = cut.wait_for(|cut| !*cut).await;
        return;
    }
    let Ok(mut outbound) = TcpStream::connect(upstream).await else { return };
    tokio::select! {
        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
        _ = cut.wait_for(|cut| *cut) => {}
    }
}
