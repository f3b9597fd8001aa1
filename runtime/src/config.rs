//! What the ConfigNode's and the DataNode's configurations share: [`node_config!`] (every key
//! declared once, in sections), the error that names a key, TOML loading that refuses unknown
//! keys, the table of keys the docs show, and address checks.
//!
//! [`node_config!`]: crate::node_config

use std::path::Path;

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

/// Each key in `keys` whose value is 0 is an error naming it: `must be > 0`.
pub fn check_nonzero(keys: &[(&'static str, u64)]) -> Result<(), ConfigError> {
    match keys.iter().find(|(_, value)| *value == 0) {
        Some((key, _)) => Err(config_error(key, "must be > 0")),
        None => Ok(()),
    }
}

/// One key of a configuration as [`node_config!`](crate::node_config) declares it: what the
/// docs' table of keys is rendered from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyDoc {
    /// The TOML key (`--kebab-case` on the command line).
    pub name: &'static str,
    /// The section of the configuration struct that holds it (the TOML file is flat).
    pub section: &'static str,
    /// Its Rust type, as declared.
    pub ty: &'static str,
    /// Its default, as the declared Rust expression (`64 << 20`); the table shows the value.
    pub default: &'static str,
    /// Its doc comment: meaning, unit, default and bounds; also its flag's `--help`.
    pub doc: &'static str,
}

/// A configuration declared with [`node_config!`](crate::node_config): its keys, and its
/// loading from a flat TOML table.
pub trait NodeConfig: Default + Sized {
    /// Every key, section by section, in declaration order.
    const KEYS: &'static [KeyDoc];

    /// The defaults overlaid with `table`'s keys; a key not in [`Self::KEYS`] is an error
    /// naming it, and so is a value of the wrong type.
    fn from_table(table: toml::Table) -> Result<Self, ConfigError>;

    /// Every key's value as TOML writes it (`"127.0.0.1:6667"`, `67108864`), in the order of
    /// [`Self::KEYS`].
    fn toml_values(&self) -> Vec<String>;

    /// The flat TOML file that sets every key to its value here, one `key = value` a line in
    /// declaration order: what [`parse_toml`] reads back into an equal configuration.
    fn to_toml(&self) -> String {
        Self::KEYS
            .iter()
            .zip(self.toml_values())
            .map(|(key, value)| format!("{} = {value}\n", key.name))
            .collect()
    }

    /// The markdown table of the keys (`| key | default | meaning |`) the docs hold.
    fn key_table() -> String {
        let values = Self::default().toml_values();
        crate::docs::markdown_table(
            ["key", "default", "meaning"],
            Self::KEYS.iter().zip(values).map(|(key, value)| {
                [
                    format!("`{}`", key.name),
                    format!("`{value}`"),
                    key.doc.to_string(),
                ]
            }),
        )
    }
}

/// Parses TOML text into `T`: the file is flat (`key = value`), a key `T` does not declare is
/// an error naming it.
pub fn parse_toml<T: NodeConfig>(text: &str) -> Result<T, ConfigError> {
    let table: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| config_error("config", e.to_string()))?;
    T::from_table(table)
}

/// Reads and parses a TOML file.
pub fn read_toml<T: NodeConfig>(path: &Path) -> Result<T, ConfigError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| config_error("config", format!("reading {}: {e}", path.display())))?;
    parse_toml(&text)
}

/// What [`node_config!`](crate::node_config) expands to needs; not an API.
#[doc(hidden)]
pub mod __private {
    pub use clap;
    pub use serde;
    pub use toml;

    use super::{config_error, ConfigError, KeyDoc};

    /// The first key of `table` that `keys` does not declare is an error naming it.
    pub fn refuse_unknown_keys(table: &toml::Table, keys: &[KeyDoc]) -> Result<(), ConfigError> {
        match table
            .keys()
            .find(|name| !keys.iter().any(|k| k.name == name.as_str()))
        {
            Some(name) => Err(config_error(
                "config",
                format!("unknown key `{name}` (every key is listed by --help, as a flag)"),
            )),
            None => Ok(()),
        }
    }

    /// `value` as the type of `key`.
    pub fn key_value<T: serde::de::DeserializeOwned>(
        key: &'static str,
        value: toml::Value,
    ) -> Result<T, ConfigError> {
        value
            .try_into()
            .map_err(|e| config_error(key, e.to_string()))
    }

