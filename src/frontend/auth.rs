//! Who may connect, and over what: password authentication (SCRAM-SHA-256, or md5 for old
//! clients) from `weir serve --auth-file` or `--password`, roles, and TLS (`--tls-cert`,
//! `--tls-key`).
//!
//! Without users every connection is trusted, as Postgres's `trust` (the default only a
//! loopback address should keep: `weir serve` warns loudly when it listens elsewhere without
//! them). With users, a client must give a listed user's password: checked with SCRAM-SHA-256
//! (RFC 7677, pgwire's implementation; the server never sees the password) or, with
//! `--auth-method md5`, Postgres's md5 challenge. A wrong password or an unknown user is
//! refused alike, FATAL 28P01 "password authentication failed for user", and the connection
//! closed.
//!
//! # The auth file
//! One user per line, `name:password[:role]`, `role` being `full` (the default: everything) or
//! `read-only` (SELECT, SUBSCRIBE, SHOW, EXPLAIN, cursors, COPY TO; writes fail with 42501).
//! Blank lines and lines starting with `#` are skipped. Keep it readable by the server's user
//! only: it holds passwords.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use pgwire::api::auth::md5pass::hash_md5_password;
use pgwire::api::auth::sasl::scram::gen_salted_password;
use pgwire::api::auth::{AuthSource, LoginInfo, Password};
use pgwire::error::{PgWireError, PgWireResult};

/// PBKDF2 iterations of SCRAM-SHA-256 (Postgres's default, the RFC's least).
pub const SCRAM_ITERATIONS: usize = 4096;

/// What a user may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Everything.
    Full,
    /// Reads only: SELECT, SUBSCRIBE, SHOW, EXPLAIN, cursors, `COPY ... TO`.
    ReadOnly,
}

/// How passwords are checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthMethod {
    ScramSha256,
    Md5,
}

/// The users a server accepts.
pub struct Users {
    users: HashMap<String, User>,
    method: AuthMethod,
}

struct User {
    password: String,
    role: Role,
    /// SCRAM's salt and salted password (RFC 5802's SaltedPassword), made once at start.
    salt: Vec<u8>,
    salted: Vec<u8>,
}

impl std::fmt::Debug for Users {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Users({} users, {:?})", self.users.len(), self.method)
    }
}

impl Users {
    /// The users of auth file `path` (see the module docs).
    ///
    /// # Errors
    /// The file cannot be read; a line that is not `name:password[:role]` (its number), an
    /// unknown role, a user listed twice, no user at all.
    pub fn from_file(path: &Path, method: AuthMethod) -> Result<Self, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read auth file {}: {e}", path.display()))?;
        let mut entries = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let bad = |why: &str| format!("auth file {} line {}: {why}; expected name:password[:full|read-only]", path.display(), n + 1);
            let mut parts = line.splitn(3, ':');
            let name = parts.next().unwrap_or_default();
            let password = parts.next().ok_or_else(|| bad("no password"))?;
            let role = match parts.next().map(str::trim) {
                None | Some("full") => Role::Full,
                Some("read-only" | "readonly") => Role::ReadOnly,
                Some(other) => return Err(bad(&format!("unknown role '{other}'"))),
            };
            if name.is_empty() || password.is_empty() {
                return Err(bad("empty name or password"));
            }
            entries.push((name.to_string(), password.to_string(), role));
        }
        Self::new(entries, method).map_err(|e| format!("auth file {}: {e}", path.display()))
    }

    /// One full user `name` with `password` (`weir serve --password`).
    pub fn single(name: &str, password: &str, method: AuthMethod) -> Self {
        Self::new(vec![(name.to_string(), password.to_string(), Role::Full)], method).expect("one user")
    }

    fn new(entries: Vec<(String, String, Role)>, method: AuthMethod) -> Result<Self, String> {
        if entries.is_empty() {
            return Err("no users".into());
        }
        let mut users = HashMap::new();
        for (name, password, role) in entries {
            let salt = random_bytes(16);
            let salted = gen_salted_password(&password, &salt, SCRAM_ITERATIONS);
            if users.insert(name.clone(), User { password, role, salt, salted }).is_some() {
                return Err(format!("user {name} is listed twice"));
            }
        }
        Ok(Self { users, method })
    }

    /// How passwords are checked.
    pub fn method(&self) -> AuthMethod {
        self.method
    }

    /// The role of user `name`; `None` for a user not listed.
    pub fn role_of(&self, name: &str) -> Option<Role> {
        self.users.get(name).map(|u| u.role)
    }
}

