//! The tree model's statements that define the schema and administer the cluster: CREATE,
//! DROP, DELETE (of a database, series or points), ALTER USER, SET and UNSET TTL, REMOVE
//! DATANODE. INSERT, SELECT and SHOW are the parent module's.

use super::{Literal, ParseError, Parser, PathKind, Statement, TokenKind};

impl Parser<'_> {
    /// `DROP USER name` or `DROP DATABASE path`.
    pub(super) fn drop(&mut self) -> Result<Statement, ParseError> {
        self.expect_keyword("DROP")?;
        if self.eat_keyword("USER") {
            let name = self.user_name()?;
            return Ok(Statement::DropUser { name });
        }
        self.expect_keyword("DATABASE")?;
        let database = self.path(PathKind::Database)?;
        Ok(Statement::DropDatabase { database })
    }

    /// `DELETE DATABASE path`, `DELETE FROM pattern, ... [WHERE time ...]` or `DELETE
    /// TIMESERIES path`.
    pub(super) fn delete(&mut self) -> Result<Statement, ParseError> {
        self.expect_keyword("DELETE")?;
        // IoTDB spells dropping a database DELETE DATABASE (DROP DATABASE since 1.x).
        if self.eat_keyword("DATABASE") {
            let database = self.path(PathKind::Database)?;
            return Ok(Statement::DropDatabase { database });
        }
        if self.eat_keyword("FROM") {
            let mut paths = vec![self.delete_pattern()?];
            while self.eat(&TokenKind::Comma) {
                paths.push(self.delete_pattern()?);
            }
            let range = self.where_clause()?;
            return Ok(Statement::DeleteData { paths, range });
        }
        if !self.eat_keyword("TIMESERIES") {
            return Err(self.error("TIMESERIES, DATABASE or FROM"));
        }
        let path = self.path(PathKind::Series)?;
        Ok(Statement::DeleteTimeseries { path })
    }

    /// `ALTER USER name SET PASSWORD 'password'`.
    pub(super) fn alter_user(&mut self) -> Result<Statement, ParseError> {
        self.expect_keyword("ALTER")?;
        self.expect_keyword("USER")?;
        let name = self.user_name()?;
        self.expect_keyword("SET")?;
        self.expect_keyword("PASSWORD")?;
        let password = self.password()?;
        Ok(Statement::AlterUserPassword { name, password })
    }

    /// `SET TTL TO path milliseconds`.
    pub(super) fn set_ttl(&mut self) -> Result<Statement, ParseError> {
        self.expect_keyword("SET")?;
        self.expect_keyword("TTL")?;
        self.expect_keyword("TO")?;
        let database = self.path(PathKind::Database)?;
        let at = self.next;
        match self.number("a TTL in milliseconds")? {
            Literal::Integer(ttl_ms) => Ok(Statement::SetTtl { database, ttl_ms }),
            _ => Err(Self::error_at(
                &self.tokens[at],
                format!(
                    "expected an integer TTL in milliseconds, found '{}'",
                    self.tokens[at].text
                ),
            )),
        }
    }

    /// `UNSET TTL TO path` (or `FROM`).
    pub(super) fn unset_ttl(&mut self) -> Result<Statement, ParseError> {
        self.expect_keyword("UNSET")?;
        self.expect_keyword("TTL")?;
        // IoTDB 0.x wrote FROM, 1.x writes TO; both mean the same.
        if !self.eat_keyword("TO") && !self.eat_keyword("FROM") {
            return Err(self.error("TO or FROM"));
        }
        let database = self.path(PathKind::Database)?;
        Ok(Statement::UnsetTtl { database })
    }

    /// `REMOVE DATANODE id`.
    pub(super) fn remove_data_node(&mut self) -> Result<Statement, ParseError> {
        self.expect_keyword("REMOVE")?;
        self.expect_keyword("DATANODE")?;
        let at = self.next;
        match self.number("a DataNode id")? {
            Literal::Integer(id) if id > 0 => Ok(Statement::RemoveDataNode {
                data_node_id: id as u64,
            }),
            _ => Err(Self::error_at(
                &self.tokens[at],
                format!(
                    "expected a DataNode id (SHOW CLUSTER), found '{}'",
                    self.tokens[at].text
                ),
            )),
        }
    }

    /// A user name: one word of letters, digits and `_`.
    fn user_name(&mut self) -> Result<String, ParseError> {
        match self.peek_kind() {
            Some(TokenKind::Word(w))
                if !w.is_empty() && w.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') =>
            {
                let name = w.clone();
                self.next += 1;
                Ok(name)
            }
            _ => Err(self.error("a user name (letters, digits, _)")),
        }
    }

    /// A quoted password.
    fn password(&mut self) -> Result<String, ParseError> {
        match self.peek_kind() {
            Some(TokenKind::Str(s)) => {
                let password = s.clone();
                self.next += 1;
                Ok(password)
            }
            _ => Err(self.error("a quoted password like 'secret'")),
        }
    }

    /// `CREATE USER name 'password'`, `CREATE DATABASE path` or `CREATE TIMESERIES path
    /// [(alias)] [WITH DATATYPE=]type [ENCODING=... COMPRESSOR=...] [TAGS(...)] [ATTRIBUTES(...)]`.
    pub(super) fn create(&mut self) -> Result<Statement, ParseError> {
        self.expect_keyword("CREATE")?;
        if self.eat_keyword("USER") {
            let name = self.user_name()?;
            let password = self.password()?;
            return Ok(Statement::CreateUser { name, password });
        }
        if self.eat_keyword("DATABASE") {
            let database = self.path(PathKind::Database)?;
            return Ok(Statement::CreateDatabase { database });
        }
        if !self.eat_keyword("TIMESERIES") {
            return Err(self.error("DATABASE, TIMESERIES or USER"));
        }
        let path = self.path(PathKind::Series)?;
        let mut meta = common::views::SeriesMeta::default();
        if self.eat(&TokenKind::LeftParen) {
            meta.alias = Some(self.measurement()?);
            self.expect(&TokenKind::RightParen, "')'")?;
        }
        let data_type = if self.eat_keyword("WITH") {
            self.expect_keyword("DATATYPE")?;
            self.expect(&TokenKind::Equal, "'='")?;
            self.data_type("a data type")?
        } else {
            self.data_type("WITH or a data type")?
        };
        let (encoding, compressor) = self.codec_attributes()?;
        while self.peek().is_some() {
            let (slot, name) = if self.is_keyword("TAGS") {
                (&mut meta.tags, "TAGS")
            } else if self.is_keyword("ATTRIBUTES") {
                (&mut meta.attributes, "ATTRIBUTES")
            } else {
                return Err(self.error("TAGS, ATTRIBUTES or end of statement"));
            };
            if !slot.is_empty() {
                return Err(self.error(&format!("{name} at most once")));
            }
            self.next += 1;
            *slot = self.key_values()?;
        }
        Ok(Statement::CreateTimeseries {
            path,
            data_type,
            encoding,
            compressor,
            meta,
        })
    }
}
