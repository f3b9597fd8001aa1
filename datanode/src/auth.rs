//! Logins: every client of the session port proves a user and password, checked by the
//! ConfigNode (which holds the users, their argon2 hashes and the lockout) and remembered here
//! for `dn_login_cache_ms`.
//!
//! - IoTDB's Thrift clients log in once per connection (`openSession`); the connection is the
//!   session.
//! - gRPC sessions are stateless (a session retries on any DataNode), so every call carries the
//!   user and password in its metadata ([`USER_KEY`], [`PASSWORD_KEY`]) and [`Authenticated`]
//!   checks them before the call runs: 801 or 822 as `UNAUTHENTICATED` with the code first in the
//!   message, 802 when they are missing.
//!
//! The cache holds, per user, a keyed digest of the last password the ConfigNode accepted (the
//! key is random per process; no password is kept) and when. For a gRPC call a fresh entry
//! answers without the ConfigNode, so a call costs a map lookup. Every heartbeat carries a
//! fingerprint of the users and their hashes; when it changes (a user created, dropped or given a
//! new password) the DataNode forgets every digest, so a changed password stops working within a
//! heartbeat (the DataNode that ran the statement forgets the user at once). A DataNode cut off
//! from the ConfigNode gets no heartbeat and keeps its digests: it serves the users it checked
//! within `dn_login_cache_ms`. An IoTDB client's login (once per connection) always asks the
//! ConfigNode. Either answers from a fresh entry when the ConfigNode cannot be reached; otherwise
//! that is 712 with `need_retry`.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::hash::BuildHasher;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use common::StatusCode;
use parking_lot::Mutex;
use proto::{PASSWORD_KEY, USER_KEY};
use tonic::codegen::http::{Request, Response};
use tonic::codegen::Service;
use tonic::server::NamedService;

use crate::node::Shared;

/// Users whose last accepted password a DataNode remembers; past it the oldest is forgotten.
const CACHED_USERS_MAX: usize = 10_000;

/// The logged-in user of a gRPC call, put in its extensions by [`Authenticated`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User(pub String);

/// Passwords the ConfigNode accepted lately, by user.
pub(crate) struct Logins {
    digests: Mutex<HashMap<String, (u64, Instant)>>,
    /// The users' fingerprint the last heartbeat carried; a change forgets every digest.
    users_fingerprint: Mutex<Option<u64>>,
    key: std::collections::hash_map::RandomState,
    fresh_for: Duration,
}

impl Logins {
    pub(crate) fn new(fresh_for: Duration) -> Logins {
        Logins {
            digests: Mutex::new(HashMap::new()),
            users_fingerprint: Mutex::new(None),
            key: std::collections::hash_map::RandomState::new(),
            fresh_for,
        }
    }

    fn digest(&self, user: &str, password: &str) -> u64 {
        self.key.hash_one((user, password))
    }

    /// True when the ConfigNode accepted exactly this password for `user` within the window.
    fn fresh(&self, user: &str, password: &str) -> bool {
        let digest = self.digest(user, password);
        self.digests
            .lock()
            .get(user)
            .is_some_and(|(d, at)| *d == digest && at.elapsed() < self.fresh_for)
    }

    fn remember(&self, user: &str, password: &str) {
        let digest = self.digest(user, password);
        let mut digests = self.digests.lock();
        if digests.len() >= CACHED_USERS_MAX && !digests.contains_key(user) {
            let oldest = digests
                .iter()
                .min_by_key(|(_, (_, at))| *at)
                .map(|(u, _)| u.clone());
            if let Some(oldest) = oldest {
                digests.remove(&oldest);
            }
        }
        digests.insert(user.to_string(), (digest, Instant::now()));
    }

    fn forget(&self, user: &str) {
        self.digests.lock().remove(user);
    }

    /// A heartbeat's users fingerprint: when it differs from the last one seen (a user was
    /// created, dropped or given a new password, or another ConfigNode leads), every remembered
    /// password is forgotten, so a changed one stops working within a heartbeat.
    pub(crate) fn users_changed_to(&self, fingerprint: u64) {
        let mut last = self.users_fingerprint.lock();
        if *last != Some(fingerprint) {
            if last.is_some() {
                self.digests.lock().clear();
            }
            *last = Some(fingerprint);
        }
    }
}

/// How a login uses the cache of accepted passwords.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Check {
    /// A fresh cache entry answers (gRPC calls, each of which carries the credentials).
    Cached,
    /// Ask the ConfigNode; the cache answers only when it cannot be asked (IoTDB clients' logins,
    /// once per connection: a changed password takes effect at once).
    ConfigNodeFirst,
}

