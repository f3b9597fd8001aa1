//! Running statements: a whole script (`-e`, `-f`) or the interactive loop over stdin.
//!
//! Every statement is run even when an earlier one failed (IoTDB's cli with `-e` does the same);
//! the [`Runner`] remembers whether any failed, for the exit status. `quit` / `exit` stop.

use std::io::{self, IsTerminal, Write};

use session::Session;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt};

use crate::exec::{self, ExecError};
use crate::output::{self, Format};
use crate::pager::{Pager, MAX_DISPLAY_DEFAULT};
use sql::{self, lexer::advance, Parsed, Position, Statement, STATEMENT_BYTES_MAX};

/// The interactive prompt, printed only when stdin is a terminal.
pub const PROMPT: &str = "fencepost> ";

/// Longest input line read in one piece, in bytes; a longer line is refused as a whole.
pub const LINE_BYTES_MAX: usize = STATEMENT_BYTES_MAX;

/// Whether to go on after a statement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    /// Run the next statement.
    Continue,
    /// `quit` or `exit` was run.
    Quit,
}

/// Runs statements over one session and prints each outcome.
pub struct Runner<'a> {
    session: &'a Session,
    format: Format,
    pager: Pager,
    failed: bool,
}

impl<'a> Runner<'a> {
    /// A runner printing in `format`.
    pub fn new(session: &'a Session, format: Format) -> Runner<'a> {
        Runner {
            session,
            format,
            pager: Pager {
                format,
                max_display: MAX_DISPLAY_DEFAULT as usize,
                pause: false,
            },
            failed: false,
        }
    }

    /// Rows of one table at most, and whether to wait for ENTER after each (at a terminal).
    pub fn paging(mut self, max_display: usize, pause: bool) -> Runner<'a> {
        self.pager.max_display = max_display;
        self.pager.pause = pause;
        self
    }

    /// True when any statement failed so far.
    pub fn failed(&self) -> bool {
        self.failed
    }

    /// Runs every statement of `text`, whose first character sits at `base`.
    pub async fn run_text(&mut self, text: &str, base: Position) -> io::Result<Flow> {
        for parsed in sql::parse_script(text, base) {
            if self.run_parsed(parsed).await? == Flow::Quit {
                return Ok(Flow::Quit);
            }
        }
        Ok(Flow::Continue)
    }

    async fn run_parsed(&mut self, parsed: Parsed) -> io::Result<Flow> {
        match parsed.result {
            Ok(Statement::Quit) => return Ok(Flow::Quit),
            Ok(_) => {}
            Err(e) => return self.report(&ExecError::Parse(e)).map(|()| Flow::Continue),
        }
        let failure = match exec::execute(self.session, &parsed.text).await {
            Ok(pages) => self.pager.show(pages).await?,
            Err(e) => Some(e),
        };
        if let Some(e) = failure {
            self.report(&e)?;
        }
        Ok(Flow::Continue)
    }

    fn report(&mut self, error: &ExecError) -> io::Result<()> {
        self.failed = true;
        output::failure(self.format, error.code(), &error.to_string())
    }

    /// Reports a failure that is no statement's (an unreadable line), counting it as failed.
    fn refuse(&mut self, position: Position, message: String) -> io::Result<()> {
        self.report(&ExecError::Parse(sql::ParseError::new(position, message)))
    }
}

/// Reads statements from `input` until end of input or `quit`: a statement ends with `;` and may
/// span lines; what is left without `;` at the end of input is run too. `prompt` prints
/// [`PROMPT`] before each new statement.
pub async fn interactive<R: AsyncBufRead + Unpin>(
    runner: &mut Runner<'_>,
    mut input: R,
    prompt: bool,
) -> io::Result<()> {
    let mut buffer = String::new();
    // Where buffer[0] sits in the whole input, so errors name the input's line and column.
    let mut base = Position::START;
    loop {
        if buffer.trim().is_empty() {
            base = advance(base, &buffer);
            buffer.clear();
            if prompt {
                let mut out = io::stdout().lock();
                write!(out, "{PROMPT}")?;
                out.flush()?;
            }
        }
        let line = match read_line(&mut input).await? {
            Line::End => break,
            Line::Text(line) => line,
            Line::Refused(message) => {
                runner.refuse(advance(base, &buffer), message)?;
                base = advance(advance(base, &buffer), "\n");
                buffer.clear();
                continue;
            }
        };
        if buffer.trim().is_empty() && is_quit(&line) {
            return Ok(());
        }
        buffer.push_str(&line);
        let complete = sql::complete_prefix_bytes(&buffer);
        if complete > 0 {
            let flow = runner.run_text(&buffer[..complete], base).await?;
            base = advance(base, &buffer[..complete]);
            buffer.drain(..complete);
            if flow == Flow::Quit {
                return Ok(());
            }
        }
        if buffer.len() > STATEMENT_BYTES_MAX {
            let message = format!("statement over the limit of {STATEMENT_BYTES_MAX} bytes");
            runner.refuse(base, message)?;
            base = advance(base, &buffer);
            buffer.clear();
        }
    }
    if !buffer.trim().is_empty() {
        runner.run_text(&buffer, base).await?;
    }
    Ok(())
}

