//! The lexer: source text → tokens with their line and column. It never fails as a whole: a
//! malformed token becomes [`TokenKind::Error`] so the statement holding it can be reported and
//! the following statements still run.

use super::Position;

/// What a token is.
#[derive(Clone, Debug, PartialEq)]
pub enum TokenKind {
    /// A keyword, a name or a dotted path (`root.sg.d1.s1`, `root.**`); keywords are words
    /// compared case-insensitively by the parser.
    Word(String),
    /// Digits, with an optional fraction and exponent; the sign is a separate token.
    Number(String),
    /// A duration: digits and a unit, one pair or more (`10ms`, `1h30m`); the units are
    /// IoTDB's ([`DURATION_UNITS`]), any case.
    Duration(String),
    /// A date-time literal as written (`2024-01-01`, `2024/01/01 08:00:00.123+08:00`): its shape
    /// only, see [`datetime_len`]; [`crate::time::datetime_ms`] checks the fields.
    DateTime(String),
    /// A quoted string, quotes removed and doubled quotes collapsed.
    Str(String),
    /// `(`
    LeftParen,
    /// `)`
    RightParen,
    /// `[`
    LeftBracket,
    /// `]`
    RightBracket,
    /// `,`
    Comma,
    /// `;`: ends a statement.
    Semicolon,
    /// `=` or `==`
    Equal,
    /// `!=` or `<>`
    NotEqual,
    /// `<`
    Less,
    /// `<=`
    LessEqual,
    /// `>`
    Greater,
    /// `>=`
    GreaterEqual,
    /// `*`
    Star,
    /// `-`
    Minus,
    /// `+`
    Plus,
    /// `/`
    Slash,
    /// `%`
    Percent,
    /// Text that is no token; the message says why.
    Error(String),
}

/// A token, where it starts, and the source text it was read from.
#[derive(Clone, Debug, PartialEq)]
pub struct Token {
    /// What it is.
    pub kind: TokenKind,
    /// Line and column of its first character.
    pub position: Position,
    /// Byte offset of its first character in the lexed text.
    pub offset: usize,
    /// The source text, for error messages.
    pub text: String,
}

/// Splits `text`, whose first character sits at `base`, into tokens. Whitespace and `--`
/// comments (to the end of the line) separate tokens and are dropped.
pub fn tokenize(text: &str, base: Position) -> Vec<Token> {
    let mut lexer = Lexer {
        text,
        offset: 0,
        position: base,
    };
    let mut tokens = Vec::new();
    while let Some(token) = lexer.next_token() {
        tokens.push(token);
    }
    tokens
}

/// The position just after `text` when it starts at `base`.
pub fn advance(base: Position, text: &str) -> Position {
    let mut position = base;
    for c in text.chars() {
        position = step(position, c);
    }
    position
}

fn step(position: Position, c: char) -> Position {
    if c == '\n' {
        Position {
            line: position.line + 1,
            column: 1,
        }
    } else {
        Position {
            line: position.line,
            column: position.column + 1,
        }
    }
}

struct Lexer<'a> {
    text: &'a str,
    offset: usize,
    position: Position,
}

