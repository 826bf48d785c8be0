//! Reading the files into trees of keys with their lines: TOML (toml's spanned parse tree)
//! and a PRD's `prdloop:` map (YAML, serde-saphyr's spans). Nothing is checked here.

use std::path::Path;

use anyhow::{Result, bail};

/// A value as a file wrote it (TOML or YAML).
#[derive(Debug, Clone)]
pub(super) enum Raw {
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    List(Vec<Raw>),
    /// Anything else, described (`a table`, `a date`, `null`).
    Other(&'static str),
}

impl Raw {
    pub(super) fn what(&self) -> String {
        match self {
            Raw::Bool(b) => format!("`{b}`"),
            Raw::Int(n) => format!("the number {n}"),
            Raw::Float(f) => format!("the number {f}"),
            Raw::Str(s) => format!("the text {}", toml::Value::String(s.clone())),
            Raw::List(_) => "a list".to_string(),
            Raw::Other(w) => w.to_string(),
        }
    }
}

/// A file's contents before checking: `key = value` lines and tables, with their lines.
#[derive(Debug)]
pub(super) enum Tree {
    Value(Raw),
    Map(Entries),
}

/// A table's keys, each with its line and value, in the file's order.
pub(super) type Entries = Vec<(String, usize, Tree)>;

/// 1-based line of a byte offset.
fn line_at(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// A TOML file's tree.
pub(super) fn toml_tree(text: &str, file: &Path) -> Result<Entries> {
    use toml::de::{DeTable, DeValue};
    let table = DeTable::parse(text).map_err(|e| {
        let line = e.span().map_or(1, |s| line_at(text, s.start));
        anyhow::anyhow!(
            "{}:{line}: not valid TOML: {}",
            file.display(),
            e.message().trim()
        )
    })?;
    fn value(text: &str, v: &DeValue<'_>) -> Tree {
        match v {
            DeValue::String(s) => Tree::Value(Raw::Str(s.to_string())),
            DeValue::Integer(n) => Tree::Value(
                i64::from_str_radix(n.as_str(), n.radix())
                    .map_or(Raw::Other("a number too large"), Raw::Int),
            ),
            DeValue::Float(f) => Tree::Value(
                f.as_str()
                    .parse()
                    .map_or(Raw::Other("a number"), Raw::Float),
            ),
            DeValue::Boolean(b) => Tree::Value(Raw::Bool(*b)),
            DeValue::Datetime(_) => Tree::Value(Raw::Other("a date")),
            DeValue::Array(items) => Tree::Value(Raw::List(
                items
                    .iter()
                    .map(|i| match value(text, i.get_ref()) {
                        Tree::Value(r) => r,
                        Tree::Map(_) => Raw::Other("a table"),
                    })
                    .collect(),
            )),
            DeValue::Table(t) => Tree::Map(entries(text, t)),
        }
    }
    // In the file's order (the table is sorted by key), so that the first error is reported.
    fn entries(text: &str, t: &DeTable<'_>) -> Entries {
        let mut entries: Vec<(usize, String, usize, Tree)> = t
            .iter()
            .map(|(k, v)| {
                (
                    k.span().start,
                    k.get_ref().to_string(),
                    line_at(text, k.span().start),
                    value(text, v.get_ref()),
                )
            })
            .collect();
        entries.sort_by_key(|e| e.0);
        entries.into_iter().map(|(_, k, l, t)| (k, l, t)).collect()
    }
    Ok(entries(text, table.get_ref()))
}

/// A YAML value of a PRD's `prdloop:` map, with the line of each key.
#[derive(Debug)]
struct Yaml(Tree);

impl<'de> serde::Deserialize<'de> for Yaml {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Yaml, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Yaml;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a YAML value")
            }
            fn visit_bool<E>(self, b: bool) -> Result<Yaml, E> {
                Ok(Yaml(Tree::Value(Raw::Bool(b))))
            }
            fn visit_i64<E>(self, n: i64) -> Result<Yaml, E> {
                Ok(Yaml(Tree::Value(Raw::Int(n))))
            }
            fn visit_u64<E>(self, n: u64) -> Result<Yaml, E> {
                Ok(Yaml(Tree::Value(
                    i64::try_from(n).map_or(Raw::Other("a number too large"), Raw::Int),
                )))
            }
            fn visit_f64<E>(self, f: f64) -> Result<Yaml, E> {
                Ok(Yaml(Tree::Value(Raw::Float(f))))
            }
            fn visit_str<E>(self, s: &str) -> Result<Yaml, E> {
                Ok(Yaml(Tree::Value(Raw::Str(s.to_string()))))
            }
            fn visit_unit<E>(self) -> Result<Yaml, E> {
                Ok(Yaml(Tree::Value(Raw::Other("null (no value)"))))
            }
            fn visit_none<E>(self) -> Result<Yaml, E> {
                Ok(Yaml(Tree::Value(Raw::Other("null (no value)"))))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Yaml, A::Error> {
                let mut items = Vec::new();
                while let Some(Yaml(t)) = seq.next_element::<Yaml>()? {
                    items.push(match t {
                        Tree::Value(r) => r,
                        Tree::Map(_) => Raw::Other("a map"),
                    });
                }
                Ok(Yaml(Tree::Value(Raw::List(items))))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Yaml, A::Error> {
                let mut entries = Vec::new();
                while let Some(key) = map.next_key::<serde_saphyr::Spanned<String>>()? {
                    let Yaml(value) = map.next_value::<Yaml>()?;
                    entries.push((key.value, key.referenced.line() as usize, value));
                }
                Ok(Yaml(Tree::Map(entries)))
            }
        }
        d.deserialize_any(V)
    }
}

/// The `prdloop:` map of a PRD's front matter (`None` without one), with lines in the file.
pub(super) fn prd_tree(text: &str, file: &Path) -> Result<Option<Entries>> {
    #[derive(serde::Deserialize)]
    struct Front {
        prdloop: Option<serde_saphyr::Spanned<Yaml>>,
    }
    let Ok(Some(span)) = crate::prd::frontmatter::locate(text) else {
        return Ok(None);
    };
    let yaml = &text[span.content.clone()];
    // Only a front matter with the key is read here: the PRD's own reader reports the rest.
    if !yaml.lines().any(|l| {
        l.strip_prefix("prdloop")
            .is_some_and(|r| r.trim_start().starts_with(':'))
    }) {
        return Ok(None);
    }
    let offset = line_at(text, span.content.start) - 1;
    let mut options = serde_saphyr::Options::default();
    options.duplicate_keys = serde_saphyr::DuplicateKeyPolicy::LastWins;
    let front: Front = serde_saphyr::from_str_with_options(yaml, options).map_err(|e| {
        let line = e.location().map_or(1, |l| l.line() as usize) + offset;
        // Its first line, without the `error: line N column M: ` that the line above says.
        let text = e.to_string();
        let first = text.lines().next().unwrap_or_default();
        let first = first.strip_prefix("error: ").unwrap_or(first);
        let first = match first.split_once(": ") {
            Some((at, rest)) if at.starts_with("line ") => rest,
            _ => first,
        };
        anyhow::anyhow!(
            "{}:{line}: the front matter's `prdloop:` map cannot be read: {first}",
            file.display()
        )
    })?;
    let Some(map) = front.prdloop else {
        return Ok(None);
    };
    let line = map.referenced.line() as usize + offset;
    let Tree::Map(entries) = map.value.0 else {
        bail!(
            "{}:{line}: `prdloop:` must be a map of settings (`timeout: 30m`)",
            file.display()
        );
    };
    fn shift(entries: Entries, by: usize) -> Entries {
        entries
            .into_iter()
            .map(|(k, l, t)| {
                let t = match t {
                    Tree::Map(m) => Tree::Map(shift(m, by)),
                    v => v,
                };
                (k, l + by, t)
            })
            .collect()
    }
    Ok(Some(shift(entries, offset)))
}
