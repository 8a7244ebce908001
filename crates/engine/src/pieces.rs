//! Message templates in pieces (`dissector/problems.py: Pieces`; a format string is one piece), rendered
//! here as Python renders them, so that a finding made per message gets its text without a call into Python. A piece is a text with
//! `{name}` placeholders, kept always, when a parameter is present (not None) or when it is true. A
//! placeholder takes the parameter's `str()`: the core writes ints, strings and booleans, and gives up
//! (None: Python renders it) on anything else, a missing parameter, or a template it does not read.

use crate::value::{Map, Value};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum When {
    Always,
    Present,
    Truthy,
}

#[derive(Debug)]
enum Part {
    Text(String),
    Param(String),
}

#[derive(Debug)]
struct Piece {
    when: When,
    key: String,
    parts: Vec<Part>,
}

/// A template read from its pieces: (when, key, text) as `Pieces.pieces` holds them.
#[derive(Debug)]
pub struct Pieces(Vec<Piece>);

impl Pieces {
    /// None when a piece is not one this renders as Python does (a format spec, a conversion, an index, a
    /// stray brace): such a template stays Python's.
    pub fn read(pieces: &[(String, String, String)]) -> Option<Pieces> {
        let mut read = Vec::with_capacity(pieces.len());
        for (when, key, text) in pieces {
            let when = match when.as_str() {
                "always" => When::Always,
                "present" => When::Present,
                "truthy" => When::Truthy,
                _ => return None,
            };
            read.push(Piece { when, key: key.clone(), parts: parts(text)? });
        }
        Some(Pieces(read))
    }

    /// The text for `params`, or None where Python must make it.
    pub fn render(&self, params: &Map) -> Option<String> {
        let get = |key: &str| params.iter().find(|(k, _)| k.as_str() == key).map(|(_, v)| v);
        let mut out = String::with_capacity(96);
        for piece in &self.0 {
            let kept = match piece.when {
                When::Always => true,
                When::Present => get(&piece.key).is_some_and(|v| !v.is_null()),
                When::Truthy => get(&piece.key).is_some_and(|v| v.truthy()),
            };
            if !kept {
                continue;
            }
            for part in &piece.parts {
                match part {
                    Part::Text(text) => out.push_str(text),
                    Part::Param(name) => match get(name)? {
                        Value::Int(v) => out.push_str(itoa::Buffer::new().format(*v)),
                        Value::UInt(v) => out.push_str(itoa::Buffer::new().format(*v)),
                        Value::Str(text) => out.push_str(text.as_str()),
                        Value::Bool(true) => out.push_str("True"),
                        Value::Bool(false) => out.push_str("False"),
                        _ => return None, // floats, None, lists: Python's str() of them
                    },
                }
            }
        }
        Some(out)
    }
}

/// A piece's text as literal runs and `{name}` placeholders (`{{` and `}}` are literal braces, as in
/// `str.format`); None for anything else in braces.
fn parts(text: &str) -> Option<Vec<Part>> {
    let mut parts = Vec::new();
    let mut literal = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' if chars.peek() == Some(&'{') => {
                chars.next();
                literal.push('{');
            }
            '}' if chars.peek() == Some(&'}') => {
                chars.next();
                literal.push('}');
            }
            '{' => {
                let mut name = String::new();
                loop {
                    match chars.next()? {
                        '}' => break,
                        c if c.is_ascii_alphanumeric() || c == '_' => name.push(c),
                        _ => return None, // a format spec, a conversion, an attribute or an index
                    }
                }
                if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
                    return None; // positional: never given
                }
                if !literal.is_empty() {
                    parts.push(Part::Text(std::mem::take(&mut literal)));
                }
                parts.push(Part::Param(name));
            }
            '}' => return None,
            c => literal.push(c),
        }
    }
    if !literal.is_empty() {
        parts.push(Part::Text(literal));
    }
    Some(parts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::{entry, Text};

    fn pieces(list: &[(&str, &str, &str)]) -> Option<Pieces> {
        Pieces::read(&list.iter().map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string())).collect::<Vec<_>>())
    }

    #[test]
    fn renders_placeholders_and_conditions() {
        let p = pieces(&[("always", "", "m {a}:{b} {{x}}"), ("present", "c", " c={c}"), ("truthy", "d", " d={d}")])
            .unwrap();
        let params = vec![
            entry(crate::name!("a"), 1i64),
            (Text::Owned("b".into()), Value::Str(Text::Owned("é".into()))),
            entry(crate::name!("c"), 0i64),
            entry(crate::name!("d"), 0i64),
        ];
        assert_eq!(p.render(&params).as_deref(), Some("m 1:é {x} c=0"));
        let params = vec![(Text::Owned("a".into()), Value::Bool(true)), (Text::Owned("b".into()), Value::Null)];
        assert_eq!(p.render(&params), None); // None's str() is Python's to make
    }

    #[test]
    fn leaves_to_python_what_it_does_not_read() {
        for text in ["{a!r}", "{a:>4}", "{0}", "{}", "{a.b}", "{a[0]}", "a }", "{a"] {
            assert!(pieces(&[("always", "", text)]).is_none(), "{text}");
        }
        assert!(pieces(&[("sometimes", "a", "x")]).is_none());
    }
}