/// Checks `user`'s `password`: 200, 801 (wrong user or password), 822 (locked), or 712 with
/// `need_retry` when the ConfigNode cannot be asked and the cache does not know the password.
pub(crate) async fn login(
    shared: &Arc<Shared>,
    user: &str,
    password: &str,
    check: Check,
) -> proto::Status {
    if check == Check::Cached && shared.clients.logins.fresh(user, password) {
        return crate::convert::ok();
    }
    let req = proto::AuthenticateReq {
        username: user.to_string(),
        password: password.to_string(),
    };
    let answer = shared
        .confignode
        .call(None, |mut c| {
            let req = req.clone();
            async move { c.authenticate(req).await }
        })
        .await;
    match answer {
        Ok(status) if status.is(StatusCode::Success) => {
            shared.clients.logins.remember(user, password);
            status
        }
        Ok(status) => {
            shared.clients.logins.forget(user);
            status
        }
        Err(_) if shared.clients.logins.fresh(user, password) => crate::convert::ok(),
        Err(unreachable) => unreachable,
    }
}

/// Forgets what the cache knows of `user` (after a user statement through this DataNode).
pub(crate) fn forget(shared: &Shared, user: &str) {
    shared.clients.logins.forget(user);
}

/// The session service behind the login check of every call.
#[derive(Clone)]
pub(crate) struct Authenticated<S> {
    inner: S,
    shared: Arc<Shared>,
}

impl<S> Authenticated<S> {
    pub(crate) fn new(inner: S, shared: Arc<Shared>) -> Authenticated<S> {
        Authenticated { inner, shared }
    }
}

impl<S: NamedService> NamedService for Authenticated<S> {
    const NAME: &'static str = S::NAME;
}

/// The value of the binary metadata `key` as text.
fn credential(metadata: &tonic::metadata::MetadataMap, key: &str) -> Option<String> {
    let bytes = metadata.get_bin(key)?.to_bytes().ok()?;
    String::from_utf8(bytes.to_vec()).ok()
}

/// A refused call: `UNAUTHENTICATED` with the IoTDB code first in the message.
fn refused(status: &proto::Status) -> Response<tonic::body::Body> {
    tonic::Status::unauthenticated(format!("{}: {}", status.code, status.message)).into_http()
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, B> Service<Request<B>> for Authenticated<S>
where
    S: Service<Request<B>, Response = Response<tonic::body::Body>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    B: Send + 'static,
{
    type Response = Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<B>) -> Self::Future {
        // The clone was not polled ready; the ready one serves this call (tower's rule).
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let shared = self.shared.clone();
        Box::pin(async move {
            // The headers are lent to a metadata view and given back: no copy per call.
            let metadata =
                tonic::metadata::MetadataMap::from_headers(std::mem::take(request.headers_mut()));
            let credentials = (
                credential(&metadata, USER_KEY),
                credential(&metadata, PASSWORD_KEY),
            );
            *request.headers_mut() = metadata.into_headers();
            let (Some(user), Some(password)) = credentials else {
                return Ok(refused(&crate::convert::status(
                    StatusCode::NotLogin,
                    "log in first: every call carries the user and password \
                     (fencepost-user-bin, fencepost-password-bin)",
                )));
            };
            let status = login(&shared, &user, &password, Check::Cached).await;
            if !status.is(StatusCode::Success) {
                return Ok(refused(&status));
            }
            request.extensions_mut().insert(User(user));
            inner.call(request).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembered_passwords_match_exactly_expire_and_go_when_the_users_change() {
        let logins = Logins::new(Duration::from_secs(60));
        logins.users_changed_to(1);
        logins.remember("ops", "pw-1");
        assert!(logins.fresh("ops", "pw-1"));
        assert!(!logins.fresh("ops", "pw-2"));
        assert!(!logins.fresh("root", "pw-1"));
        // The same fingerprint again changes nothing; another forgets every password.
        logins.users_changed_to(1);
        assert!(logins.fresh("ops", "pw-1"));
        logins.users_changed_to(2);
        assert!(!logins.fresh("ops", "pw-1"));
        // A window of nothing remembers nothing.
        let forgetful = Logins::new(Duration::ZERO);
        forgetful.remember("ops", "pw-1");
        assert!(!forgetful.fresh("ops", "pw-1"));
    }
}
