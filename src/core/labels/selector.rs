//! Label selectors in Kubernetes' syntax: requirements joined by commas, all of which must
//! hold. `team=billing`, `team==billing`, `team!=billing`, `tier in (gold,silver)`,
//! `tier notin (bronze)`, `canary` (the key is present) and `!canary` (it is absent). As in
//! Kubernetes, `!=` and `notin` also match a schedule without the key.

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

use super::{Labels, check_key, check_value};

/// The longest selector, in bytes.
pub const MAX_SELECTOR_LEN: usize = 4096;
/// The most requirements in one selector.
pub const MAX_REQUIREMENTS: usize = 32;
/// The most values in one `in` or `notin` set.
pub const MAX_SET_VALUES: usize = 64;

/// A parsed selector: every requirement must hold. The empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

/// One requirement on one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    pub key: String,
    pub op: SelectorOp,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SelectorOp {
    Exists,
    NotExists,
    Equals(String),
    NotEquals(String),
    In(BTreeSet<String>),
    NotIn(BTreeSet<String>),
}

/// Why a selector does not parse, and where (a 1-based character position).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("at character {position}: {message}")]
pub struct SelectorError {
    pub position: usize,
    pub message: String,
}

impl LabelSelector {
    /// A selector of these requirements, whose keys and values the caller has checked.
    pub fn new(requirements: Vec<Requirement>) -> Self {
        LabelSelector { requirements }
    }

    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Whether `labels` meet every requirement.
    pub fn matches(&self, labels: &Labels) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }
}

impl Requirement {
    pub fn matches(&self, labels: &Labels) -> bool {
        let value = labels.get(&self.key);
        match &self.op {
            SelectorOp::Exists => value.is_some(),
            SelectorOp::NotExists => value.is_none(),
            SelectorOp::Equals(wanted) => value == Some(wanted.as_str()),
            SelectorOp::NotEquals(unwanted) => value != Some(unwanted.as_str()),
            SelectorOp::In(set) => value.is_some_and(|v| set.contains(v)),
            SelectorOp::NotIn(set) => !value.is_some_and(|v| set.contains(v)),
        }
    }
}

impl FromStr for LabelSelector {
    type Err = SelectorError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if text.len() > MAX_SELECTOR_LEN {
            return Err(SelectorError {
                position: 1,
                message: format!(
                    "a selector is at most {MAX_SELECTOR_LEN} bytes (this one has {})",
                    text.len()
                ),
            });
        }
        let mut parser = Parser {
            chars: text.chars().collect(),
            at: 0,
        };
        let mut requirements = Vec::new();
        parser.skip_spaces();
        if parser.at_end() {
            return Ok(LabelSelector::default());
        }
        loop {
            requirements.push(parser.requirement()?);
            if requirements.len() > MAX_REQUIREMENTS {
                return Err(parser.error(format!(
                    "a selector holds at most {MAX_REQUIREMENTS} requirements"
                )));
            }
            parser.skip_spaces();
            match parser.peek() {
                None => break,
                Some(',') => parser.at += 1,
                Some(c) => {
                    return Err(parser.error(format!("expected ',' or the end, found {c:?}")));
                }
            }
        }
        Ok(LabelSelector { requirements })
    }
}

struct Parser {
    chars: Vec<char>,
    at: usize,
}

/// What a key or a value may be made of; the rules proper are checked after.
fn is_word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/')
}

impl Parser {
    fn error(&self, message: String) -> SelectorError {
        SelectorError {
            position: self.at + 1,
            message,
        }
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }

    fn at_end(&self) -> bool {
        self.at >= self.chars.len()
    }

