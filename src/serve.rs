//! `cairn serve`: opens the engine, binds `[server] listen` (with TLS when
//! configured), hosts the custom-resource callback listener on the same
//! address and serves `cairn-api`'s routes until SIGTERM or Ctrl-C.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use anyhow::{anyhow, Context};
use cairn_api::App;
use cairn_core::config::{Config, ServerAuth};

pub struct ServeArgs<'a> {
    pub config: Config,
    pub state: &'a Path,
    pub listen: Option<String>,
    /// The trace spans' counts, when traces are exported.
    pub spans: Option<std::sync::Arc<cairn_api::SpanCounts>>,
}

/// Runs the server until SIGTERM or Ctrl-C.
pub async fn run(args: ServeArgs<'_>) -> anyhow::Result<()> {
    let config = args.config;
    let server = config.server.clone();
    match server.auth {
        ServerAuth::None => tracing::warn!(
            "authentication is off (server.auth = \"none\"): any client that reaches this address may operate every stack"
        ),
        ServerAuth::Sigv4 if server.access_keys.is_empty() => {
            return Err(anyhow!(
                "server.auth is \"sigv4\" but no [server.access_keys] are configured: add one, or set auth = \"none\" on a trusted network"
            ))
        }
        ServerAuth::Sigv4 => {}
    }
    let (engine, process) = crate::stacks::open_with_transports(&config, args.state).await?;
    // Start the configured providers now, so that /healthz tells at once
    // which are down; one that cannot start leaves the server up and is
    // tried again when its types are next needed.
    {
        let engine = engine.clone();
        let statuses = tokio::task::spawn_blocking(move || engine.registry().start_all()).await?;
        for p in statuses {
            if let Some(cause) = p.cause {
                tracing::warn!(
                    "provider {} cannot start: {cause}; its types are unavailable until it does",
                    p.name
                );
            }
        }
    }
    // Registered types (RegisterType on any engine sharing the state) are
    // read again whenever the registry changes: served without a restart.
    {
        let engine = engine.clone();
        let loader = crate::wiring::registered::loader(
            &config,
            crate::stacks::types_cache(&config, args.state),
            &process,
        );
        let every = std::time::Duration::from_millis(config.registry.poll_ms.max(100));
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                if let Err(e) = engine
                    .registry()
                    .refresh_registered(engine.store(), loader.as_ref())
                    .await
                {
                    tracing::warn!("cannot read the registered types: {e}");
                }
            }
        });
    }
    let secret = engine.store().callback_secret().await.context(
        "cannot read the state's shared secret (the console's CSRF tokens are signed with it)",
    )?;
    let app = App::new(engine.clone(), config.clone(), &secret, args.spans.clone());
    let router = cairn_api::router(app.clone());
    let listen = args.listen.unwrap_or(server.listen.clone());
    let listener = std::net::TcpListener::bind(&listen)
        .with_context(|| format!("cannot listen on {listen}"))?;
    listener.set_nonblocking(true)?;
    let addr: SocketAddr = listener.local_addr()?;
    let tls = match (&server.tls_cert, &server.tls_key) {
        (Some(cert), Some(key)) => {
            let _ = rustls::crypto::ring::default_provider().install_default();
            Some(
                axum_server::tls_rustls::RustlsConfig::from_pem_file(cert, key)
                    .await
                    .with_context(|| {
                        format!(
                            "cannot load the server's TLS certificate {} and key {} ([server] tls_cert, tls_key)",
                            cert.display(),
                            key.display()
                        )
                    })?,
            )
        }
        (None, None) => None,
        _ => return Err(anyhow!("server.tls_cert and server.tls_key go together")),
    };
    let scheme = if tls.is_some() { "https" } else { "http" };
    // Custom resources' handlers answer on this server too (ResponseURLs
    // name it, or [webhooks] public_url when set).
    let public = config
        .webhooks
        .public_url
        .clone()
        .unwrap_or_else(|| format!("{scheme}://{addr}"));
    let router = router.merge(
        process
            .callbacks
            .host_on(&public, config.webhooks.public_url.is_some(), addr)
            .await?,
    );
    // The one line tests and scripts read the bound port from.
    println!("listening on {scheme}://{addr}");
    tracing::info!("listening on {scheme}://{addr}");
    // Operations a previous process on this host left in progress are
    // claimed at once; those of engines elsewhere when their leases run out.
    if let Err(e) = engine.claims().break_dead_leases().await {
        tracing::warn!("cannot look for interrupted operations: {e}");
    }
    tokio::spawn(app.clone().claim_forever());
    tokio::spawn(app.clone().keep_audit_forever());
    // Stack notifications, for as long as the server runs (what is left at
    // shutdown is sent by the next engine on this state).
    let notifier = cairn_core::engine::notifications::Notifier::new(engine.clone());
    let (_keep_notifying, notifying) = tokio::sync::watch::channel(false);
    tokio::spawn(async move { notifier.run(notifying).await });
    let handle = axum_server::Handle::new();
    {
        let handle = handle.clone();
        tokio::spawn(async move {
            shutdown_signal().await;
            tracing::warn!("shutting down: no new requests; operations in progress are recorded and resume on the next start");
            handle.graceful_shutdown(Some(Duration::from_secs(10)));
        });
    }
    // Each request knows its peer's address (the audit trail's
    // sourceIPAddress).
    let service = router.into_make_service_with_connect_info::<std::net::SocketAddr>();
    match tls {
        Some(tls) => {
            axum_server::from_tcp_rustls(listener, tls)?
                .handle(handle)
                .serve(service)
                .await?
        }
        None => {
            axum_server::from_tcp(listener)?
                .handle(handle)
                .serve(service)
                .await?
        }
    }
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(t) => t,
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