impl Lexer<'_> {
    fn peek(&self) -> Option<char> {
        self.text[self.offset..].chars().next()
    }

    fn peek_second(&self) -> Option<char> {
        self.text[self.offset..].chars().nth(1)
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.offset += c.len_utf8();
        self.position = step(self.position, c);
        Some(c)
    }

    fn bump_while(&mut self, keep: impl Fn(char) -> bool) {
        while self.peek().is_some_and(&keep) {
            self.bump();
        }
    }

    /// Skips whitespace and `--` comments.
    fn skip_blank(&mut self) {
        loop {
            match (self.peek(), self.peek_second()) {
                (Some(c), _) if c.is_whitespace() => {
                    self.bump();
                }
                (Some('-'), Some('-')) => self.bump_while(|c| c != '\n'),
                _ => return,
            }
        }
    }

    fn next_token(&mut self) -> Option<Token> {
        self.skip_blank();
        let start = self.offset;
        let position = self.position;
        let c = self.bump()?;
        let kind = match c {
            '(' => TokenKind::LeftParen,
            ')' => TokenKind::RightParen,
            '[' => TokenKind::LeftBracket,
            ']' => TokenKind::RightBracket,
            ',' => TokenKind::Comma,
            ';' => TokenKind::Semicolon,
            '*' => TokenKind::Star,
            '-' => TokenKind::Minus,
            '+' => TokenKind::Plus,
            '=' => self.then('=', TokenKind::Equal, TokenKind::Equal),
            '!' => self.then(
                '=',
                TokenKind::NotEqual,
                TokenKind::Error("unexpected character '!' (did you mean '!='?)".into()),
            ),
            '<' if self.peek() == Some('>') => {
                self.bump();
                TokenKind::NotEqual
            }
            // IoTDB's other spellings of AND and OR (`s1 > 0 & s2 > 0`).
            '&' => self.then('&', word("AND"), word("AND")),
            '|' => self.then('|', word("OR"), word("OR")),
            '/' => TokenKind::Slash,
            '%' => TokenKind::Percent,
            '<' => self.then('=', TokenKind::LessEqual, TokenKind::Less),
            '>' => self.then('=', TokenKind::GreaterEqual, TokenKind::Greater),
            '\'' | '"' => self.string(c),
            '`' => self.error_until_blank("backquoted names are not supported"),
            c if c.is_ascii_digit() => self.number(start),
            c if is_word_start(c) => self.word(start),
            _ => TokenKind::Error(format!("unexpected character '{c}'")),
        };
        Some(Token {
            kind,
            position,
            offset: start,
            text: self.text[start..self.offset].to_string(),
        })
    }

    /// `matched` when the next character is `next` (consumed), else `single`.
    fn then(&mut self, next: char, matched: TokenKind, single: TokenKind) -> TokenKind {
        if self.peek() == Some(next) {
            self.bump();
            matched
        } else {
            single
        }
    }

    /// A string quoted with `quote`; a doubled quote stands for one.
    fn string(&mut self, quote: char) -> TokenKind {
        let mut value = String::new();
        loop {
            match self.bump() {
                None => return TokenKind::Error("unterminated string".into()),
                Some(c) if c == quote => {
                    if self.peek() == Some(quote) {
                        self.bump();
                        value.push(quote);
                    } else {
                        return TokenKind::Str(value);
                    }
                }
                Some(c) => value.push(c),
            }
        }
    }

    /// Digits, an optional `.digits`, an optional exponent; a letter right after is an error,
    /// unless the whole is a duration.
    fn number(&mut self, start: usize) -> TokenKind {
        if let Some(len) = datetime_len(&self.text[start..]) {
            return self.datetime(start, len);
        }
        self.bump_while(|c| c.is_ascii_digit());
        if self.peek() == Some('.') {
            self.bump();
            self.bump_while(|c| c.is_ascii_digit());
        }
        if matches!(self.peek(), Some('e' | 'E')) {
            let sign = matches!(self.peek_second(), Some('+' | '-'));
            let digit_at = if sign { 2 } else { 1 };
            if self.text[self.offset..]
                .chars()
                .nth(digit_at)
                .is_some_and(|c| c.is_ascii_digit())
            {
                self.bump();
                if sign {
                    self.bump();
                }
                self.bump_while(|c| c.is_ascii_digit());
            }
        }
        if self.peek().is_some_and(is_word_char) {
            self.bump_while(is_word_char);
            let text = &self.text[start..self.offset];
            if duration_parts(text).is_some() {
                return TokenKind::Duration(text.to_string());
            }
            return TokenKind::Error(format!("invalid number '{text}'"));
        }
        TokenKind::Number(self.text[start..self.offset].to_string())
    }

    /// The date-time literal of `len` bytes at `start` (its first digit already read); a
    /// letter, `.` or `:` right after makes the whole an error.
    fn datetime(&mut self, start: usize, len: usize) -> TokenKind {
        while self.offset < start + len {
            self.bump();
        }
        if self
            .peek()
            .is_some_and(|c| is_word_char(c) || c == '.' || c == ':')
        {
            self.bump_while(|c| is_word_char(c) || c == '.' || c == ':');
            let text = &self.text[start..self.offset];
            return TokenKind::Error(format!("invalid date-time '{text}'"));
        }
        TokenKind::DateTime(self.text[start..self.offset].to_string())
    }

    /// A name, continued by `.` + name characters or `*` into a dotted path.
    fn word(&mut self, start: usize) -> TokenKind {
        loop {
            self.bump_while(is_word_char);
            let dotted = self.peek() == Some('.')
                && self
                    .peek_second()
                    .is_some_and(|c| is_word_char(c) || c == '*');
            if !dotted {
                break;
            }
            self.bump();
            self.bump_while(|c| c == '*');
        }
        TokenKind::Word(self.text[start..self.offset].to_string())
    }

    fn error_until_blank(&mut self, message: &str) -> TokenKind {
        self.bump_while(|c| !c.is_whitespace() && c != ';');
        TokenKind::Error(message.into())
    }
}