/// A bare `quit` or `exit` (any case, optional `;`) on a line of its own.
fn is_quit(line: &str) -> bool {
    let word = line.trim().trim_end_matches(';').trim_end();
    word.eq_ignore_ascii_case("quit") || word.eq_ignore_ascii_case("exit")
}

enum Line {
    /// A line with its `\n` (none on the last line of the input).
    Text(String),
    /// The line was too long or not UTF-8; it has been skipped.
    Refused(String),
    /// End of input.
    End,
}

/// One line of at most [`LINE_BYTES_MAX`] bytes.
async fn read_line<R: AsyncBufRead + Unpin>(input: &mut R) -> io::Result<Line> {
    let mut bytes = Vec::new();
    let limit = LINE_BYTES_MAX as u64 + 1;
    let n = (&mut *input)
        .take(limit)
        .read_until(b'\n', &mut bytes)
        .await?;
    if n == 0 {
        return Ok(Line::End);
    }
    if bytes.len() > LINE_BYTES_MAX {
        skip_line(input).await?;
        return Ok(Line::Refused(format!(
            "line over the limit of {LINE_BYTES_MAX} bytes"
        )));
    }
    match String::from_utf8(bytes) {
        Ok(line) => Ok(Line::Text(line)),
        Err(_) => Ok(Line::Refused("the line is not UTF-8".into())),
    }
}

/// Consumes input up to and including the next `\n`, holding at most one buffer at a time.
async fn skip_line<R: AsyncBufRead + Unpin>(input: &mut R) -> io::Result<()> {
    loop {
        let buffer = input.fill_buf().await?;
        if buffer.is_empty() {
            return Ok(());
        }
        match buffer.iter().position(|b| *b == b'\n') {
            Some(i) => {
                input.consume(i + 1);
                return Ok(());
            }
            None => {
                let n = buffer.len();
                input.consume(n);
            }
        }
    }
}

/// True when stdin is a terminal (then the prompt is shown).
pub fn stdin_is_terminal() -> bool {
    io::stdin().is_terminal()
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn lines(mut input: &[u8]) -> Vec<String> {
        let mut out = Vec::new();
        loop {
            match read_line(&mut input).await.expect("reads") {
                Line::End => return out,
                Line::Text(line) => out.push(line),
                Line::Refused(why) => out.push(format!("refused: {why}")),
            }
        }
    }

    #[tokio::test]
    async fn lines_keep_their_newline_and_the_last_may_lack_one() {
        assert_eq!(lines(b"a;\nb\nc").await, ["a;\n", "b\n", "c"]);
        assert_eq!(lines(b"").await, Vec::<String>::new());
    }

    #[tokio::test]
    async fn an_overlong_or_non_utf8_line_is_refused_and_skipped() {
        let mut input = vec![b'x'; LINE_BYTES_MAX + 10];
        input.extend_from_slice(b"\nnext\n\xff\xfe\nlast");
        assert_eq!(
            lines(&input).await,
            [
                format!("refused: line over the limit of {LINE_BYTES_MAX} bytes"),
                "next\n".to_string(),
                "refused: the line is not UTF-8".to_string(),
                "last".to_string(),
            ]
        );
    }

    #[test]
    fn quit_and_exit_in_any_case_with_or_without_semicolon() {
        for line in ["quit\n", "EXIT;\n", "  Quit ; \n", "exit"] {
            assert!(is_quit(line), "{line:?}");
        }
        for line in ["quitter\n", "SHOW DATABASES; quit\n", "\n"] {
            assert!(!is_quit(line), "{line:?}");
        }
    }
}
