//! The IoTDB tree-model path rules, in one place (design §2): a path is `root` followed by
//! dot-separated components; a component is a non-empty run of ASCII letters and digits, `_`,
//! `-`, or non-ASCII characters (IoTDB admits e.g. Chinese node names); a database has at least
//! one component after `root`, a device at least two; a measurement is one component. The
//! session, the DataNode's tablet check and the ConfigNode all judge paths with these functions,
//! so a path one of them admits is never refused by another for its shape.

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
}