    /// `value` as TOML writes it.
    pub fn toml_value<T: serde::Serialize>(value: &T) -> String {
        match toml::Value::try_from(value) {
            Ok(value) => value.to_string(),
            Err(e) => panic!("a default that TOML cannot write: {e}"),
        }
    }
}

/// Declares a node's configuration once per key — doc comment, name, type, default — with the
/// keys grouped into sections. The TOML file and the command line stay flat: a section only
/// groups fields in the code.
///
/// ```
/// runtime::node_config! {
///     /// The node's settings.
///     pub struct SampleConfig {
///         /// Where the node listens.
///         net: NetSection {
///             /// Port of the service. Default 7.
///             node_port: u16 = 7,
///         },
///         /// When it acts.
///         timing: TimingSection {
///             /// Offset in milliseconds; may be negative. Default -1.
///             #[arg(allow_hyphen_values = true)]
///             node_offset_ms: i64 = -1,
///         },
///     }
///
///     /// Command-line form: `--config file` plus every key as `--kebab-case-name value`.
///     #[command(name = "node", about = "A node")]
///     pub struct SampleArgs;
/// }
///
/// fn main() {
///     use clap::Parser;
///     let mut c: SampleConfig = runtime::config::parse_toml("node_port = 8").unwrap();
///     c.overlay_args(SampleArgs::parse_from(["node", "--node-offset-ms", "5"]));
///     assert_eq!((c.net.node_port, c.timing.node_offset_ms), (8, 5));
///     assert_eq!(SampleConfig::default().timing.node_offset_ms, -1);
/// }
/// ```
///
/// From that it generates:
/// - the config struct, one `pub` field per section with its doc, deriving `Clone, Debug,
///   Default, PartialEq, Eq`; and per section a struct, every key a `pub` field with its doc,
///   with `impl Default` from the declared defaults;
/// - [`NodeConfig`] for the config: [`KeyDoc`]s of every key, loading from a flat TOML table
///   (unknown keys are errors), the values as TOML writes them, the docs' table of keys;
/// - the args struct (`clap::Parser`, `Debug`, `Default`) with the attributes written on it
///   (`#[command(...)]`), a `--config <file>` option and, flattened from one `clap::Args` struct
///   per section, per key an `Option<T>` `--kebab-case` flag whose help is the key's doc; a
///   key's `#[arg(...)]`, if any, goes to its flag only;
/// - `overlay_args(&mut self, args)` on the config: every flag given replaces its key.
///
/// Every key and section needs a doc comment (a key's is also its `--help` text). Invoke it at
/// module level, at most once per module: the structs are defined in a private module
/// `__node_config` of the caller and re-exported (a section's flags struct, in
/// `__node_config::flags`, is not), field types resolved there through `use super::*`. The
/// generated code names `serde`, `clap` and `toml` through this crate's re-exports: the caller
/// needs none of them.
#[macro_export]
macro_rules! node_config {
    (
        $(#[$config_meta:meta])*
        $config_vis:vis struct $Config:ident {
            $(
                $(#[doc = $section_doc:literal])+
                $section:ident : $Section:ident {
                    $(
                        $(#[doc = $doc:literal])+
                        $(#[arg($($arg:tt)*)])?
                        $key:ident : $ty:ty = $default:expr
                    ),+ $(,)?
                }
            ),+ $(,)?
        }

        $(#[$args_meta:meta])*
        $args_vis:vis struct $Args:ident;
    ) => {
        // clap's derive names `clap::...` at the call site: it resolves through the imports of
        // this module.
        mod __node_config {
            #![allow(unused_imports)]
            use super::*;
            use $crate::config::__private::clap;

            #[derive(Clone, Debug, Default, PartialEq, Eq)]
            $(#[$config_meta])*
            pub struct $Config {
                $( $(#[doc = $section_doc])+ pub $section: $Section, )+
            }

            $(
                $(#[doc = $section_doc])+
                #[derive(Clone, Debug, PartialEq, Eq)]
                pub struct $Section {
                    $( $(#[doc = $doc])+ pub $key: $ty, )+
                }

                impl ::core::default::Default for $Section {
                    fn default() -> Self {
                        $Section { $( $key: $default, )+ }
                    }
                }
            )+

            /// One flags struct per section, flattened into the args struct. They carry no doc
            /// comment: clap would take it for the whole command's `about`.
            #[allow(missing_docs)]
            pub mod flags {
                use super::*;
                $(
                    #[derive(Debug, Default, clap::Args)]
                    pub struct $Section {
                        $(
                            $(#[doc = $doc])+
                            #[arg(long $(, $($arg)*)?)]
                            pub $key: Option<$ty>,
                        )+
                    }
                )+
            }

            #[derive(Debug, Default, clap::Parser)]
            $(#[$args_meta])*
            pub struct $Args {
                /// TOML file with any of the keys below (snake_case).
                #[arg(long)]
                pub config: Option<::std::path::PathBuf>,
                $(
                    $(#[doc = $section_doc])+
                    #[command(flatten)]
                    pub $section: flags::$Section,
                )+
            }
        }
        // A section nobody names outside the declaration is fine.
        #[allow(unused_imports)]
        $config_vis use __node_config::{$Config $(, $Section)+};
        $args_vis use __node_config::$Args;

        impl $crate::config::NodeConfig for $Config {
            const KEYS: &'static [$crate::config::KeyDoc] = &[
                $( $(
                    $crate::config::KeyDoc {
                        name: stringify!($key),
                        section: stringify!($section),
                        ty: stringify!($ty),
                        default: stringify!($default),
                        doc: concat!($($doc, "\n"),+),
                    },
                )+ )+
            ];

            fn from_table(
                mut table: $crate::config::__private::toml::Table,
            ) -> ::core::result::Result<Self, $crate::config::ConfigError> {
                $crate::config::__private::refuse_unknown_keys(&table, Self::KEYS)?;
                let mut c = Self::default();
                $( $(
                    if let Some(value) = table.remove(stringify!($key)) {
                        c.$section.$key =
                            $crate::config::__private::key_value(stringify!($key), value)?;
                    }
                )+ )+
                Ok(c)
            }

            fn toml_values(&self) -> ::std::vec::Vec<::std::string::String> {
                ::std::vec![
                    $( $( $crate::config::__private::toml_value(&self.$section.$key), )+ )+
                ]
            }
        }

        impl $Config {
            /// Every key given on the command line replaces its value here (`--config` is not
            /// read: the caller loads the file first).
            $config_vis fn overlay_args(&mut self, args: $Args) {
                $( $(
                    if let Some(v) = args.$section.$key {
                        self.$section.$key = v;
                    }
                )+ )+
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
    // `{:#?}` prints one `key: value,` line per field, indented four spaces per level; a
    // section's line opens a struct (`name: Section {`) and holds keys, not a value.
    let keys: Vec<&str> = debug
        .lines()
        .skip(1)
        .map(str::trim_start)
        .filter(|l| !l.ends_with('{'))
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

    crate::node_config! {
        /// Three keys in two sections.
        pub struct TinyConfig {
            /// Where it listens.
            net: TinyNet {
                /// Port of the tiny service. Default 7.
                tiny_port: u16 = 7,
                /// Its files. Default `tiny`.
                tiny_dir: std::path::PathBuf = "tiny".into(),
            },
            /// When it acts.
            timing: TinyTiming {
                /// Offset in milliseconds; may be negative. Default -1.
                #[arg(allow_hyphen_values = true)]
                tiny_offset_ms: i64 = -1,
            },
        }

        /// Tiny's command line.
        #[command(name = "tiny", about = "A tiny node")]
        pub struct TinyArgs;
    }

    #[test]
    fn node_config_declares_defaults_toml_and_flags_once() {
        use __private::clap::{CommandFactory, Parser};

        let d = TinyConfig::default();
        assert_eq!((d.net.tiny_port, d.timing.tiny_offset_ms), (7, -1));
        // A file sets some keys; the others keep their defaults.
        let mut c: TinyConfig = parse_toml("tiny_port = 8").unwrap();
        let mut expected = d.clone();
        expected.net.tiny_port = 8;
        assert_eq!(c, expected);
        assert_eq!(parse_toml::<TinyConfig>("").unwrap(), d);
        assert_eq!(
            d.to_toml(),
            "tiny_port = 7\ntiny_dir = \"tiny\"\ntiny_offset_ms = -1\n"
        );
        assert_eq!(
            parse_toml::<TinyConfig>(&expected.to_toml()).unwrap(),
            expected
        );
        // Flags replace what they name and leave the rest; a key's `#[arg]` reaches its flag.
        let args = TinyArgs::try_parse_from(["tiny", "--tiny-offset-ms", "-5"]).unwrap();
        assert_eq!(args.config, None);
        c.overlay_args(args);
        assert_eq!((c.net.tiny_port, c.timing.tiny_offset_ms), (8, -5));
        let args = TinyArgs::try_parse_from(["tiny", "--config", "t.toml", "--tiny-port", "9"]);
        let args = args.unwrap();
        assert_eq!(args.config.as_deref(), Some(Path::new("t.toml")));
        c.overlay_args(args);
        assert_eq!((c.net.tiny_port, c.timing.tiny_offset_ms), (9, -5));
        assert!(TinyArgs::try_parse_from(["tiny", "--tiny_port", "9"]).is_err());
        assert!(TinyArgs::try_parse_from(["tiny", "--tiny-port", "-1"]).is_err());
        // The doc comment is the flag's help; a section's is nowhere in the help.
        let help = TinyArgs::command().render_long_help().to_string();
        assert!(help.contains("A tiny node"), "{help}");
        assert!(help.contains("--tiny-port <TINY_PORT>"), "{help}");
        assert!(
            help.contains("Port of the tiny service. Default 7"),
            "{help}"
        );
        assert!(help.contains("--config <CONFIG>"), "{help}");
        assert!(!help.contains("When it acts"), "{help}");
    }

    #[test]
    fn the_file_stays_flat_and_errors_name_the_key() {
        let e = parse_toml::<TinyConfig>("tiny_port = 8\nnope = 1").unwrap_err();
        assert!(e.key == "config" && e.reason.contains("`nope`"), "{e}");
        // A section is no TOML table.
        let e = parse_toml::<TinyConfig>("[net]\ntiny_port = 8").unwrap_err();
        assert!(e.key == "config" && e.reason.contains("`net`"), "{e}");
        let e = parse_toml::<TinyConfig>("tiny_port = \"8\"").unwrap_err();
        assert_eq!(e.key, "tiny_port", "{e}");
        let e = parse_toml::<TinyConfig>("tiny_port = 70000").unwrap_err();
        assert_eq!(e.key, "tiny_port", "{e}");
        assert_eq!(
            parse_toml::<TinyConfig>("tiny_port = ").unwrap_err().key,
            "config"
        );
        assert_eq!(
            read_toml::<TinyConfig>(Path::new("/nonexistent/x.toml"))
                .unwrap_err()
                .key,
            "config"
        );
    }

    #[test]
    fn the_keys_are_listed_with_their_docs_and_defaults() {
        let names: Vec<(&str, &str)> = TinyConfig::KEYS
            .iter()
            .map(|k| (k.section, k.name))
            .collect();
        assert_eq!(
            names,
            [
                ("net", "tiny_port"),
                ("net", "tiny_dir"),
                ("timing", "tiny_offset_ms")
            ]
        );
        assert_eq!(TinyConfig::KEYS[0].ty, "u16");
        assert_eq!(TinyConfig::KEYS[1].default, "\"tiny\".into()");
        assert_eq!(
            TinyConfig::KEYS[0].doc,
            " Port of the tiny service. Default 7.\n"
        );
        assert_eq!(
            TinyConfig::key_table(),
            "| key | default | meaning |\n| --- | --- | --- |\n\
             | `tiny_port` | `7` | Port of the tiny service. Default 7. |\n\
             | `tiny_dir` | `\"tiny\"` | Its files. Default `tiny`. |\n\
             | `tiny_offset_ms` | `-1` | Offset in milliseconds; may be negative. Default -1. |\n"
        );
    }

    #[test]
    fn a_key_without_a_documented_flag_is_named() {
        assert_eq!(
            check_every_key_is_a_documented_flag::<TinyConfig, TinyArgs>(),
            Ok(3)
        );
        #[derive(Debug, Default)]
        #[allow(dead_code)] // Read through Debug only.
        struct Wider {
            net: TinyNet,
            tiny_extra_ms: u64,
        }
        assert_eq!(
            check_every_key_is_a_documented_flag::<Wider, TinyArgs>(),
            Err(vec!["tiny-extra-ms".to_string()])
        );
    }

    #[test]
    fn addresses_and_bounds_name_the_key() {
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
        assert!(check_nonzero(&[("a", 1), ("b", 2)]).is_ok());
        assert_eq!(
            check_nonzero(&[("a", 1), ("b", 0), ("c", 0)]),
            Err(config_error("b", "must be > 0"))
        );
    }
}
