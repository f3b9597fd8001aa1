//! The IoTDB tree-model path rules, in one place (design §2): a path is `root` followed by
//! dot-separated components; a component is a non-empty run of ASCII letters and digits, `_`,
//! `-`, or non-ASCII characters (IoTDB admits e.g. Chinese node names); a database has at least
//! one component after `root`, a device at least two; a measurement is one component. The
//! session, the DataNode's tablet check and the ConfigNode all judge paths with these functions,
//! so a path one of them admits is never refused by another for its shape.
//!
//! [`DatabasePath`], [`DevicePath`] and [`Measurement`] are those rules as types: a value of one
//! was parsed (and so checked) once, where it entered, and carries the operations on paths —
//! containment ([`is_under`]) and the database schema auto-creation picks ([`DevicePath::level1_database`]).

/// Longest path or measurement name in bytes unless configured otherwise.
pub const PATH_BYTES_MAX: usize = 1024;

/// Why a path or name was refused.
pub type PathResult = Result<(), &'static str>;

/// Whether `name` is one valid component.
pub fn check_component(name: &str) -> PathResult {
    if name.is_empty() {
        return Err("empty component");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b >= 0x80)
    {
        return Err("components hold only letters, digits, '_' and '-'");
    }
    Ok(())
}

/// Whether `path` is `root` and at least `components_min` valid components after it, in at most
/// `bytes_max` bytes.
pub fn check_path(path: &str, components_min: usize, bytes_max: usize) -> PathResult {
    if path.len() > bytes_max {
        return Err("path too long");
    }
    let mut parts = path.split('.');
    if parts.next() != Some("root") {
        return Err("must start with 'root.'");
    }
    let mut count = 0;
    for part in parts {
        check_component(part)?;
        count += 1;
    }
    if count < components_min {
        return Err("too few components");
    }
    Ok(())
}

/// A database path: `root.<name>` at least.
pub fn check_database(path: &str, bytes_max: usize) -> PathResult {
    check_path(path, 1, bytes_max)
}

/// A device path: a database and a device name at least, e.g. `root.sg.d1`.
pub fn check_device(path: &str, bytes_max: usize) -> PathResult {
    check_path(path, 2, bytes_max).map_err(|reason| match reason {
        "too few components" => "needs a database and a device name, e.g. root.sg.d1",
        other => other,
    })
}

/// A measurement: one component of at most `bytes_max` bytes.
pub fn check_measurement(name: &str, bytes_max: usize) -> PathResult {
    if name.len() > bytes_max {
        return Err("name too long");
    }
    check_component(name)
}

/// A path or name refused by the rules: which, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathError {
    /// The refused path (or name).
    pub path: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

impl std::fmt::Display for PathError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "illegal path {}: {}", self.path, self.reason)
    }
}

impl std::error::Error for PathError {}

/// True when `path` lies strictly below `ancestor` (`root.sg` holds `root.sg.d1`, not
/// `root.sgx.d1`, and not itself).
pub fn is_under(path: &str, ancestor: &str) -> bool {
    path.len() > ancestor.len()
        && path.starts_with(ancestor)
        && path.as_bytes()[ancestor.len()] == b'.'
}

macro_rules! path_type {
    ($(#[$doc:meta])* $name:ident, $check:ident) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(String);

        impl $name {
            /// `path` if the rules admit it in at most `bytes_max` bytes.
            pub fn parse(path: &str, bytes_max: usize) -> Result<$name, PathError> {
                $check(path, bytes_max).map_err(|reason| PathError {
                    path: path.to_string(),
                    reason,
                })?;
                Ok($name(path.to_string()))
            }

            /// The path as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// The path as an owned string.
            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }
    };
}

path_type!(
    /// A database path, e.g. `root.sg` ([`check_database`]).
    DatabasePath,
    check_database
);
path_type!(
    /// A device path, e.g. `root.sg.d1` ([`check_device`]).
    DevicePath,
    check_device
);
path_type!(
    /// A measurement name, e.g. `s1` ([`check_measurement`]).
    Measurement,
    check_measurement
);

impl DatabasePath {
    /// True when `device` belongs to this database.
    pub fn holds(&self, device: &str) -> bool {
        is_under(device, &self.0)
    }
}

impl DevicePath {
    /// The database schema auto-creation makes for a device no database covers: `root` and the
    /// device's first component (IoTDB's default storage-group level 1), e.g. `root.sg` for
    /// `root.sg.d1`.
    pub fn level1_database(&self) -> DatabasePath {
        let end = self
            .0
            .match_indices('.')
            .nth(1)
            .map_or(self.0.len(), |(i, _)| i);
        let database = DatabasePath(self.0[..end].to_string());
        debug_assert!(check_database(database.as_str(), usize::MAX).is_ok());
        debug_assert!(database.holds(&self.0), "{database} holds {self}");
        database
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rules() {
        assert!(check_device("root.sg.d1", PATH_BYTES_MAX).is_ok());
        assert!(check_device("root.sg.设备-1_a", PATH_BYTES_MAX).is_ok());
        assert!(check_device("root.sg", PATH_BYTES_MAX).is_err());
        assert!(check_database("root.sg", PATH_BYTES_MAX).is_ok());
        assert!(check_database("root", PATH_BYTES_MAX).is_err());
        assert!(check_database("sg.d", PATH_BYTES_MAX).is_err());
        assert!(check_device("root.sg..d", PATH_BYTES_MAX).is_err());
        assert!(check_device("root.sg.d 1", PATH_BYTES_MAX).is_err());
        assert!(check_device("root.sg.d*", PATH_BYTES_MAX).is_err());
        assert!(check_measurement("s1", PATH_BYTES_MAX).is_ok());
        assert!(check_measurement("s.1", PATH_BYTES_MAX).is_err());
        assert!(check_measurement("", PATH_BYTES_MAX).is_err());
        assert!(check_measurement(&"s".repeat(11), 10).is_err());
        assert!(check_device(&format!("root.sg.{}", "d".repeat(20)), 10).is_err());
    }

    #[test]
    fn the_types_parse_by_the_rules_and_know_containment() {
        let device = DevicePath::parse("root.sg.d1.x", PATH_BYTES_MAX).unwrap();
        assert_eq!(device.level1_database().as_str(), "root.sg");
        let database = DatabasePath::parse("root.sg", PATH_BYTES_MAX).unwrap();
        assert!(database.holds(device.as_str()));
        assert!(!database.holds("root.sgx.d1"));
        assert!(
            !database.holds("root.sg"),
            "a database does not hold itself"
        );
        assert!(is_under("root.sg.d1", "root.sg") && !is_under("root.s", "root.sg"));
        let e = DevicePath::parse("root.sg", PATH_BYTES_MAX).unwrap_err();
        assert_eq!(e.path, "root.sg");
        assert!(
            e.to_string().contains("needs a database and a device name"),
            "{e}"
        );
        assert!(Measurement::parse("s.1", PATH_BYTES_MAX).is_err());
        assert_eq!(
            Measurement::parse("温度", PATH_BYTES_MAX)
                .unwrap()
                .to_string(),
            "温度"
        );
    }
}