/// IoTDB's duration units, lower case: nanoseconds to years (`mo` is a month).
pub const DURATION_UNITS: [&str; 10] = ["ns", "us", "ms", "s", "m", "h", "d", "w", "mo", "y"];

/// A duration's (digits, unit) pairs, the unit lower case; `None` when `text` is not one
/// (digits then a unit of [`DURATION_UNITS`], one pair or more).
pub fn duration_parts(text: &str) -> Option<Vec<(&str, String)>> {
    let mut parts = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit())?;
        let letters = rest[digits..]
            .find(|c: char| !c.is_ascii_alphabetic())
            .map_or(rest.len(), |n| digits + n);
        let unit = rest[digits..letters].to_ascii_lowercase();
        if digits == 0 || !DURATION_UNITS.contains(&unit.as_str()) {
            return None;
        }
        parts.push((&rest[..digits], unit));
        rest = &rest[letters..];
    }
    (!parts.is_empty()).then_some(parts)
}

/// The length in bytes of the date-time literal `text` starts with, if it starts with one, in
/// the shape of IoTDB's `DATETIME_LITERAL`: a date `digits-digits-digits` (or with `/` or `.`,
/// the same both times), optionally followed by `T` or blanks and a time `digits:digits:digits`
/// with an optional `.digits` and a zone (`Z`, `+digits`, `-digits[:digits]`) right after it.
/// Blanks or `T` without a time after them are not part of it. A zone must not run into a
/// letter, so `2024-01-01T00:00:00-1h` is the literal, `-` and a duration.
pub fn datetime_len(text: &str) -> Option<usize> {
    let b = text.as_bytes();
    let digits = |at: usize| digits_at(b, at);
    // `digits sep digits sep digits`, the same separator both times.
    let mut at = digits(0);
    let separator = *b.get(at).filter(|c| matches!(c, b'-' | b'/' | b'.'))?;
    for _ in 0..2 {
        let n = digits(at + 1);
        if at == 0 || b.get(at) != Some(&separator) || n == 0 {
            return None;
        }
        at += 1 + n;
    }
    // `T` or blanks, then `digits:digits:digits[.digits]`.
    let blanks = b[at..]
        .iter()
        .take_while(|c| matches!(c, b' ' | b'\t'))
        .count();
    let gap = match b.get(at) {
        Some(b'T' | b't') => 1,
        _ => blanks,
    };
    let Some(time) = time_len(&b[at + gap..]).filter(|_| gap > 0) else {
        return Some(at);
    };
    at += gap + time;
    Some(at + zone_len(&b[at..]))
}

/// How many ASCII digits `b` has from `at` on.
fn digits_at(b: &[u8], at: usize) -> usize {
    b.get(at..).map_or(0, |rest| {
        rest.iter().take_while(|c| c.is_ascii_digit()).count()
    })
}

/// `digits:digits:digits[.digits]` at the start of `b`.
fn time_len(b: &[u8]) -> Option<usize> {
    let digits = |at: usize| digits_at(b, at);
    let mut at = 0;
    for i in 0..3 {
        let n = digits(at);
        if n == 0 || (i < 2 && b.get(at + n) != Some(&b':')) {
            return None;
        }
        at += n + usize::from(i < 2);
    }
    let fraction = digits(at + 1);
    if b.get(at) == Some(&b'.') && fraction > 0 {
        at += 1 + fraction;
    }
    Some(at)
}

/// `Z`, or `+`/`-` digits with an optional `:digits`, at the start of `b`, when no word
/// character follows; 0 otherwise.
fn zone_len(b: &[u8]) -> usize {
    let digits = |at: usize| digits_at(b, at);
    let len = match b.first() {
        Some(b'Z' | b'z') => 1,
        Some(b'+' | b'-') if digits(1) > 0 => {
            let hours = 1 + digits(1);
            match digits(hours + 1) {
                n if n > 0 && b.get(hours) == Some(&b':') => hours + 1 + n,
                _ => hours,
            }
        }
        _ => return 0,
    };
    let runs_on = b
        .get(len)
        .is_some_and(|&c| c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80);
    if runs_on {
        0
    } else {
        len
    }
}

