//! Users and passwords: the rules for user names and passwords, Argon2id hashing and
//! verification, and the leader's count of failed logins that locks a user out for a while.
//!
//! Architecture invariant: a password is hashed on the leader before its command is proposed,
//! so the raft log and the replicated state hold only PHC strings (Argon2id with a random salt
//! per hash) and apply stays deterministic and cheap. Hashing and verifying cost tens of ms of
//! one core and 19 MiB each: they run on tokio's blocking threads, at most
//! [`PASSWORD_HASHES_CONCURRENT_MAX`] at once (the others wait, bounded by the request limit).
//!
//! Architecture invariant: the failed-login counts and locks are the leader's volatile state,
//! never replicated. A new leader, or a new term of the same node, starts counting from zero,
//! so a ConfigNode leader change ends every lock early. The count is bounded
//! ([`LOGIN_TRACKED_USERS_MAX`] names), since anyone can send any name.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, OnceLock};

use argon2::password_hash::rand_core::{OsRng, RngCore};
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, Salt, SaltString};
use argon2::Argon2;
use consensus::Clock;
use parking_lot::Mutex;

/// The user that always exists, alone manages other users, and can never be dropped.
pub const ROOT_USER: &str = "root";
/// root's password until `ALTER USER root SET PASSWORD` stores a hash for it. Not hashed in the
/// initial state: a salted hash would differ between ConfigNodes, which must start alike.
pub const ROOT_INITIAL_PASSWORD: &str = "root";
/// Longest user name, in characters (all ASCII: `[A-Za-z0-9_]`).
pub const USERNAME_CHARS_MAX: usize = 64;
/// Shortest password, in bytes.
pub const PASSWORD_BYTES_MIN: usize = 4;
/// Longest password, in bytes.
pub const PASSWORD_BYTES_MAX: usize = 64;
/// Longest stored password hash (a PHC string; Argon2id's default one is about 100 bytes).
pub const PASSWORD_HASH_BYTES_MAX: usize = 256;
/// What every stored hash starts with: apply refuses anything else, so a verification never
/// runs with parameters other than the ones this module hashes with.
pub const PASSWORD_HASH_PREFIX: &str = "$argon2id$";
/// Most users, root included.
pub const USERS_MAX: usize = 10_000;
/// Most user names whose failed logins the leader tracks at once; past it the least useful
/// record is forgotten (see [`LoginLimiter`]).
pub const LOGIN_TRACKED_USERS_MAX: usize = 10_000;
/// Password hashes or verifications running at once (19 MiB and one core each).
pub const PASSWORD_HASHES_CONCURRENT_MAX: usize = 4;
/// The answer to every failed login, whether the user is unknown or the password wrong, so that
/// a caller cannot tell which.
pub const AUTHENTICATION_FAILED: &str = "Authentication failed.";

/// `name` cut to [`USERNAME_CHARS_MAX`] characters for a message: a request may carry megabytes.
fn shown(name: &str) -> String {
    match name.char_indices().nth(USERNAME_CHARS_MAX) {
        Some((end, _)) => format!("{}...", &name[..end]),
        None => name.to_string(),
    }
}

/// Checks a user name: 1 to [`USERNAME_CHARS_MAX`] characters of `[A-Za-z0-9_]`.
pub fn check_username(username: &str) -> Result<(), String> {
    let legal = (1..=USERNAME_CHARS_MAX).contains(&username.len())
        && username
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if legal {
        Ok(())
    } else {
        Err(format!(
            "illegal user name {:?}: a user name is 1 to {USERNAME_CHARS_MAX} characters of \
             A-Z, a-z, 0-9 and _",
            shown(username)
        ))
    }
}

