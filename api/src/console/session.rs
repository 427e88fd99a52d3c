//! Who is looking at the console. With `[server] auth = "sigv4"` a person
//! logs in once with an access key id and its secret (checked against
//! `[server.access_keys]`) and gets a signed, expiring, HttpOnly cookie:
//! `KEY.EXPIRY.HMAC(key's secret, "console|KEY|EXPIRY")`, so removing the key
//! from the configuration ends its sessions. A key limited to some stacks
//! sees only those. Every action form carries a CSRF token bound to the
//! session (and the cookie is SameSite=Strict). Logging out revokes the
//! cookie in the state (`Audit::revoke_session`), so a copy of it stops
//! working on every engine at once. With `auth = "none"` the
//! console opens directly; actions still need the token, signed with a
//! secret derived from the state's shared secret, so that a form served by
//! one engine is accepted by any other behind the same balancer. Logging
//! out clears the cookie.

use std::time::{SystemTime, UNIX_EPOCH};

use axum::http::HeaderMap;
use cairn_core::config::{ServerAuth, ServerConfig};
use cairn_sdk::custom_resource::hmac_hex;

pub const COOKIE: &str = "cairn_console";
/// How long a login lasts.
pub const LIFETIME_SECONDS: u64 = 8 * 3600;

/// The person's access.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Viewer {
    /// `auth = "none"`: everything, for anyone who reaches the server.
    Open,
    /// Logged in with this access key, until `expiry` (Unix seconds);
    /// `session` is the cookie's signature, what logging out revokes on
    /// every engine of the state.
    Key {
        key: String,
        expiry: u64,
        session: String,
    },
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Compares without stopping at the first difference.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// The secret `auth = "none"` CSRF tokens are signed with, derived from
/// the secret every engine on the state shares (`Store::callback_secret`),
/// so that engines behind one balancer accept each other's forms.
pub fn open_secret(shared: &[u8]) -> Vec<u8> {
    hmac_hex(shared, b"cairn console csrf").into_bytes()
}

/// The `Set-Cookie` value that ends a login.
pub fn logout_cookie() -> String {
    format!("{COOKIE}=; Path=/console; HttpOnly; SameSite=Strict; Max-Age=0")
}

/// The cookie's value for `key` (whose secret is `secret`) until `expiry`.
pub fn token(key: &str, secret: &str, expiry: u64) -> String {
    let mac = hmac_hex(
        secret.as_bytes(),
        format!("console|{key}|{expiry}").as_bytes(),
    );
    format!("{key}.{expiry}.{mac}")
}

/// A login attempt: the key's cookie value, or why not.
pub fn login(server: &ServerConfig, key: &str, secret: &str) -> Result<String, &'static str> {
    match server.access_keys.get(key) {
        Some(k) if same(&k.secret, secret) => Ok(token(key, &k.secret, now() + LIFETIME_SECONDS)),
        _ => Err("The access key id or secret is not valid."),
    }
}

/// The viewer of a request, or `None` when it must log in.
pub fn viewer(server: &ServerConfig, headers: &HeaderMap) -> Option<Viewer> {
    if server.auth == ServerAuth::None {
        return Some(Viewer::Open);
    }
    let value = headers
        .get_all(axum::http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|c| c.trim().strip_prefix(&format!("{COOKIE}=")))?;
    let mut parts = value.rsplitn(3, '.');
    let (mac, expiry, key) = (parts.next()?, parts.next()?, parts.next()?);
    let expiry: u64 = expiry.parse().ok()?;
    let secret = &server.access_keys.get(key)?.secret;
    let want = token(key, secret, expiry);
    let got = format!("{key}.{expiry}.{mac}");
    (expiry > now() && same(&want, &got)).then(|| Viewer::Key {
        key: key.to_string(),
        expiry,
        session: mac.to_string(),
    })
}

/// The CSRF token every action form of this viewer carries; `open` signs
/// it for `auth = "none"` (see [`open_secret`]).
pub fn csrf(server: &ServerConfig, open: &[u8], viewer: &Viewer) -> String {
    match viewer {
        Viewer::Open => hmac_hex(open, b"console-csrf"),
        Viewer::Key { key, expiry, .. } => {
            let secret = server
                .access_keys
                .get(key)
                .map(|k| k.secret.as_str())
                .unwrap_or_default();
            hmac_hex(
                secret.as_bytes(),
                format!("console-csrf|{key}|{expiry}").as_bytes(),
            )
        }
    }
}

/// Whether `given` is this viewer's CSRF token.
pub fn csrf_ok(server: &ServerConfig, open: &[u8], viewer: &Viewer, given: &str) -> bool {
    same(&csrf(server, open, viewer), given)
}

/// Whether the viewer may see stack `name`.
pub fn may_see(server: &ServerConfig, viewer: &Viewer, name: &str) -> bool {
    match viewer {
        Viewer::Open => true,
        Viewer::Key { key, .. } => server
            .access_keys
            .get(key)
            .and_then(|k| k.stacks.as_ref())
            .is_none_or(|allowed| allowed.iter().any(|a| a == name)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_core::config::AccessKey;

    fn server() -> ServerConfig {
        let mut s = ServerConfig {
            auth: ServerAuth::Sigv4,
            ..Default::default()
        };
        s.access_keys.insert(
            "AKID".into(),
            AccessKey {
                secret: "s3cret".into(),
                name: None,
                stacks: Some(vec!["mine".into()]),
            },
        );
        s
    }

    fn with_cookie(value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            axum::http::header::COOKIE,
            format!("other=1; {COOKIE}={value}").parse().unwrap(),
        );
        h
    }

    #[test]
    fn open_csrf_tokens_are_the_same_on_every_engine_of_a_state() {
        let s = server();
        let one = open_secret(b"the state's shared secret");
        let other = open_secret(b"the state's shared secret");
        let elsewhere = open_secret(b"another state's secret");
        let token = csrf(&s, &one, &Viewer::Open);
        assert!(csrf_ok(&s, &other, &Viewer::Open, &token));
        assert!(!csrf_ok(&s, &elsewhere, &Viewer::Open, &token));
    }

    #[test]
    fn a_login_cookie_is_accepted_until_it_expires_or_is_forged() {
        let s = server();
        assert!(login(&s, "AKID", "wrong").is_err());
        let cookie = login(&s, "AKID", "s3cret").unwrap();
        let v = viewer(&s, &with_cookie(&cookie)).unwrap();
        assert!(matches!(&v, Viewer::Key { key, .. } if key == "AKID"));
        assert!(may_see(&s, &v, "mine") && !may_see(&s, &v, "theirs"));
        assert!(csrf_ok(&s, b"", &v, &csrf(&s, b"", &v)) && !csrf_ok(&s, b"", &v, "x"));
        assert_eq!(viewer(&s, &with_cookie(&token("AKID", "s3cret", 1))), None);
        assert_eq!(
            viewer(&s, &with_cookie(&token("AKID", "guess", now() + 60))),
            None
        );
        assert_eq!(viewer(&s, &HeaderMap::new()), None);
    }
}
