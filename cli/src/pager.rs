//! Showing a statement's rows as they come, a page at a time: the CLI never holds a whole
//! result. In a table, every `max_display` rows are one boxed table, as IoTDB's cli prints
//! them; at a terminal it then waits (ENTER shows more, `q` stops the query, which the DataNode
//! then ends), elsewhere it goes on. JSON is one object per statement, so its rows are gathered.

use std::io::{self, Write};

use crate::exec::{ExecError, Outcome, OutcomeKind, Pages};
use crate::output::{self, Format};

/// How rows are shown.
#[derive(Clone, Copy, Debug)]
pub struct Pager {
    pub format: Format,
    /// Rows of one table; IoTDB's `max_display_num`.
    pub max_display: usize,
    /// Wait for ENTER between tables (stdin is a terminal and statements come from it).
    pub pause: bool,
}

/// IoTDB's cli default for `max_display_num`.
pub const MAX_DISPLAY_DEFAULT: u64 = 1000;

impl Pager {
    /// Shows `pages`; the error that ended them early, if any (the rows before it are shown).
    pub async fn show(&self, mut pages: Pages) -> io::Result<Option<ExecError>> {
        if pages.header.kind == OutcomeKind::Done {
            output::success(self.format, &pages.header)?;
            return Ok(None);
        }
        if self.format == Format::Json {
            let mut rows = Vec::new();
            loop {
                match pages.next_page().await {
                    Ok(Some(page)) => rows.extend(page),
                    Ok(None) => break,
                    Err(e) => return Ok(Some(e)),
                }
            }
            let outcome = Outcome {
                rows,
                ..pages.header
            };
            output::success(self.format, &outcome)?;
            return Ok(None);
        }
        let columns = pages.header.columns.clone();
        let max = self.max_display.max(1);
        let (mut held, mut shown) = (Vec::new(), 0usize);
        let mut failure = None;
        let mut done = false;
        while !done {
            match pages.next_page().await {
                Ok(Some(page)) => held.extend(page),
                Ok(None) => done = true,
                Err(e) => {
                    failure = Some(e);
                    done = true;
                }
            }
            while held.len() >= max || done && !held.is_empty() {
                let rest = held.split_off(held.len().min(max));
                print(&output::boxed(&columns, &held))?;
                shown += held.len();
                held = rest;
                let more = !(done && held.is_empty());
                if more && self.pause && !more_wanted(max)? {
                    // Dropping the pages ends the query on the DataNode.
                    print(&output::footer(shown))?;
                    return Ok(None);
                }
            }
        }
        if shown == 0 {
            print(&output::boxed(&columns, &[]))?;
        }
        print(&output::footer(shown))?;
        Ok(failure)
    }
}

fn print(text: &str) -> io::Result<()> {
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()
}

/// Asks at the terminal whether to show more: ENTER yes, `q` no.
fn more_wanted(max: usize) -> io::Result<bool> {
    print(&format!(
        "Reach the max_display_num = {max}. Press ENTER to show more, input 'q' to quit.\n"
    ))?;
    let mut answer = String::new();
    io::stdin().read_line(&mut answer)?;
    Ok(!answer.trim().eq_ignore_ascii_case("q"))
}