/// Checks a new password: [`PASSWORD_BYTES_MIN`] to [`PASSWORD_BYTES_MAX`] bytes, not only
/// whitespace. The message never repeats the password.
pub fn check_password(password: &str) -> Result<(), String> {
    if !(PASSWORD_BYTES_MIN..=PASSWORD_BYTES_MAX).contains(&password.len()) {
        return Err(format!(
            "illegal password: a password is {PASSWORD_BYTES_MIN} to {PASSWORD_BYTES_MAX} bytes, \
             this one is {}",
            password.len()
        ));
    }
    if password.trim().is_empty() {
        return Err("illegal password: a password must not be only whitespace".into());
    }
    Ok(())
}

/// Checks a hash that a command carries: one this module made (see [`PASSWORD_HASH_PREFIX`]).
pub fn check_password_hash(password_hash: &str) -> Result<(), String> {
    if password_hash.len() > PASSWORD_HASH_BYTES_MAX
        || !password_hash.starts_with(PASSWORD_HASH_PREFIX)
    {
        return Err(format!(
            "illegal password hash: not an Argon2id PHC string of at most \
             {PASSWORD_HASH_BYTES_MAX} bytes"
        ));
    }
    Ok(())
}

/// What a user's password is checked against.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoredPassword {
    /// root before its password was ever set: the password is [`ROOT_INITIAL_PASSWORD`].
    RootInitial,
    /// An Argon2id PHC string.
    Hash(String),
}

/// Hashes `password` with Argon2id's default parameters and a fresh 16-byte salt from the OS;
/// the PHC string. Slow: call it on a blocking thread.
///
/// The salt is drawn with `try_fill_bytes` rather than `SaltString::generate`, which panics when
/// the OS random source fails: that failure is reported, not a crash.
pub fn hash_password(password: &str) -> Result<String, String> {
    let mut salt = [0u8; Salt::RECOMMENDED_LENGTH];
    OsRng
        .try_fill_bytes(&mut salt)
        .map_err(|e| format!("the OS random source failed: {e}"))?;
    let salt = SaltString::encode_b64(&salt).map_err(|e| format!("encoding a salt: {e}"))?;
    let hash = Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map_err(|e| format!("hashing a password: {e}"))?
        .to_string();
    assert!(
        check_password_hash(&hash).is_ok(),
        "Argon2id produced {} bytes not starting with {PASSWORD_HASH_PREFIX}",
        hash.len()
    );
    Ok(hash)
}

/// Whether `password` matches `stored`; `None` (no such user) never matches, after the same
/// work as a real verification so that the time taken does not tell whether the user exists.
/// Slow: call it on a blocking thread.
pub fn verify_password(password: &str, stored: Option<&StoredPassword>) -> bool {
    static UNKNOWN_USER_HASH: OnceLock<Option<String>> = OnceLock::new();
    let phc = match stored {
        Some(StoredPassword::RootInitial) => return password == ROOT_INITIAL_PASSWORD,
        Some(StoredPassword::Hash(phc)) => phc.as_str(),
        None => {
            let dummy = UNKNOWN_USER_HASH.get_or_init(|| hash_password("no such user").ok());
            if let Some(parsed) = dummy.as_deref().and_then(|d| PasswordHash::new(d).ok()) {
                // Run only for the time it takes: the answer is false whatever it says.
                std::hint::black_box(
                    Argon2::default()
                        .verify_password(password.as_bytes(), &parsed)
                        .is_ok(),
                );
            }
            return false;
        }
    };
    match PasswordHash::new(phc) {
        Ok(parsed) => Argon2::default()
            .verify_password(password.as_bytes(), &parsed)
            .is_ok(),
        Err(e) => {
            // Apply admits only hashes this module made; one that does not parse is damage.
            tracing::error!("a stored password hash does not parse: {e}");
            false
        }
    }
}

/// The lockout settings (`login_failures_max`, `login_failure_window_ms`, `login_lock_ms`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoginLimits {
    /// Failed logins of one user name within the window that lock it.
    pub failures_max: u32,
    /// The window, in ms.
    pub failure_window_ms: u64,
    /// How long a lock lasts, in ms.
    pub lock_ms: u64,
}