/// A keyword token written with a symbol (`&` for AND).
fn word(keyword: &str) -> TokenKind {
    TokenKind::Word(keyword.to_string())
}

fn is_word_start(c: char) -> bool {
    c.is_alphabetic() || c == '_'
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<TokenKind> {
        tokenize(text, Position::START)
            .into_iter()
            .map(|t| t.kind)
            .collect()
    }

    fn word(w: &str) -> TokenKind {
        TokenKind::Word(w.into())
    }

    #[test]
    fn paths_numbers_strings_and_symbols() {
        assert_eq!(
            kinds("root.sg.d1.s1 (1.5e-3, -2, 'it''s', \"a\"\"b\") <= >= = < > * ;"),
            vec![
                word("root.sg.d1.s1"),
                TokenKind::LeftParen,
                TokenKind::Number("1.5e-3".into()),
                TokenKind::Comma,
                TokenKind::Minus,
                TokenKind::Number("2".into()),
                TokenKind::Comma,
                TokenKind::Str("it's".into()),
                TokenKind::Comma,
                TokenKind::Str("a\"b".into()),
                TokenKind::RightParen,
                TokenKind::LessEqual,
                TokenKind::GreaterEqual,
                TokenKind::Equal,
                TokenKind::Less,
                TokenKind::Greater,
                TokenKind::Star,
                TokenKind::Semicolon,
            ]
        );
    }

    #[test]
    fn wildcard_paths_and_digit_nodes_stay_one_word() {
        assert_eq!(kinds("root.**"), vec![word("root.**")]);
        assert_eq!(kinds("root.sg.1.s"), vec![word("root.sg.1.s")]);
        assert_eq!(kinds("root.sg."), vec![word("root.sg"), err("'.'")]);
    }

    fn err(found: &str) -> TokenKind {
        TokenKind::Error(format!("unexpected character {found}"))
    }

    #[test]
    fn positions_count_lines_and_columns_from_the_base() {
        let tokens = tokenize("a\n  b -- note\n c", Position { line: 3, column: 5 });
        let at: Vec<(u32, u32)> = tokens
            .iter()
            .map(|t| (t.position.line, t.position.column))
            .collect();
        assert_eq!(at, vec![(3, 5), (4, 3), (5, 2)]);
        assert_eq!(
            advance(Position::START, "ab\ncd"),
            Position { line: 2, column: 3 }
        );
    }

    #[test]
    fn malformed_tokens_become_errors() {
        assert_eq!(
            kinds("'open"),
            vec![TokenKind::Error("unterminated string".into())]
        );
        assert_eq!(
            kinds("12ab x"),
            vec![TokenKind::Error("invalid number '12ab'".into()), word("x")]
        );
        assert_eq!(kinds("a # b"), vec![word("a"), err("'#'"), word("b")]);
        assert_eq!(
            kinds("1e"),
            vec![TokenKind::Error("invalid number '1e'".into())]
        );
        assert_eq!(
            kinds("1.5s 10mss"),
            vec![
                TokenKind::Error("invalid number '1.5s'".into()),
                TokenKind::Error("invalid number '10mss'".into())
            ]
        );
    }

    #[test]
    fn durations_and_brackets_of_group_by() {
        let duration = |d: &str| TokenKind::Duration(d.into());
        assert_eq!(
            kinds("([0, 10), 10ms, 1h30M, 2mo)"),
            vec![
                TokenKind::LeftParen,
                TokenKind::LeftBracket,
                TokenKind::Number("0".into()),
                TokenKind::Comma,
                TokenKind::Number("10".into()),
                TokenKind::RightParen,
                TokenKind::Comma,
                duration("10ms"),
                TokenKind::Comma,
                duration("1h30M"),
                TokenKind::Comma,
                duration("2mo"),
                TokenKind::RightParen,
            ]
        );
        assert_eq!(
            kinds("(0, 5]"),
            vec![
                TokenKind::LeftParen,
                TokenKind::Number("0".into()),
                TokenKind::Comma,
                TokenKind::Number("5".into()),
                TokenKind::RightBracket,
            ]
        );
        assert_eq!(
            duration_parts("1h30m"),
            Some(vec![("1", "h".to_string()), ("30", "m".to_string())])
        );
        assert_eq!(duration_parts("h"), None);
        assert_eq!(duration_parts("10"), None);
        assert_eq!(duration_parts("10x"), None);
    }

    #[test]
    fn date_time_literals_are_one_token() {
        let at = |d: &str| TokenKind::DateTime(d.into());
        for text in [
            "2024-01-01",
            "2024/01/01",
            "2024.01.01",
            "2024-1-1",
            "2024-01-01T00:00:00",
            "2024-01-01t00:00:00",
            "2024-01-01 08:00:00",
            "2024-01-01  08:00:00.123",
            "2024-01-01T08:00:00.123+08:00",
            "2024-01-01T08:00:00-0500",
            "2024-01-01T08:00:00Z",
            "2024-13-45",
        ] {
            assert_eq!(kinds(text), vec![at(text)], "{text}");
        }
        assert_eq!(
            kinds("time >= 2024-01-01 08:00:00+08:00 - 1h30m, [2024/01/01, now())"),
            vec![
                word("time"),
                TokenKind::GreaterEqual,
                at("2024-01-01 08:00:00+08:00"),
                TokenKind::Minus,
                TokenKind::Duration("1h30m".into()),
                TokenKind::Comma,
                TokenKind::LeftBracket,
                at("2024/01/01"),
                TokenKind::Comma,
                word("now"),
                TokenKind::LeftParen,
                TokenKind::RightParen,
                TokenKind::RightParen,
            ]
        );
    }

    #[test]
    fn a_date_time_ends_where_its_shape_does() {
        let at = |d: &str| TokenKind::DateTime(d.into());
        // Blanks without a time after them, and `+`/`-` then a duration, are not part of it.
        assert_eq!(kinds("2024-01-01 AND"), vec![at("2024-01-01"), word("AND")]);
        assert_eq!(
            kinds("2024-01-01T00:00:00-1h"),
            vec![
                at("2024-01-01T00:00:00"),
                TokenKind::Minus,
                TokenKind::Duration("1h".into())
            ]
        );
        assert_eq!(
            kinds("2024-01-01T00:00:00+1d"),
            vec![
                at("2024-01-01T00:00:00"),
                TokenKind::Plus,
                TokenKind::Duration("1d".into())
            ]
        );
        assert_eq!(kinds("2024-01-01 -- a comment"), vec![at("2024-01-01")],);
        // Mixed separators, or too few parts, are no date.
        assert_eq!(
            kinds("2024-01/01"),
            vec![
                TokenKind::Number("2024".into()),
                TokenKind::Minus,
                TokenKind::Number("01".into()),
                TokenKind::Slash,
                TokenKind::Number("01".into()),
            ]
        );
        assert_eq!(
            kinds("5 - 1, 5-1, -2"),
            vec![
                TokenKind::Number("5".into()),
                TokenKind::Minus,
                TokenKind::Number("1".into()),
                TokenKind::Comma,
                TokenKind::Number("5".into()),
                TokenKind::Minus,
                TokenKind::Number("1".into()),
                TokenKind::Comma,
                TokenKind::Minus,
                TokenKind::Number("2".into()),
            ]
        );
        assert_eq!(kinds("1.5e-3"), vec![TokenKind::Number("1.5e-3".into())]);
    }

    #[test]
    fn a_date_time_running_into_letters_is_an_error() {
        for (text, bad) in [
            ("2024-01-01T25", "2024-01-01T25"),
            ("2024-01-01T08:00", "2024-01-01T08:00"),
            ("2024-01-01T08:00:00Zulu", "2024-01-01T08:00:00Zulu"),
            ("2024-01-01x", "2024-01-01x"),
            ("2024.01.01.5", "2024.01.01.5"),
        ] {
            assert_eq!(
                kinds(text)[0],
                TokenKind::Error(format!("invalid date-time '{bad}'")),
                "{text}"
            );
        }
        assert_eq!(datetime_len("2024-01-01 08:00:00 x"), Some(19));
        assert_eq!(datetime_len("2024-01-01 08:00 x"), Some(10));
        assert_eq!(datetime_len("-2024-01-01"), None);
        assert_eq!(datetime_len("2024"), None);
        assert_eq!(datetime_len("2024-01-"), None);
    }
}
