//! IoTDB's table model, kept on the tree (design §2): the names and the one mapping every node
//! must agree on.
//!
//! - A table database `x` is the tree database `root.x`.
//! - A table `t` of it holds devices, each one tuple of TAG values; the device is the tree device
//!   `root.x.t.<one segment per tag>`, and the table's FIELD columns are that device's series. So
//!   a table write is a tree write (lease gate, 536, relay, atomic per region) and a table's
//!   points are stored, replicated, compacted and verified as every other series.
//! - ATTRIBUTE values belong to a device, not to a point; the ConfigNode keeps them with the
//!   table's schema, last write wins.
//!
//! A tag segment is `-` followed by the value with every byte that is not an ASCII letter or
//! digit, `-` or non-ASCII written `_XX` (upper-case hex) and `_` written `__`; a null tag is
//! `-_`. Trailing null tags are left out, so a TAG column added later leaves the devices written
//! before it where they are (their new tag is null), as IoTDB identifies them. No column name
//! starts with `-`, so a tag segment never names a series.

use std::collections::BTreeMap;

use crate::path::check_component;
use crate::DataType;

/// The time column every table has, first.
pub const TIME_COLUMN: &str = "time";
/// Most columns in one table (TAG, ATTRIBUTE and FIELD together).
pub const COLUMNS_MAX: usize = 1024;
/// Longest ATTRIBUTE value, in bytes.
pub const ATTRIBUTE_BYTES_MAX: usize = 4096;

/// What a column is to its table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Category {
    /// Part of the device's identity (IoTDB's TAG, formerly ID).
    Tag,
    /// A property of the device, not of a point: the last value written holds for every row.
    Attribute,
    /// A value per point (IoTDB's FIELD, formerly MEASUREMENT): a series of each device.
    Field,
}

impl Category {
    /// Every category.
    pub const ALL: [Category; 3] = [Category::Tag, Category::Attribute, Category::Field];

    /// IoTDB's `ColumnCategory` byte (a tablet's `columnCategories`): TAG 0, FIELD 1,
    /// ATTRIBUTE 2.
    pub fn wire(self) -> u8 {
        match self {
            Category::Tag => 0,
            Category::Field => 1,
            Category::Attribute => 2,
        }
    }

    /// The category of a `columnCategories` value, whatever integer type carries it.
    pub fn from_wire(code: impl Into<i64>) -> Option<Category> {
        let code = code.into();
        Category::ALL
            .into_iter()
            .find(|c| i64::from(c.wire()) == code)
    }

    /// The name `DESC` shows.
    pub fn name(self) -> &'static str {
        match self {
            Category::Tag => "TAG",
            Category::Attribute => "ATTRIBUTE",
            Category::Field => "FIELD",
        }
    }

    /// The category a `CREATE TABLE` column names, IoTDB's older words included
    /// (case-insensitive).
    pub fn parse(word: &str) -> Option<Category> {
        match word.to_ascii_uppercase().as_str() {
            "TAG" | "ID" => Some(Category::Tag),
            "ATTRIBUTE" => Some(Category::Attribute),
            "FIELD" | "MEASUREMENT" => Some(Category::Field),
            _ => None,
        }
    }
}

/// One column of a table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableColumn {
    /// Its name (lower case).
    pub name: String,
    /// TAG, ATTRIBUTE or FIELD.
    pub category: Category,
    /// Its type; STRING for TAG and ATTRIBUTE columns.
    pub data_type: DataType,
}

/// A table's schema.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableSchema {
    /// Its name (lower case).
    pub name: String,
    /// Its columns in the order created, `time` not among them.
    pub columns: Vec<TableColumn>,
    /// Points older than now minus this are not read; `None` is IoTDB's INF.
    pub ttl_ms: Option<i64>,
}

impl TableSchema {
    /// The column named `name`.
    pub fn column(&self, name: &str) -> Option<&TableColumn> {
        self.columns.iter().find(|c| c.name == name)
    }

    /// The TAG columns, in table order.
    pub fn tags(&self) -> impl Iterator<Item = &TableColumn> {
        self.of(Category::Tag)
    }

    /// The columns of one category, in table order.
    pub fn of(&self, category: Category) -> impl Iterator<Item = &TableColumn> {
        self.columns.iter().filter(move |c| c.category == category)
    }
}

/// One device of a table: its tag values (trailing nulls left out, or not) and its attributes.
pub type DeviceAttributes = (Vec<Option<String>>, BTreeMap<String, String>);

/// A table as the ConfigNode shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableView {
    /// Its schema.
    pub schema: TableSchema,
    /// The metadata version it was created at: its incarnation. A table dropped and created
    /// again under the same name has another, and a write derived from the schema of one
    /// carries it (the region and the ConfigNode refuse it for any other).
    pub created_version: u64,
    /// Its devices that have attributes (when asked for).
    pub devices: Vec<DeviceAttributes>,
}

/// Whether `name` may name a table or a column: a tree path component that does not start with
/// `-` (which starts tag segments) and is not `time`.
pub fn check_name(name: &str) -> Result<(), String> {
    check_component(name).map_err(|reason| format!("{name:?}: {reason}"))?;
    if name.starts_with('-') {
        return Err(format!("{name:?}: a name may not start with '-'"));
    }
    if name.eq_ignore_ascii_case(TIME_COLUMN) {
        return Err(format!("{name:?} is the time column's name"));
    }
    Ok(())
}