/// One user name's recent failures, or its lock.
#[derive(Clone, Debug, Default)]
struct LoginRecord {
    /// Times of the failures within the window, oldest first; fewer than `failures_max`.
    failures_ms: VecDeque<u64>,
    /// Locked until then (exclusive).
    locked_until_ms: Option<u64>,
}

impl LoginRecord {
    fn locked_at(&self, now_ms: u64) -> bool {
        self.locked_until_ms.is_some_and(|until| now_ms < until)
    }

    /// Neither locked nor holding a failure inside the window: forgetting it changes nothing.
    fn is_idle(&self, now_ms: u64, window_ms: u64) -> bool {
        !self.locked_at(now_ms)
            && self
                .failures_ms
                .back()
                .is_none_or(|last| last.saturating_add(window_ms) <= now_ms)
    }
}

/// The leader's count of failed logins per user name: after `failures_max` failures within
/// `failure_window_ms` (a sliding window) the name is locked for `lock_ms`, and every login of
/// it is refused, right password or not, until the lock ends; a success forgets the name's
/// failures. Names of unknown users count alike, so that a lock tells nothing about existence.
///
/// Time is an input (`now_ms`, never decreasing). Bounded: at most `tracked_max` names; a new
/// name past it first forgets every idle record (no lock, no failure in the window), then the
/// unlocked record with the oldest last failure, and only when every record is a lock the one
/// that ends first: flooding the map with new names cannot lift a lock while unlocked records
/// remain to evict.
#[derive(Debug)]
pub struct LoginLimiter {
    limits: LoginLimits,
    tracked_max: usize,
    /// The leader term the records belong to.
    term: Option<u64>,
    records: HashMap<String, LoginRecord>,
}

impl LoginLimiter {
    /// An empty limiter tracking at most [`LOGIN_TRACKED_USERS_MAX`] names.
    pub fn new(limits: LoginLimits) -> LoginLimiter {
        LoginLimiter::with_tracked_max(limits, LOGIN_TRACKED_USERS_MAX)
    }

    /// An empty limiter tracking at most `tracked_max` (≥ 1) names.
    pub fn with_tracked_max(limits: LoginLimits, tracked_max: usize) -> LoginLimiter {
        assert!(limits.failures_max >= 1, "{limits:?}");
        assert!(tracked_max >= 1, "tracked_max {tracked_max}");
        LoginLimiter {
            limits,
            tracked_max,
            term: None,
            records: HashMap::new(),
        }
    }

    /// Counts for leader term `term` from now on: a term other than the last one forgets every
    /// failure and lock (they are not replicated; the new leader starts from zero).
    pub fn enter_term(&mut self, term: u64) {
        if self.term != Some(term) {
            self.records.clear();
            self.term = Some(term);
        }
    }

