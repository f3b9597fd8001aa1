//! The generated sections of the operating docs: a markdown table renderer, and the check that
//! a document holds a section as generated, between `<!-- generated: NAME -->` and the next
//! `<!-- end -->`. The nodes' tests render their tables of configuration keys and metrics from
//! the one declaration of each and call [`check_generated_section`], so the docs cannot drift
//! from the code; with [`BLESS_VAR`]`=1` the test rewrites the section instead of failing.

use std::path::Path;

/// Set to `1` to have [`check_generated_section`] rewrite a stale section instead of failing.
pub const BLESS_VAR: &str = "FENCEPOST_BLESS";

/// The line that closes a generated section.
pub const END_MARKER: &str = "<!-- end -->";

/// Serialises the read-modify-write of a blessing: the tests of one crate run on parallel
/// threads, and two of them may rewrite sections of the same file.
static BLESSING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A markdown table: `header`, the separator line, then one line per row. A cell's `|` is
/// escaped and its line breaks become spaces, so every row stays one line.
pub fn markdown_table<const N: usize>(
    header: [&str; N],
    rows: impl IntoIterator<Item = [String; N]>,
) -> String {
    let line = |cells: &mut dyn Iterator<Item = String>| {
        let cells: Vec<String> = cells.collect();
        format!("| {} |\n", cells.join(" | "))
    };
    let mut out = line(&mut header.iter().map(|h| h.to_string()));
    out += &line(&mut header.iter().map(|_| "---".to_string()));
    for row in rows {
        out += &line(&mut row.into_iter().map(|cell| table_cell(&cell)));
    }
    out
}

/// One line of text fit for a table cell: lines joined by a space, `|` escaped.
fn table_cell(text: &str) -> String {
    let joined: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    joined.join(" ").replace('|', "\\|")
}

/// The opening marker of the generated section `name`.
pub fn start_marker(name: &str) -> String {
    format!("<!-- generated: {name} -->")
}

/// Checks that the document at `path` holds `body` verbatim as its generated section `name`
/// (between the line [`start_marker`]`(name)` and the next [`END_MARKER`] line). When it does
/// not and [`BLESS_VAR`] is `1`, rewrites the section and succeeds; otherwise the error says
/// what differs and how to regenerate.
pub fn check_generated_section(path: &Path, name: &str, body: &str) -> Result<(), String> {
    sync_section(
        path,
        name,
        body,
        std::env::var(BLESS_VAR).as_deref() == Ok("1"),
    )
}

/// [`check_generated_section`], rewriting a stale section when `bless`.
fn sync_section(path: &Path, name: &str, body: &str, bless: bool) -> Result<(), String> {
    let _guard = BLESSING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    let (before, held, after) = split_section(&text, name)
        .ok_or_else(|| format!("{} has no section {name}", path.display()))?;
    if held == body {
        return Ok(());
    }
    if bless {
        std::fs::write(path, format!("{before}{body}{after}"))
            .map_err(|e| format!("writing {}: {e}", path.display()))?;
        return Ok(());
    }
    let first_difference = held
        .lines()
        .zip(body.lines())
        .position(|(h, b)| h != b)
        .unwrap_or(held.lines().count().min(body.lines().count()));
    Err(format!(
        "the section {name} of {} is not what the code declares (first difference at its line \
         {}); regenerate it with {BLESS_VAR}=1 and the same test, e.g. \
         `{BLESS_VAR}=1 cargo test -p datanode -p confignode --lib operating_md`",
        path.display(),
        first_difference + 1,
    ))
}

/// `text` cut around the section `name`: what precedes its content (the start marker line
/// included), the content, and what follows (from the end marker on).
fn split_section<'a>(text: &'a str, name: &str) -> Option<(&'a str, &'a str, &'a str)> {
    let start = format!("{}\n", start_marker(name));
    let content_start = text.find(&start)? + start.len();
    let content = &text[content_start..];
    let content_len = if content.starts_with(END_MARKER) {
        0
    } else {
        content.find(&format!("\n{END_MARKER}"))? + 1
    };
    let content_end = content_start + content_len;
    Some((
        &text[..content_start],
        &text[content_start..content_end],
        &text[content_end..],
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_keeps_every_row_on_one_line() {
        let table = markdown_table(
            ["a", "b"],
            [["x | y".to_string(), " one\n two \n".to_string()]],
        );
        assert_eq!(table, "| a | b |\n| --- | --- |\n| x \\| y | one two |\n");
    }

    #[test]
    fn a_section_is_checked_and_blessed_between_its_markers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("doc.md");
        let doc = "# T\n<!-- generated: t -->\nold\n<!-- end -->\ntail\n";
        std::fs::write(&path, doc).unwrap();
        assert_eq!(split_section(doc, "t").unwrap().1, "old\n");
        let empty = "<!-- generated: e -->\n<!-- end -->\n";
        assert_eq!(split_section(empty, "e").unwrap().1, "");
        assert!(sync_section(&path, "t", "old\n", false).is_ok());
        let e = sync_section(&path, "t", "new\n", false).unwrap_err();
        assert!(e.contains("FENCEPOST_BLESS=1"), "{e}");
        assert!(sync_section(&path, "nope", "old\n", true)
            .unwrap_err()
            .contains("no section nope"));
        assert!(sync_section(&path, "t", "new\n", true).is_ok());
        assert!(sync_section(&path, "t", "new\n", false).is_ok());
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "# T\n<!-- generated: t -->\nnew\n<!-- end -->\ntail\n"
        );
    }
}
