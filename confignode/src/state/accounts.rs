//! Users in the replicated state: who exists, their stored passwords, the fingerprint
//! DataNodes compare to forget cached logins.

use super::*;

impl MetadataState {
    /// Applies `Command::CreateUser`.
    pub(super) fn create_user(
        &mut self,
        username: &str,
        password_hash: &str,
    ) -> Result<CommandResult, MetadataError> {
        check_user(username, Some(password_hash))?;
        if self.user_exists(username) {
            return Err(MetadataError::UserExists(username.to_string()));
        }
        // root counts though absent from the table until its password is set.
        let users = self.users.len() + usize::from(!self.users.contains_key(ROOT_USER));
        if users >= USERS_MAX {
            return Err(MetadataError::Limit(format!("{USERS_MAX} users")));
        }
        self.users
            .insert(username.to_string(), password_hash.to_string());
        Ok(CommandResult::Done)
    }

    /// Applies `Command::DropUser`.
    pub(super) fn drop_user(&mut self, username: &str) -> Result<CommandResult, MetadataError> {
        check_user(username, None)?;
        if username == ROOT_USER {
            return Err(MetadataError::NoPermission(
                "the root user cannot be dropped".into(),
            ));
        }
        self.users
            .remove(username)
            .ok_or_else(|| MetadataError::UserNotFound(username.to_string()))?;
        Ok(CommandResult::Done)
    }

    /// Applies `Command::SetUserPassword`.
    pub(super) fn set_user_password(
        &mut self,
        username: &str,
        password_hash: &str,
    ) -> Result<CommandResult, MetadataError> {
        check_user(username, Some(password_hash))?;
        if !self.user_exists(username) {
            return Err(MetadataError::UserNotFound(username.to_string()));
        }
        self.users
            .insert(username.to_string(), password_hash.to_string());
        Ok(CommandResult::Done)
    }

    /// Whether `username` is a user (root always is).
    pub fn user_exists(&self, username: &str) -> bool {
        username == ROOT_USER || self.users.contains_key(username)
    }

    /// What `username`'s password is checked against; `None` when it is not a user.
    pub fn user_password(&self, username: &str) -> Option<StoredPassword> {
        match self.users.get(username) {
            Some(hash) => Some(StoredPassword::Hash(hash.clone())),
            None if username == ROOT_USER => Some(StoredPassword::RootInitial),
            None => None,
        }
    }

    /// A fingerprint of the users and their stored hashes: it changes whenever a user is
    /// created, dropped or given a new password (a new salt makes a new hash even for the same
    /// password). Heartbeats carry it, so DataNodes forget the passwords they remembered.
    pub fn users_fingerprint(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        self.users.hash(&mut hasher);
        hasher.finish()
    }

    /// Every user name, root included, sorted.
    pub fn user_names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.users.keys().map(String::as_str).collect();
        if !self.users.contains_key(ROOT_USER) {
            let at = names.partition_point(|n| *n < ROOT_USER);
            names.insert(at, ROOT_USER);
        }
        names
    }
}