    /// `Err(remaining_ms)` while `username` is locked at `now_ms`.
    pub fn check(&mut self, username: &str, now_ms: u64) -> Result<(), u64> {
        match self.records.get(username) {
            Some(r) if r.locked_at(now_ms) => Err(r.locked_until_ms.expect("locked") - now_ms),
            Some(r) if r.locked_until_ms.is_some() => {
                // The lock ended: the name starts afresh.
                self.records.remove(username);
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Counts a failed login of `username` at `now_ms`; true when the name is locked now.
    pub fn record_failure(&mut self, username: &str, now_ms: u64) -> bool {
        if !self.records.contains_key(username) && self.records.len() >= self.tracked_max {
            self.make_room(now_ms);
        }
        let limits = self.limits;
        let record = self.records.entry(username.to_string()).or_default();
        if record.locked_at(now_ms) {
            // A verification that began before the lock fell; the lock stands as it is.
            return true;
        }
        if record.locked_until_ms.is_some() {
            *record = LoginRecord::default();
        }
        while record
            .failures_ms
            .front()
            .is_some_and(|t| t.saturating_add(limits.failure_window_ms) <= now_ms)
        {
            record.failures_ms.pop_front();
        }
        record.failures_ms.push_back(now_ms);
        if record.failures_ms.len() >= limits.failures_max as usize {
            record.failures_ms.clear();
            record.locked_until_ms = Some(now_ms.saturating_add(limits.lock_ms));
        }
        assert!(
            record.failures_ms.len() < limits.failures_max as usize,
            "{} failures kept of at most {}",
            record.failures_ms.len(),
            limits.failures_max
        );
        let locked = record.locked_until_ms.is_some();
        assert!(
            self.records.len() <= self.tracked_max,
            "{} names tracked of at most {}",
            self.records.len(),
            self.tracked_max
        );
        locked
    }

    /// A successful login of `username`: its failures are forgotten. (A locked name never gets
    /// here: [`LoginLimiter::check`] refuses it first.)
    pub fn record_success(&mut self, username: &str, now_ms: u64) {
        if self
            .records
            .get(username)
            .is_some_and(|r| !r.locked_at(now_ms))
        {
            self.records.remove(username);
        }
    }

    /// User names tracked now.
    pub fn tracked(&self) -> usize {
        self.records.len()
    }

    /// Frees at least one place (see the type's comment). A pass over the records, only when
    /// the map is full and a new name fails: cheap beside the hash every login costs.
    fn make_room(&mut self, now_ms: u64) {
        let window_ms = self.limits.failure_window_ms;
        self.records.retain(|_, r| !r.is_idle(now_ms, window_ms));
        if self.records.len() < self.tracked_max {
            return;
        }
        // Unlocked records first (oldest last failure), then locks (earliest end).
        let victim = self
            .records
            .iter()
            .min_by_key(|(name, r)| {
                let locked = r.locked_at(now_ms);
                let when = if locked {
                    r.locked_until_ms.expect("locked")
                } else {
                    r.failures_ms.back().copied().unwrap_or(0)
                };
                (locked, when, name.as_str())
            })
            .map(|(name, _)| name.clone())
            .expect("a full map has a record");
        self.records.remove(&victim);
    }
}

/// Why a login was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LoginError {
    /// Unknown user or wrong password (801).
    Failed,
    /// Too many failures: locked for `remaining_ms` more (822).
    Locked {
        /// Until the lock ends.
        remaining_ms: u64,
    },
    /// The verification could not run (305).
    Internal(String),
}

/// The leader's password work: Authenticate with its lockout, and hashing for the user
/// statements, both on blocking threads under one bound.
pub struct Authenticator {
    limiter: Mutex<LoginLimiter>,
    hashing: tokio::sync::Semaphore,
    clock: Arc<dyn Clock>,
}

impl Authenticator {
    /// Lockout by `limits`, time from `clock`.
    pub fn new(limits: LoginLimits, clock: Arc<dyn Clock>) -> Authenticator {
        Authenticator::with_limiter(LoginLimiter::new(limits), clock)
    }

    /// Over a given limiter (tests: a small map).
    pub fn with_limiter(limiter: LoginLimiter, clock: Arc<dyn Clock>) -> Authenticator {
        Authenticator {
            limiter: Mutex::new(limiter),
            hashing: tokio::sync::Semaphore::new(PASSWORD_HASHES_CONCURRENT_MAX),
            clock,
        }
    }

    /// Checks `username`'s `password`, as the leader of `term`; `stored` looks the user up (in
    /// the replicated state, after the lock check, so that a password changed meanwhile counts).
    ///
    /// A name that no user can have is refused at once and not tracked; a password longer than
    /// any password is a failure without hashing it. With concurrent logins of one name, at most
    /// [`PASSWORD_HASHES_CONCURRENT_MAX`] - 1 verifications beyond `failures_max` may be under
    /// way when the lock falls.
    pub async fn authenticate(
        &self,
        term: u64,
        username: &str,
        password: String,
        stored: impl FnOnce(&str) -> Option<StoredPassword>,
    ) -> Result<(), LoginError> {
        if check_username(username).is_err() {
            return Err(LoginError::Failed);
        }
        let _permit = self
            .hashing
            .acquire()
            .await
            .expect("the hashing semaphore is never closed");
        {
            let mut limiter = self.limiter.lock();
            limiter.enter_term(term);
            limiter
                .check(username, self.clock.now_ms())
                .map_err(|remaining_ms| LoginError::Locked { remaining_ms })?;
        }
        let stored = stored(username);
        let matched = if password.len() > PASSWORD_BYTES_MAX {
            false
        } else {
            tokio::task::spawn_blocking(move || verify_password(&password, stored.as_ref()))
                .await
                .map_err(|e| LoginError::Internal(format!("password verification: {e}")))?
        };
        let now_ms = self.clock.now_ms();
        let mut limiter = self.limiter.lock();
        limiter.enter_term(term);
        if matched {
            limiter.record_success(username, now_ms);
            Ok(())
        } else {
            if limiter.record_failure(username, now_ms) {
                tracing::warn!(
                    user = username,
                    "login locked after too many failed attempts"
                );
            }
            Err(LoginError::Failed)
        }
    }

    /// Hashes `password` (see [`hash_password`]) on a blocking thread.
    pub async fn hash(&self, password: String) -> Result<String, String> {
        let _permit = self
            .hashing
            .acquire()
            .await
            .expect("the hashing semaphore is never closed");
        tokio::task::spawn_blocking(move || hash_password(&password))
            .await
            .map_err(|e| format!("password hashing: {e}"))?
    }

    /// User names the lockout tracks now.
    pub fn tracked(&self) -> usize {
        self.limiter.lock().tracked()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use consensus::ManualClock;

    const LIMITS: LoginLimits = LoginLimits {
        failures_max: 3,
        failure_window_ms: 1000,
        lock_ms: 5000,
    };

    #[test]
    fn user_names_and_passwords_follow_the_rules() {
        for good in ["root", "a", "user_1", "A9_z", &"x".repeat(64)] {
            assert_eq!(check_username(good), Ok(()), "{good}");
        }
        for bad in ["", "a b", "a-b", "é", "a.b", "root;", &"x".repeat(65)] {
            let e = check_username(bad).unwrap_err();
            assert!(e.contains("illegal user name"), "{e}");
        }
        // A huge name is not echoed whole.
        let e = check_username(&"y".repeat(100_000)).unwrap_err();
        assert!(e.len() < 300, "{} bytes", e.len());

        for good in ["1234", "a b c", " pw ", &"p".repeat(64), "pässwörd"] {
            assert_eq!(check_password(good), Ok(()), "{good}");
        }
        for bad in ["", "abc", &"p".repeat(65)] {
            assert!(check_password(bad).unwrap_err().contains("4 to 64 bytes"));
        }
        for blank in ["    ", "\t\t\n ", &" ".repeat(64)] {
            assert!(check_password(blank).unwrap_err().contains("whitespace"));
        }
        // A message never repeats the password.
        assert!(!check_password("abc").unwrap_err().contains("abc"));
    }

    #[test]
    fn hashes_are_salted_argon2id_and_verify() {
        let a = hash_password("secret").unwrap();
        let b = hash_password("secret").unwrap();
        assert!(a.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"), "{a}");
        assert_ne!(a, b, "a fresh salt per hash");
        assert_eq!(check_password_hash(&a), Ok(()));
        let stored = StoredPassword::Hash(a);
        assert!(verify_password("secret", Some(&stored)));
        assert!(!verify_password("Secret", Some(&stored)));
        assert!(verify_password("root", Some(&StoredPassword::RootInitial)));
        assert!(!verify_password("roo", Some(&StoredPassword::RootInitial)));
        assert!(!verify_password("root", None));
        assert!(!verify_password(
            "x",
            Some(&StoredPassword::Hash("$bad".into()))
        ));
        for bad in [
            "",
            "$argon2i$v=19$x",
            "plain",
            &format!("$argon2id${}", "a".repeat(300)),
        ] {
            assert!(check_password_hash(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn failures_within_the_window_lock_until_the_lock_ends() {
        let mut l = LoginLimiter::new(LIMITS);
        l.enter_term(1);
        assert!(!l.record_failure("u", 0));
        assert!(!l.record_failure("u", 100));
        assert_eq!(l.check("u", 200), Ok(()));
        assert!(l.record_failure("u", 200), "the third failure locks");
        assert_eq!(l.check("u", 200), Err(5000));
        assert_eq!(l.check("u", 5199), Err(1));
        // Other names are not affected.
        assert_eq!(l.check("v", 300), Ok(()));
        assert_eq!(l.check("u", 5200), Ok(()), "the lock ended");
        // A fresh count after the lock.
        assert!(!l.record_failure("u", 5300));
        assert!(!l.record_failure("u", 5400));
        assert!(l.record_failure("u", 5500));
    }

    #[test]
    fn the_window_slides_and_a_success_resets_the_count() {
        let mut l = LoginLimiter::new(LIMITS);
        l.enter_term(1);
        assert!(!l.record_failure("u", 0));
        assert!(!l.record_failure("u", 600));
        // The failure at 0 left the window at 1000.
        assert!(!l.record_failure("u", 1000));
        assert!(l.record_failure("u", 1100));

        assert!(!l.record_failure("w", 0));
        assert!(!l.record_failure("w", 1));
        l.record_success("w", 2);
        assert_eq!(l.tracked(), 1, "w is forgotten");
        assert!(!l.record_failure("w", 3));
        assert!(!l.record_failure("w", 4));
        assert!(l.record_failure("w", 5));
        // A success cannot lift a lock (a verification that began before it fell).
        l.record_success("w", 6);
        assert_eq!(l.check("w", 6), Err(4999));
    }

    #[test]
    fn a_new_term_starts_from_zero() {
        let mut l = LoginLimiter::new(LIMITS);
        l.enter_term(1);
        for t in 0..3 {
            l.record_failure("u", t);
        }
        assert!(l.check("u", 10).is_err());
        l.enter_term(1);
        assert!(l.check("u", 10).is_err(), "same term: kept");
        l.enter_term(2);
        assert_eq!(l.check("u", 10), Ok(()));
        assert_eq!(l.tracked(), 0);
    }

    #[test]
    fn the_tracking_map_is_bounded_and_floods_do_not_lift_locks() {
        let mut l = LoginLimiter::with_tracked_max(LIMITS, 4);
        l.enter_term(1);
        for t in 0..3 {
            l.record_failure("locked", t);
        }
        assert!(l.check("locked", 3).is_err());
        // A flood of new names, each failing once.
        for i in 0..1000u64 {
            l.record_failure(&format!("flood{i}"), 10 + i);
            assert!(l.tracked() <= 4);
            assert!(l.check("locked", 10 + i).is_err(), "after {i} names");
        }
        // Idle records are forgotten first: after the window, the flood's records are idle.
        l.record_failure("late", 3000);
        assert_eq!(l.tracked(), 2, "locked and late");
        // When every record is a lock, the one ending first goes.
        let mut l = LoginLimiter::with_tracked_max(LIMITS, 2);
        l.enter_term(1);
        for name in ["a", "b"] {
            for t in 0..3 {
                l.record_failure(name, if name == "a" { t } else { 10 + t });
            }
        }
        l.record_failure("c", 20);
        assert_eq!(l.tracked(), 2);
        assert_eq!(l.check("a", 21), Ok(()), "a's lock ended first, so a went");
        assert!(l.check("b", 21).is_err());
    }

    /// A state machine with a user `alice` (password `alice_pw`), and root as given.
    fn state_with_alice(root_password: Option<&str>) -> crate::state::MetadataState {
        use crate::command::Command;
        let mut state = crate::state::MetadataState::new();
        state
            .apply(
                1,
                &Command::CreateUser {
                    username: "alice".into(),
                    password_hash: hash_password("alice_pw").unwrap(),
                },
            )
            .unwrap();
        if let Some(p) = root_password {
            state
                .apply(
                    2,
                    &Command::SetUserPassword {
                        username: ROOT_USER.into(),
                        password_hash: hash_password(p).unwrap(),
                    },
                )
                .unwrap();
        }
        state
    }

    fn authenticator(clock: &ManualClock) -> Authenticator {
        Authenticator::new(LIMITS, Arc::new(clock.clone()))
    }

    async fn login(
        auth: &Authenticator,
        state: &crate::state::MetadataState,
        user: &str,
        password: &str,
    ) -> Result<(), LoginError> {
        auth.authenticate(7, user, password.to_string(), |u| state.user_password(u))
            .await
    }

    #[tokio::test]
    async fn authenticate_root_initially_then_with_its_new_password() {
        let clock = ManualClock::default();
        let auth = authenticator(&clock);
        let initial = state_with_alice(None);
        assert_eq!(login(&auth, &initial, "root", "root").await, Ok(()));
        assert_eq!(login(&auth, &initial, "alice", "alice_pw").await, Ok(()));
        assert_eq!(
            login(&auth, &initial, "alice", "wrong").await,
            Err(LoginError::Failed)
        );
        assert_eq!(
            login(&auth, &initial, "nobody", "whatever").await,
            Err(LoginError::Failed),
            "an unknown user is answered as a wrong password"
        );
        assert_eq!(
            login(&auth, &initial, "bad name!", "x").await,
            Err(LoginError::Failed)
        );
        assert_eq!(
            login(&auth, &initial, "alice", &"p".repeat(1 << 20)).await,
            Err(LoginError::Failed),
            "a password longer than any is not hashed"
        );
        let changed = state_with_alice(Some("n3w_root"));
        assert_eq!(
            login(&auth, &changed, "root", "root").await,
            Err(LoginError::Failed)
        );
        assert_eq!(login(&auth, &changed, "root", "n3w_root").await, Ok(()));
    }

    #[tokio::test]
    async fn authenticate_locks_after_failures_and_unlocks_after_the_lock_time() {
        let clock = ManualClock::default();
        let auth = authenticator(&clock);
        let state = state_with_alice(None);
        // Two failures, then a success resets the count.
        for _ in 0..2 {
            assert_eq!(
                login(&auth, &state, "alice", "wrong").await,
                Err(LoginError::Failed)
            );
        }
        assert_eq!(login(&auth, &state, "alice", "alice_pw").await, Ok(()));
        for _ in 0..2 {
            assert_eq!(
                login(&auth, &state, "alice", "wrong").await,
                Err(LoginError::Failed)
            );
        }
        // The third failure in the window locks: even the right password is refused.
        clock.advance_ms(10);
        assert_eq!(
            login(&auth, &state, "alice", "wrong").await,
            Err(LoginError::Failed)
        );
        clock.advance_ms(1000);
        assert_eq!(
            login(&auth, &state, "alice", "alice_pw").await,
            Err(LoginError::Locked { remaining_ms: 4000 })
        );
        // Other users still log in; an unknown user locks alike (no hint of existence).
        assert_eq!(login(&auth, &state, "root", "root").await, Ok(()));
        for _ in 0..3 {
            assert_eq!(
                login(&auth, &state, "ghost", "x1234").await,
                Err(LoginError::Failed)
            );
        }
        assert!(matches!(
            login(&auth, &state, "ghost", "x1234").await,
            Err(LoginError::Locked { .. })
        ));
        clock.advance_ms(4000);
        assert_eq!(login(&auth, &state, "alice", "alice_pw").await, Ok(()));
        assert_eq!(auth.tracked(), 1, "only ghost's lock is left");
    }

    #[tokio::test]
    async fn hashing_on_the_authenticator_makes_verifiable_hashes() {
        let auth = authenticator(&ManualClock::default());
        let hash = auth.hash("pw_1234".into()).await.unwrap();
        assert!(verify_password(
            "pw_1234",
            Some(&StoredPassword::Hash(hash))
        ));
    }
}
