//! libpq's keyword form of a connection string (`host=a,b port=5432 dbname=cron`): the one
//! reader of its quoting rules, shared by the PostgreSQL store, which connects with it, and by
//! redaction, which must find a password in it to hide it.
//!
//! Pairs are `keyword = value`, separated by whitespace (also around the `=`). A value is
//! either a run of non-space characters or a single-quoted text; in both, a backslash takes
//! the next character literally (`'it\'s'`, `a\ b`).

use std::ops::Range;

/// Why a keyword-form connection string does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConninfoError {
    /// A word with no `=` after it.
    #[error("{0:?} has no `=` after it (write keyword=value)")]
    MissingEquals(String),
    /// An `=` with no keyword before it.
    #[error("an `=` has no keyword before it")]
    MissingKeyword,
    /// A quoted value that never ends.
    #[error("{0}: the quoted value has no closing quote")]
    UnterminatedQuote(String),
}

/// One `keyword=value` pair, the value unquoted and unescaped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pair {
    pub keyword: String,
    pub value: String,
    /// Where the value stands in the text, quotes included.
    pub value_span: Range<usize>,
}

/// Whether `text` is in keyword form: it begins with a keyword and `=` (a URL begins with its
/// scheme and `:`).
pub fn is_conninfo(text: &str) -> bool {
    let text = text.trim_start();
    let end = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    end > 0 && text[end..].trim_start().starts_with('=')
}

/// The pairs of a keyword-form connection string, in order (a keyword given twice appears
/// twice; libpq lets the later one win).
pub fn parse(text: &str) -> Result<Vec<Pair>, ConninfoError> {
    let mut pairs = Vec::new();
    let mut chars = text.char_indices().peekable();
    loop {
        skip_space(&mut chars);
        let Some(&(start, _)) = chars.peek() else {
            return Ok(pairs);
        };
        let mut end = start;
        while let Some(&(i, c)) = chars.peek() {
            if c == '=' || c.is_whitespace() {
                break;
            }
            end = i + c.len_utf8();
            chars.next();
        }
        let keyword = &text[start..end];
        skip_space(&mut chars);
        match chars.next() {
            Some((_, '=')) if keyword.is_empty() => return Err(ConninfoError::MissingKeyword),
            Some((_, '=')) => {}
            _ => return Err(ConninfoError::MissingEquals(keyword.to_owned())),
        }
        skip_space(&mut chars);
        let (value, value_span) = read_value(text, &mut chars, keyword)?;
        pairs.push(Pair {
            keyword: keyword.to_owned(),
            value,
            value_span,
        });
    }
}

type Chars<'a> = std::iter::Peekable<std::str::CharIndices<'a>>;

fn skip_space(chars: &mut Chars<'_>) {
    while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
}

/// Reads one value at the cursor: quoted, or up to the next whitespace.
fn read_value(
    text: &str,
    chars: &mut Chars<'_>,
    keyword: &str,
) -> Result<(String, Range<usize>), ConninfoError> {
    let start = chars.peek().map_or(text.len(), |&(i, _)| i);
    let mut value = String::new();
    let quoted = chars.next_if(|&(_, c)| c == '\'').is_some();
    loop {
        let Some((i, c)) = chars.next() else {
            if quoted {
                return Err(ConninfoError::UnterminatedQuote(keyword.to_owned()));
            }
            return Ok((value, start..text.len()));
        };
        match c {
            '\\' => {
                if let Some((_, escaped)) = chars.next() {
                    value.push(escaped);
                }
            }
            '\'' if quoted => return Ok((value, start..i + 1)),
            c if !quoted && c.is_whitespace() => return Ok((value, start..i)),
            c => value.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(text: &str) -> Vec<(String, String)> {
        parse(text)
            .unwrap()
            .into_iter()
            .map(|p| (p.keyword, p.value))
            .collect()
    }

    fn owned(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn keyword_form_is_told_from_urls() {
        assert!(is_conninfo("host=a,b port=5432"));
        assert!(is_conninfo("  dbname = cron"));
        assert!(!is_conninfo("postgres://u@h/db?host=a"));
        assert!(!is_conninfo("sqlite::memory:"));
        assert!(!is_conninfo("=x"));
        assert!(!is_conninfo(""));
    }

    #[test]
    fn values_plain_quoted_and_escaped() {
        assert_eq!(
            pairs("host=a,b port = 5432,5433\tdbname='my db' password='it\\'s' user=a\\ b x=''"),
            owned(&[
                ("host", "a,b"),
                ("port", "5432,5433"),
                ("dbname", "my db"),
                ("password", "it's"),
                ("user", "a b"),
                ("x", ""),
            ])
        );
        assert_eq!(pairs(""), owned(&[]));
    }

    #[test]
    fn spans_cover_the_value_with_its_quotes() {
        let text = "user=u password='a b' host=h";
        let found = parse(text).unwrap();
        assert_eq!(&text[found[1].value_span.clone()], "'a b'");
        assert_eq!(&text[found[2].value_span.clone()], "h");
    }

    #[test]
    fn malformed_strings_are_refused_by_name() {
        assert_eq!(
            parse("host=a dbname"),
            Err(ConninfoError::MissingEquals("dbname".into()))
        );
        assert_eq!(parse("=a"), Err(ConninfoError::MissingKeyword));
        assert_eq!(
            parse("password='open"),
            Err(ConninfoError::UnterminatedQuote("password".into()))
        );
    }
}
