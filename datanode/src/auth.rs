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

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use common::{Status, StatusCode};
use proto::{PASSWORD_KEY, USER_KEY};
use tonic::codegen::http::{Request, Response};
use tonic::codegen::Service;
use tonic::server::NamedService;

use crate::parts::Shared;

/// The logged-in user of a gRPC call, put in its extensions by [`Authenticated`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User(pub String);

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
) -> Status {
    if check == Check::Cached && shared.clients.logins.fresh(user, password) {
        return Status::ok();
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
    match answer.map(Status::from) {
        Ok(status) if status.is_ok() => {
            shared.clients.logins.remember(user, password);
            status
        }
        Ok(status) => {
            shared.clients.logins.forget(user);
            status
        }
        Err(_) if shared.clients.logins.fresh(user, password) => Status::ok(),
        Err(unreachable) => unreachable.status(),
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
fn refused(status: &Status) -> Response<tonic::body::Body> {
    tonic::Status::unauthenticated(format!("{}: {}", status.code.wire(), status.message))
        .into_http()
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
                return Ok(refused(&Status::new(
                    StatusCode::NotLogin,
                    "log in first: every call carries the user and password \
                     (fencepost-user-bin, fencepost-password-bin)",
                )));
            };
            let status = login(&shared, &user, &password, Check::Cached).await;
            if !status.is_ok() {
                return Ok(refused(&status));
            }
            request.extensions_mut().insert(User(user));
            inner.call(request).await
        })
    }
}