    fn skip_spaces(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.at += 1;
        }
    }

    fn eat(&mut self, text: &str) -> bool {
        let wanted: Vec<char> = text.chars().collect();
        if self.chars[self.at.min(self.chars.len())..].starts_with(&wanted) {
            self.at += wanted.len();
            true
        } else {
            false
        }
    }

    fn word(&mut self) -> String {
        let start = self.at;
        while self.peek().is_some_and(is_word_char) {
            self.at += 1;
        }
        self.chars[start..self.at].iter().collect()
    }

    fn key(&mut self) -> Result<String, SelectorError> {
        self.skip_spaces();
        let start = self.at;
        let key = self.word();
        if key.is_empty() {
            return Err(match self.peek() {
                None => self.error("expected a label key, found the end".to_owned()),
                Some(c) => self.error(format!("expected a label key, found {c:?}")),
            });
        }
        check_key(&key).map_err(|reason| SelectorError {
            position: start + 1,
            message: reason,
        })?;
        Ok(key)
    }

    fn value(&mut self) -> Result<String, SelectorError> {
        self.skip_spaces();
        let start = self.at;
        let value = self.word();
        check_value(&value).map_err(|reason| SelectorError {
            position: start + 1,
            message: reason,
        })?;
        Ok(value)
    }

    fn requirement(&mut self) -> Result<Requirement, SelectorError> {
        self.skip_spaces();
        if self.eat("!") {
            let key = self.key()?;
            return Ok(Requirement {
                key,
                op: SelectorOp::NotExists,
            });
        }
        let key = self.key()?;
        self.skip_spaces();
        let op = if self.eat("!=") {
            SelectorOp::NotEquals(self.value()?)
        } else if self.eat("==") || self.eat("=") {
            SelectorOp::Equals(self.value()?)
        } else if self.keyword("notin") {
            SelectorOp::NotIn(self.set()?)
        } else if self.keyword("in") {
            SelectorOp::In(self.set()?)
        } else {
            match self.peek() {
                None | Some(',') => SelectorOp::Exists,
                Some(c) => {
                    return Err(self.error(format!(
                        "expected '=', '==', '!=', 'in', 'notin', ',' or the end after key \
                         {key:?}, found {c:?}"
                    )));
                }
            }
        };
        Ok(Requirement { key, op })
    }

    /// `in` or `notin` as a whole word (so a key named `index` is not read as `in`).
    fn keyword(&mut self, word: &str) -> bool {
        let start = self.at;
        if self.eat(word) && !self.peek().is_some_and(is_word_char) {
            return true;
        }
        self.at = start;
        false
    }

    fn set(&mut self) -> Result<BTreeSet<String>, SelectorError> {
        self.skip_spaces();
        if !self.eat("(") {
            return Err(self.error("expected '(' to open the set of values".to_owned()));
        }
        let mut values = BTreeSet::new();
        loop {
            values.insert(self.value()?);
            if values.len() > MAX_SET_VALUES {
                return Err(self.error(format!("a set holds at most {MAX_SET_VALUES} values")));
            }
            self.skip_spaces();
            if self.eat(",") {
                continue;
            }
            if self.eat(")") {
                return Ok(values);
            }
            return Err(match self.peek() {
                None => self.error("the set of values is not closed with ')'".to_owned()),
                Some(c) => self.error(format!("expected ',' or ')' in the set, found {c:?}")),
            });
        }
    }
}

impl fmt::Display for LabelSelector {
    /// The canonical form, which parses back to the same selector.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let set = |values: &BTreeSet<String>| values.iter().cloned().collect::<Vec<_>>().join(",");
        match &self.op {
            SelectorOp::Exists => write!(f, "{}", self.key),
            SelectorOp::NotExists => write!(f, "!{}", self.key),
            SelectorOp::Equals(v) => write!(f, "{}={v}", self.key),
            SelectorOp::NotEquals(v) => write!(f, "{}!={v}", self.key),
            SelectorOp::In(values) => write!(f, "{} in ({})", self.key, set(values)),
            SelectorOp::NotIn(values) => write!(f, "{} notin ({})", self.key, set(values)),
        }
    }
}
