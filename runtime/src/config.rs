//! What the ConfigNode's and the DataNode's configurations share: the error that names a key, TOML
//! loading that refuses unknown keys, and address checks.

use std::path::Path;

use serde::de::DeserializeOwned;

/// Why a configuration is invalid.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid config key {key}: {reason}")]
pub struct ConfigError {
    /// The TOML key (also `--kebab-case` on the command line).
    pub key: &'static str,
    /// What is wrong.
    pub reason: String,
}

/// A [`ConfigError`] for `key`.
pub fn config_error(key: &'static str, reason: impl Into<String>) -> ConfigError {
    ConfigError {
        key,
        reason: reason.into(),
    }
}

/// Parses TOML text; unknown keys are an error when `T` denies them (`deny_unknown_fields`).
pub fn parse_toml<T: DeserializeOwned>(text: &str) -> Result<T, ConfigError> {
    toml::from_str(text).map_err(|e| config_error("config", e.to_string()))
}

/// Reads and parses a TOML file.
pub fn read_toml<T: DeserializeOwned>(path: &Path) -> Result<T, ConfigError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| config_error("config", format!("reading {}: {e}", path.display())))?;
    parse_toml(&text)
}

/// `address` must be `ip:port` (what a listener binds).
pub fn check_socket_address(key: &'static str, address: &str) -> Result<(), ConfigError> {
    address
        .parse::<std::net::SocketAddr>()
        .map(|_| ())
        .map_err(|e| config_error(key, format!("{address:?} is not ip:port ({e})")))
}

/// `address` must be `ip:port` or `host:port` (what a peer is reached at).
pub fn check_host_address(key: &'static str, address: &str) -> Result<(), ConfigError> {
    check_socket_address(key, address)
        .or_else(|_| proto::parse_endpoint(address).map(|_| ()))
        .map_err(|e| config_error(key, format!("{address:?} is not host:port ({e})")))
}

/// Shortest keepalive interval or timeout a node accepts, in milliseconds: below it PINGs
/// compete with the traffic and a scheduling hiccup closes healthy connections.
pub const KEEPALIVE_MS_MIN: u64 = 100;
/// Longest, in milliseconds: a dead connection noticed later than this outlives the heartbeat
/// and fence scale, which is what keepalive is there to prevent.
pub const KEEPALIVE_MS_MAX: u64 = 60_000;

/// The HTTP/2 keepalive keys of a node: interval and timeout each in
/// [`KEEPALIVE_MS_MIN`]`..=`[`KEEPALIVE_MS_MAX`].
pub fn check_keepalive(
    interval_key: &'static str,
    interval_ms: u64,
    timeout_key: &'static str,
    timeout_ms: u64,
) -> Result<(), ConfigError> {
    for (key, value) in [(interval_key, interval_ms), (timeout_key, timeout_ms)] {
        if !(KEEPALIVE_MS_MIN..=KEEPALIVE_MS_MAX).contains(&value) {
            return Err(config_error(
                key,
                format!("{value} is not in {KEEPALIVE_MS_MIN}..={KEEPALIVE_MS_MAX}"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Sample {
        #[allow(dead_code)]
        port: u16,
    }

    #[test]
    fn toml_errors_and_addresses_name_the_key() {
        assert!(parse_toml::<Sample>("port = 1").is_ok());
        assert_eq!(parse_toml::<Sample>("nope = 1").unwrap_err().key, "config");
        assert_eq!(
            read_toml::<Sample>(Path::new("/nonexistent/x.toml"))
                .unwrap_err()
                .key,
            "config"
        );
        assert!(check_socket_address("a", "127.0.0.1:1").is_ok());
        assert_eq!(
            check_socket_address("a", "localhost:1").unwrap_err().key,
            "a"
        );
        assert!(check_host_address("b", "localhost:1").is_ok());
        assert_eq!(check_host_address("b", "localhost").unwrap_err().key, "b");
        assert!(check_keepalive("i", 1000, "t", 2000).is_ok());
        assert_eq!(check_keepalive("i", 0, "t", 2000).unwrap_err().key, "i");
        assert_eq!(
            check_keepalive("i", 1000, "t", 60_001).unwrap_err().key,
            "t"
        );
    }
}