/// The tree database of the table database `name`.
pub fn database_path(name: &str) -> String {
    format!("root.{name}")
}

/// The tag values that identify a device: `tags` without its trailing nulls, so that a TAG
/// column added later leaves the devices written before it as they were.
pub fn identifying_tags<T>(tags: &[Option<T>]) -> &[Option<T>] {
    let kept = tags.iter().rposition(Option::is_some).map_or(0, |i| i + 1);
    &tags[..kept]
}

/// The tree device of the table `table` of the tree database `database` for one tuple of tag
/// values (trailing nulls left out).
pub fn device_path(database: &str, table: &str, tags: &[Option<&str>]) -> String {
    let mut path = format!("{database}.{table}");
    for tag in identifying_tags(tags) {
        path.push_str(".-");
        match tag {
            Some(value) => escape(value, &mut path),
            None => path.push('_'),
        }
    }
    path
}

/// The tag values of a tree device of the table (`tags` of them, nulls at the end filled in),
/// or `None` when `device` is not a device of that table with at most `tags` tags.
pub fn device_tags(
    database: &str,
    table: &str,
    device: &str,
    tags: usize,
) -> Option<Vec<Option<String>>> {
    let rest = device
        .strip_prefix(database)?
        .strip_prefix('.')?
        .strip_prefix(table)?;
    let mut values = Vec::with_capacity(tags);
    if !rest.is_empty() {
        for segment in rest.strip_prefix('.')?.split('.') {
            values.push(unescape(segment.strip_prefix('-')?)?);
        }
    }
    if values.len() > tags {
        return None;
    }
    values.resize(tags, None);
    Some(values)
}

fn escape(value: &str, out: &mut String) {
    for (i, c) in value.char_indices() {
        match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '-' => out.push(c),
            '_' => out.push_str("__"),
            c if !c.is_ascii() => out.push_str(&value[i..i + c.len_utf8()]),
            c => out.push_str(&format!("_{:02X}", c as u32)),
        }
    }
}

/// The value of an escaped segment (without its `-`); `Some(None)` for a null tag.
fn unescape(segment: &str) -> Option<Option<String>> {
    if segment == "_" {
        return Some(None);
    }
    let mut out = String::with_capacity(segment.len());
    let mut chars = segment.chars();
    while let Some(c) = chars.next() {
        if c != '_' {
            out.push(c);
            continue;
        }
        match chars.next()? {
            '_' => out.push('_'),
            high => {
                let low = chars.next()?;
                let byte = u8::from_str_radix(&format!("{high}{low}"), 16).ok()?;
                if !byte.is_ascii() {
                    return None;
                }
                out.push(byte as char);
            }
        }
    }
    Some(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path::check_device;

    #[test]
    fn devices_round_trip_every_tag_value() {
        let values: [&[Option<&str>]; 7] = [
            &[],
            &[Some("id:0")],
            &[Some("a_b"), None, Some("")],
            &[Some("北京"), Some("x.y z")],
            &[None, Some("__")],
            &[Some("-"), Some("_41")],
            &[Some("a"), None, None],
        ];
        for tags in values {
            let device = device_path("root.db", "t", tags);
            check_device(&device, 1024).unwrap_or_else(|e| panic!("{device}: {e}"));
            let back = device_tags("root.db", "t", &device, 3).expect("a device of the table");
            let expected: Vec<Option<String>> = tags
                .iter()
                .map(|t| t.map(str::to_string))
                .chain(std::iter::repeat(None))
                .take(3)
                .collect();
            assert_eq!(back, expected, "{device}");
        }
    }

    #[test]
    fn trailing_null_tags_name_the_same_device() {
        assert_eq!(
            device_path("root.db", "t", &[Some("a"), None]),
            device_path("root.db", "t", &[Some("a")])
        );
        assert_eq!(device_path("root.db", "t", &[None]), "root.db.t");
        assert_eq!(
            device_path("root.db", "t", &[None, Some("b")]),
            "root.db.t.-_.-b"
        );
    }

    #[test]
    fn other_devices_are_not_the_tables() {
        assert_eq!(device_tags("root.db", "t", "root.db.t2.-a", 1), None);
        assert_eq!(device_tags("root.db", "t", "root.db.t.a", 1), None);
        assert_eq!(device_tags("root.db", "t", "root.db.t.-a.-b", 1), None);
        assert_eq!(device_tags("root.db", "t", "root.db.t.-_4", 1), None);
    }

    #[test]
    fn names_and_categories() {
        assert!(check_name("temperature").is_ok());
        assert!(check_name("-x").is_err());
        assert!(check_name("Time").is_err());
        assert!(check_name("a.b").is_err());
        assert_eq!(Category::parse("id"), Some(Category::Tag));
        assert_eq!(Category::parse("MEASUREMENT"), Some(Category::Field));
        for c in Category::ALL {
            assert_eq!(Category::from_wire(c.wire()), Some(c));
            assert_eq!(Category::parse(c.name()), Some(c));
        }
    }
}
