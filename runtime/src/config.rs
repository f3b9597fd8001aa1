//! What the ConfigNode's and the DataNode's configurations share: [`node_config!`] (every key
//! declared once), the error that names a key, TOML loading that refuses unknown keys, and
//! address checks.
//!
//! [`node_config!`]: crate::node_config

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

/// What [`node_config!`](crate::node_config) expands to needs; not an API.
#[doc(hidden)]
pub mod __private {
    pub use clap;
    pub use serde;
}

/// Declares a node's configuration once per key: doc comment, name, type, default.
///
/// ```
/// runtime::node_config! {
///     /// The node's settings.
///     pub struct NodeConfig {
///         /// Port of the service. Default 7.
///         node_port: u16 = 7,
///         /// Offset in milliseconds; may be negative. Default -1.
///         #[arg(allow_hyphen_values = true)]
///         node_offset_ms: i64 = -1,
///     }
///
///     /// Command-line form: `--config file` plus every key as `--kebab-case-name value`.
///     #[command(name = "node", about = "A node")]
///     pub struct NodeArgs;
/// }
///
/// fn main() {
///     let mut c: NodeConfig = runtime::config::parse_toml("node_port = 8").unwrap();
///     c.overlay_args(NodeArgs { node_offset_ms: Some(5), ..NodeArgs::default() });
///     assert_eq!((c.node_port, c.node_offset_ms), (8, 5));
///     assert_eq!(NodeConfig::default().node_offset_ms, -1);
/// }
/// ```
///
/// From that it generates:
/// - the config struct: every key a `pub` field with its doc, deriving `Clone, Debug, PartialEq,
///   Eq, Deserialize` with `#[serde(default, deny_unknown_fields)]` (unknown TOML keys are errors);
/// - `impl Default` from the declared defaults;
/// - the args struct (`clap::Parser`, `Debug`, `Default`) with the attributes written on it
///   (`#[command(...)]`), a `--config <file>` option and per key an `Option<T>` `--kebab-case`
///   flag whose help is the key's doc; a key's `#[arg(...)]`, if any, goes to its flag only;
/// - `overlay_args(&mut self, args)` on the config: every flag given replaces its key.
///
/// Every key needs a doc comment (it is also its `--help` text). Invoke it at module level, at
/// most once per module: the structs are defined in a private module `__node_config` of the
/// caller and re-exported, field types resolved there through `use super::*`. The derives' code
/// names `serde` and `clap` through this crate's re-exports: the caller needs neither dependency.
#[macro_export]
macro_rules! node_config {
    (
        $(#[$config_meta:meta])*
        $config_vis:vis struct $Config:ident {
            $(
                $(#[doc = $doc:literal])+
                $(#[arg($($arg:tt)*)])?
                $key:ident : $ty:ty = $default:expr
            ),+ $(,)?
        }

        $(#[$args_meta:meta])*
        $args_vis:vis struct $Args:ident;
    ) => {
        // clap's derive names `clap::...` at the call site, and serde's derive honours
        // `crate = "..."` only as a string: both resolve through the imports of this module.
        mod __node_config {
            #![allow(unused_imports)]
            use super::*;
            use $crate::config::__private::{clap, serde};

            #[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize)]
            #[serde(crate = "serde", default, deny_unknown_fields)]
            $(#[$config_meta])*
            pub struct $Config {
                $( $(#[doc = $doc])+ pub $key: $ty, )+
            }

            #[derive(Debug, Default, clap::Parser)]
            $(#[$args_meta])*
            pub struct $Args {
                /// TOML file with any of the keys below (snake_case).
                #[arg(long)]
                pub config: Option<::std::path::PathBuf>,
                $(
                    $(#[doc = $doc])+
                    #[arg(long $(, $($arg)*)?)]
                    pub $key: Option<$ty>,
                )+
            }
        }
        $config_vis use __node_config::$Config;
        $args_vis use __node_config::$Args;

        impl ::core::default::Default for $Config {
            fn default() -> Self {
                $Config { $( $key: $default, )+ }
            }
        }

        impl $Config {
            /// Every key given on the command line replaces its value here (`--config` is not
            /// read: the caller loads the file first).
            $config_vis fn overlay_args(&mut self, args: $Args) {
                $( if let Some(v) = args.$key { self.$key = v; } )+
            }
        }
    };
}

/// Checks that every key of the configuration `C` — as its `Debug` form lists them, not as the
/// declaration does — is a `--kebab-case` flag of `A` with help text. Returns the number of keys
/// checked, or the keys that fail. Each node's tests call it, so a key without a documented flag
/// cannot come back.
pub fn check_every_key_is_a_documented_flag<C, A>() -> Result<usize, Vec<String>>
where
    C: std::fmt::Debug + Default,
    A: clap::CommandFactory,
{
    let debug = format!("{:#?}", C::default());
    // `{:#?}` prints one `key: value,` line per field, indented by four spaces.
    let keys: Vec<&str> = debug
        .lines()
        .filter_map(|l| l.strip_prefix("    ").filter(|l| !l.starts_with(' ')))
        .filter_map(|l| l.split_once(": ").map(|(key, _)| key))
        .collect();
    let command = A::command();
    let failing: Vec<String> = keys
        .iter()
        .map(|key| key.replace('_', "-"))
        .filter(|flag| {
            !command
                .get_arguments()
                .any(|a| a.get_long() == Some(flag.as_str()) && a.get_help().is_some())
        })
        .collect();
    if failing.is_empty() {
        Ok(keys.len())
    } else {
        Err(failing)
    }
}

/// Checks that `needed` descriptors fit in the process's open-files limit (`RLIMIT_NOFILE`),
/// logging an error that names `what` adds up to `needed` when they do not; answers whether
/// they fit. Not fitting is not fatal: every limit still refuses what is past it, but a client
/// flood can then run the process out of descriptors before the connection limits are reached.
pub fn check_open_files(needed: u64, what: &str) -> bool {
    match common::process::open_files_limit() {
        Ok(limit) if limit.soft >= needed => {
            tracing::info!(
                soft = limit.soft,
                hard = limit.hard,
                needed,
                "the open-files limit (RLIMIT_NOFILE) fits the configured limits"
            );
            true
        }
        Ok(limit) => {
            tracing::error!(
                soft = limit.soft,
                hard = limit.hard,
                needed,
                "the open-files limit (RLIMIT_NOFILE) is below what the configured limits may \
                 hold ({what}): raise the hard limit (ulimit -Hn, systemd LimitNOFILE=) or lower \
                 those keys, or a client flood can exhaust descriptors"
            );
            false
        }
        Err(e) => {
            tracing::warn!("reading the open-files limit: {e}");
            false
        }
    }
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

    crate::node_config! {
        /// Two keys.
        pub struct TinyConfig {
            /// Port of the tiny service. Default 7.
            tiny_port: u16 = 7,
            /// Offset in milliseconds; may be negative. Default -1.
            #[arg(allow_hyphen_values = true)]
            tiny_offset_ms: i64 = -1,
        }

        /// Tiny's command line.
        #[command(name = "tiny", about = "A tiny node")]
        pub struct TinyArgs;
    }

    #[test]
    fn node_config_declares_defaults_toml_and_flags_once() {
        use __private::clap::{CommandFactory, Parser};

        let d = TinyConfig::default();
        assert_eq!((d.tiny_port, d.tiny_offset_ms), (7, -1));
        // A file sets some keys; the others keep their defaults.
        let mut c: TinyConfig = parse_toml("tiny_port = 8").unwrap();
        assert_eq!(
            c,
            TinyConfig {
                tiny_port: 8,
                ..d.clone()
            }
        );
        assert_eq!(parse_toml::<TinyConfig>("").unwrap(), d);
        let e = parse_toml::<TinyConfig>("tiny_port = 8\nnope = 1").unwrap_err();
        assert!(e.key == "config" && e.reason.contains("nope"), "{e}");
        // Flags replace what they name and leave the rest; a key's `#[arg]` reaches its flag.
        let args = TinyArgs::try_parse_from(["tiny", "--tiny-offset-ms", "-5"]).unwrap();
        assert_eq!(args.config, None);
        c.overlay_args(args);
        assert_eq!((c.tiny_port, c.tiny_offset_ms), (8, -5));
        let args = TinyArgs::try_parse_from(["tiny", "--config", "t.toml", "--tiny-port", "9"]);
        let args = args.unwrap();
        assert_eq!(args.config.as_deref(), Some(Path::new("t.toml")));
        c.overlay_args(args);
        assert_eq!((c.tiny_port, c.tiny_offset_ms), (9, -5));
        assert!(TinyArgs::try_parse_from(["tiny", "--tiny_port", "9"]).is_err());
        assert!(TinyArgs::try_parse_from(["tiny", "--tiny-port", "-1"]).is_err());
        // The doc comment is the flag's help.
        let help = TinyArgs::command().render_long_help().to_string();
        assert!(help.contains("A tiny node"), "{help}");
        assert!(help.contains("--tiny-port <TINY_PORT>"), "{help}");
        assert!(
            help.contains("Port of the tiny service. Default 7"),
            "{help}"
        );
        assert!(help.contains("--config <CONFIG>"), "{help}");
    }

    #[test]
    fn a_key_without_a_documented_flag_is_named() {
        assert_eq!(
            check_every_key_is_a_documented_flag::<TinyConfig, TinyArgs>(),
            Ok(2)
        );
        #[derive(Debug, Default)]
        #[allow(dead_code)] // Read through Debug only.
        struct Wider {
            tiny_port: u16,
            tiny_offset_ms: i64,
            tiny_extra_ms: u64,
        }
        assert_eq!(
            check_every_key_is_a_documented_flag::<Wider, TinyArgs>(),
            Err(vec!["tiny-extra-ms".to_string()])
        );
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
        assert!(check_open_files(1, "one descriptor"));
        assert!(!check_open_files(u64::MAX, "every descriptor"));
        assert!(check_keepalive("i", 1000, "t", 2000).is_ok());
        assert_eq!(check_keepalive("i", 0, "t", 2000).unwrap_err().key, "i");
        assert_eq!(
            check_keepalive("i", 1000, "t", 60_001).unwrap_err().key,
            "t"
        );
    }
}
