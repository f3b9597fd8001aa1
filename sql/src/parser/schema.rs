//! Schema browsing: `COUNT TIMESERIES [pattern] [GROUP BY LEVEL = n]`, `COUNT DEVICES [pattern]`,
//! `SHOW CHILD PATHS [pattern]` and `SHOW CHILD NODES [pattern]`, as IoTDB writes them.

use super::{Literal, ParseError, Parser, Statement};

impl Parser<'_> {
    /// `COUNT TIMESERIES ...` or `COUNT DEVICES ...`.
    pub(super) fn count(&mut self) -> Result<Statement, ParseError> {
        self.expect_keyword("COUNT")?;
        if self.eat_keyword("DEVICES") {
            let pattern = self.show_pattern()?;
            return Ok(Statement::CountDevices { pattern });
        }
        if !self.eat_keyword("TIMESERIES") {
            return Err(self.error("TIMESERIES or DEVICES"));
        }
        let pattern = self.show_pattern()?;
        let level = if self.eat_keyword("GROUP") {
            self.expect_keyword("BY")?;
            self.expect_keyword("LEVEL")?;
            self.expect(&super::TokenKind::Equal, "'=' after LEVEL")?;
            let expected = "a level (0 is root)";
            match self.number(expected)? {
                Literal::Integer(n) if n >= 0 => Some(usize::try_from(n).unwrap_or(usize::MAX)),
                _ => return Err(self.error(expected)),
            }
        } else {
            None
        };
        Ok(Statement::CountTimeseries { pattern, level })
    }

    /// The rest of `SHOW CHILD PATHS|NODES [pattern]`, after CHILD.
    pub(super) fn show_child(&mut self) -> Result<Statement, ParseError> {
        let nodes = if self.eat_keyword("NODES") {
            true
        } else if self.eat_keyword("PATHS") {
            false
        } else {
            return Err(self.error("PATHS or NODES"));
        };
        let pattern = self.show_pattern()?;
        Ok(Statement::ShowChild { pattern, nodes })
    }
}
