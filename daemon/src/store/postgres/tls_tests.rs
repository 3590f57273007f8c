//! TLS to a real PostgreSQL server: one of the test's own (scripts/postgres.sh), given a
//! certificate the test makes for `localhost` and made to refuse every connection without
//! TLS, so a store that opens spoke TLS to it; and, as it asks a password of one role, the
//! words a daemon with a wrong one gets.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};

use super::PostgresStore;

const LEASE: Duration = Duration::from_secs(5);

/// The test's server, stopped when dropped.
struct Server {
    dir: tempfile::TempDir,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new(script())
            .arg("stop")
            .arg(self.dir.path())
            .status();
    }
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/postgres.sh")
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

/// A CA, as its PEM and its issuer.
fn ca() -> (String, CertifiedIssuer<'static, KeyPair>) {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().expect("key"))
        .expect("self-signed");
    (issuer.pem(), issuer)
}

/// Starts a server whose certificate `issuer` signed for `localhost` only, and which takes
/// TLS connections only.
async fn server(issuer: &CertifiedIssuer<'static, KeyPair>) -> Server {
    // Under /tmp: the server's user must be able to enter its directory.
    let dir = tempfile::Builder::new()
        .prefix("airlock-pg-tls")
        .tempdir_in("/tmp")
        .expect("dir");
    let port = free_port();
    let started = Command::new(script())
        .arg("start")
        .arg(dir.path())
        .arg(port.to_string())
        .output()
        .expect("scripts/postgres.sh runs");
    assert!(
        started.status.success(),
        "{}",
        String::from_utf8_lossy(&started.stderr)
    );
    let server = Server { dir, port };
    let key = KeyPair::generate().expect("key");
    let certificate = CertificateParams::new(vec!["localhost".to_owned()])
        .expect("params")
        .signed_by(&key, issuer)
        .expect("signed");
    let path = server.dir.path();
    std::fs::write(path.join("server.crt"), certificate.pem()).expect("write");
    std::fs::write(path.join("server.key"), key.serialize_pem()).expect("write");
    std::fs::write(
        path.join("pg_hba.conf"),
        "local all all trust\nhostssl all keyed 127.0.0.1/32 scram-sha-256\n\
         hostssl all all 127.0.0.1/32 trust\n",
    )
    .expect("write");
    let settings = format!(
        "\nssl = on\nssl_cert_file = '{0}/server.crt'\nssl_key_file = '{0}/server.key'\n",
        path.display()
    );
    let mut conf = std::fs::read_to_string(path.join("postgresql.conf")).expect("read");
    conf.push_str(&settings);
    std::fs::write(path.join("postgresql.conf"), conf).expect("write");
    // The server's user owns what it reads; the key is its alone.
    let owned = Command::new("chown")
        .arg("--reference")
        .arg(path.join("PG_VERSION"))
        .args(["server.crt", "server.key", "pg_hba.conf", "postgresql.conf"].map(|f| path.join(f)))
        .status()
        .expect("chown");
    assert!(owned.success());
    std::fs::set_permissions(
        path.join("server.key"),
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .expect("chmod");
    // Reloaded, for the settings to take (TLS is among those a reload changes); the server
    // has them once a connection in clear is refused.
    let plain = format!("postgres://airlock@127.0.0.1:{port}/postgres");
    let (client, connection) = tokio_postgres::connect(&plain, tokio_postgres::NoTls)
        .await
        .expect("connects in clear before the reload");
    let driver = tokio::spawn(connection);
    client
        .batch_execute("CREATE ROLE keyed LOGIN PASSWORD 'the-right-one'; SELECT pg_reload_conf()")
        .await
        .expect("reload");
    drop(client);
    let _ = driver.await;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while tokio_postgres::connect(&plain, tokio_postgres::NoTls)
        .await
        .is_ok()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the server still takes connections in clear"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    server
}

impl Server {
    fn url(&self, host: &str, query: &str) -> String {
        format!("postgres://airlock@{host}:{}/postgres?{query}", self.port)
    }
}

async fn refused(url: &str) -> String {
    match PostgresStore::connect(url, LEASE).await {
        Ok(_) => panic!("{url} was opened"),
        Err(error) => error.to_string(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_speaks_tls_as_sslmode_asks_and_checks_what_it_is_told_to() {
    let (ca_pem, issuer) = ca();
    let (other_pem, _) = ca();
    let server = server(&issuer).await;
    let files = tempfile::tempdir().expect("dir");
    let ca_file = files.path().join("ca.pem");
    let other_file = files.path().join("other.pem");
    std::fs::write(&ca_file, ca_pem).expect("write");
    std::fs::write(&other_file, other_pem).expect("write");
    let (ca, other) = (ca_file.display(), other_file.display());

    // The server takes nothing in clear, in its own words.
    let said = refused(&server.url("localhost", "sslmode=disable")).await;
    assert!(said.contains("no pg_hba.conf entry"), "{said}");
    assert!(said.contains("no encryption"), "{said}");

    // A wrong password, in the server's words and without the password.
    let said = refused(&format!(
        "postgres://keyed:hunter2-wrong@localhost:{}/postgres?sslmode=verify-full&sslrootcert={ca}",
        server.port
    ))
    .await;
    assert!(
        said.contains("password authentication failed for user \"keyed\""),
        "{said}"
    );
    assert!(!said.contains("hunter2"), "{said}");

    // Checked all the way, and each check that fails says which.
    for (host, query) in [
        ("localhost", format!("sslmode=verify-full&sslrootcert={ca}")),
        ("127.0.0.1", format!("sslmode=verify-ca&sslrootcert={ca}")),
        ("127.0.0.1", "sslmode=require".to_owned()),
        ("127.0.0.1", String::new()),
    ] {
        let url = server.url(host, &query);
        let store = PostgresStore::connect(&url, LEASE)
            .await
            .unwrap_or_else(|err| panic!("{url}: {err}"));
        drop(store);
    }
    let said = refused(&server.url(
        "127.0.0.1",
        &format!("sslmode=verify-full&sslrootcert={ca}"),
    ))
    .await;
    assert!(said.contains("not valid for name"), "{said}");
    let said = refused(&server.url(
        "localhost",
        &format!("sslmode=verify-full&sslrootcert={other}"),
    ))
    .await;
    // (Both CAs bear rcgen's default name: the chain is found and its signature is wrong.)
    assert!(said.contains("invalid peer certificate"), "{said}");
}
