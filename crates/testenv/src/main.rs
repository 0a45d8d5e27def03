//! `testenv serve`: run the in-process Kubernetes API server as a process that people and
//! `kubectl` can use.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(name = "testenv", version, about = "A Kubernetes API server for tests and demos, on 127.0.0.1")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Serve the API on 127.0.0.1 until interrupted.
    Serve {
        /// Port to listen on (0: any free port).
        #[arg(long, default_value_t = 0)]
        port: u16,
        /// Where to write a kubeconfig that points at the server.
        #[arg(long)]
        kubeconfig: PathBuf,
        /// Seconds of watch history to keep.
        #[arg(long, default_value_t = 300)]
        history_seconds: u64,
        /// Disable the garbage collector.
        #[arg(long)]
        no_garbage_collector: bool,
        /// Disable the namespace controller.
        #[arg(long)]
        no_namespace_controller: bool,
        /// Run the cluster simulation: workload controllers, a scheduler and simulated nodes.
        #[arg(long)]
        simulate: bool,
        /// Simulated nodes to start with, named node-1 … node-N (implies --simulate; default 1).
        #[arg(long, value_name = "N")]
        nodes: Option<usize>,
        /// Behave like a production cluster: TLS, bearer tokens, RBAC and Pod Security.
        #[arg(long)]
        secure: bool,
        /// Serve HTTPS with a generated CA (written to the kubeconfig).
        #[arg(long)]
        tls: bool,
        /// Require bearer tokens (the kubeconfig carries the administrator's).
        #[arg(long)]
        authentication: bool,
        /// Authorize with RBAC (implies --authentication).
        #[arg(long)]
        rbac: bool,
        /// Admit pods under Pod Security from namespace labels.
        #[arg(long)]
        pod_security: bool,
        /// The administrator's bearer token (default: random).
        #[arg(long, env = "TESTENV_ADMIN_TOKEN", hide_env_values = true)]
        admin_token: Option<String>,
        /// Log filter (tracing `EnvFilter` syntax); `debug` logs every request.
        #[arg(long, env = "TESTENV_LOG", default_value = "info")]
        log: String,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve {
            port,
            kubeconfig,
            history_seconds,
            no_garbage_collector,
            no_namespace_controller,
            simulate,
            nodes,
            secure,
            tls,
            authentication,
            rbac,
            pod_security,
            admin_token,
            log,
        } => {
            tracing_subscriber::fmt()
                .with_env_filter(tracing_subscriber::EnvFilter::try_new(&log)?)
                .with_writer(std::io::stderr)
                .init();
            let mut builder = testenv::TestEnv::builder()
                .port(port)
                .kubeconfig(&kubeconfig)
                .history(Duration::from_secs(history_seconds), 1_000_000)
                .garbage_collector(!no_garbage_collector)
                .namespace_controller(!no_namespace_controller);
            builder = builder
                .tls(secure || tls)
                .authentication(authentication)
                .rbac(secure || rbac)
                .pod_security(secure || pod_security);
            if let Some(token) = admin_token {
                builder = builder.admin_token(token);
            }
            if simulate || nodes.is_some() {
                builder = builder.simulation(testenv::SimConfig::with_nodes(nodes.unwrap_or(1)));
            }
            let env = builder.start().await?;
            println!("testenv serving {} (kubeconfig: {})", env.base_url(), kubeconfig.display());
            shutdown_signal().await;
            env.stop();
        }
    }
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(s) => s,
            Err(_) => {
                let _ = ctrl_c.await;
                return;
            }
        };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}