/// [`Users`] as pgwire's password source.
#[derive(Debug)]
pub struct UsersSource(pub Arc<Users>);

#[async_trait]
impl AuthSource for UsersSource {
    /// SCRAM: the user's salt and salted password; md5: the expected response to a fresh salt.
    /// An unknown user gets a random one, so it fails at the proof exactly as a wrong password
    /// does (nothing tells which names exist).
    async fn get_password(&self, login: &LoginInfo) -> PgWireResult<Password> {
        let name = login.user().ok_or(PgWireError::UserNameRequired)?;
        let user = self.0.users.get(name);
        Ok(match self.0.method {
            AuthMethod::ScramSha256 => match user {
                Some(u) => Password::new(Some(u.salt.clone()), u.salted.clone()),
                None => Password::new(Some(random_bytes(16)), random_bytes(32)),
            },
            AuthMethod::Md5 => {
                let salt = random_bytes(4);
                let expected = match user {
                    Some(u) => hash_md5_password(name, &u.password, &salt),
                    None => hash_md5_password(name, &hex(&random_bytes(16)), &salt),
                };
                Password::new(Some(salt), expected.into_bytes())
            }
        })
    }
}

/// `n` random bytes (the OS's generator, through the standard library's hasher seeds, mixed
/// with the clock: no cryptographic library is needed for salts).
fn random_bytes(n: usize) -> Vec<u8> {
    use std::hash::{BuildHasher, Hasher};
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
        h.write_usize(out.len());
        out.extend_from_slice(&h.finish().to_le_bytes());
    }
    out.truncate(n);
    out
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The TLS acceptor of a certificate chain and private key in PEM files (`sslmode=require`
/// and stronger; the crypto is rustls with ring).
///
/// # Errors
/// A file that cannot be read, holds no certificate or key, or a key that does not fit.
pub fn tls_acceptor(cert: &Path, key: &Path) -> Result<pgwire::tokio::TlsAcceptor, String> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| format!("cannot read TLS certificate {}: {e}", cert.display()))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("TLS certificate {}: {e}", cert.display()))?;
    if certs.is_empty() {
        return Err(format!("TLS certificate {} holds no certificate", cert.display()));
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| format!("TLS key {}: {e}", key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| format!("TLS certificate and key: {e}"))?;
    Ok(pgwire::tokio::TlsAcceptor::from(Arc::new(config)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auth_files_list_users_with_roles() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("users");
        std::fs::write(&path, "# Weir users\nalice:s3cret\n\nbob:pw:with:colons\ncarol:x:read-only\n").expect("write");
        let err = Users::from_file(&path, AuthMethod::ScramSha256).expect_err("bob's role");
        assert!(err.contains("line 4: unknown role 'with:colons'"), "{err}");
        std::fs::write(&path, "alice:s3cret\ncarol:x:read-only\ndan:y:full\n").expect("write");
        let users = Users::from_file(&path, AuthMethod::ScramSha256).expect("users");
        assert_eq!(users.role_of("alice"), Some(Role::Full));
        assert_eq!(users.role_of("carol"), Some(Role::ReadOnly));
        assert_eq!(users.role_of("dan"), Some(Role::Full));
        assert_eq!(users.role_of("eve"), None);
        std::fs::write(&path, "alice\n").expect("write");
        assert!(Users::from_file(&path, AuthMethod::Md5).expect_err("no password").contains("line 1: no password"));
        std::fs::write(&path, "a:1\na:2\n").expect("write");
        assert!(Users::from_file(&path, AuthMethod::Md5).expect_err("twice").contains("listed twice"));
    }

    #[test]
    fn salts_differ() {
        assert_ne!(random_bytes(16), random_bytes(16));
        assert_eq!(random_bytes(5).len(), 5);
    }
}
