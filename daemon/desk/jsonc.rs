//! The JSON files Gemini CLI and opencode read (and Gemini's trustedFolders.json) take comments, and
//! opencode's trailing commas, as those clients do (Gemini CLI strips comments, then `JSON.parse`s). They
//! are read so and edited in place: a person's comments, the order of what they wrote and their own keys
//! in ovai's entry stay; ovai sets only what it owns. Of a key given twice, the last counts, as
//! `JSON.parse` has it.

use std::path::Path;

use jsonc_parser::ParseOptions;
use jsonc_parser::cst::{CstInputValue, CstObject, CstObjectProp, CstRootNode};
use serde_json::Value;

use super::{DeskError, io_err};
use crate::files::write_private;

/// What the clients read: comments, trailing commas where the client takes them, and otherwise JSON.
fn options(trailing_commas: bool) -> ParseOptions {
    ParseOptions {
        allow_comments: true,
        allow_trailing_commas: trailing_commas,
        allow_loose_object_property_names: false,
        allow_missing_commas: false,
        allow_single_quoted_strings: false,
        allow_hexadecimal_numbers: false,
        allow_unary_plus_numbers: false,
        allow_bare_decimal_point_numbers: false,
        allow_non_finite_numbers: false,
        allow_extended_string_escapes: false,
    }
}

pub enum Read {
    /// Its top-level object (made, for a file that is absent or empty).
    Object(CstRootNode, CstObject),
    Unparsable {
        message: String,
        line: usize,
        column: usize,
    },
    NotObject(&'static str),
}

/// The file at `path`, as Gemini CLI reads it, or (`opencode`) as opencode does: trailing commas, and a
/// byte-order mark before it all (which is not kept).
pub fn read(path: &Path, opencode: bool) -> Result<Read, DeskError> {
    let trailing_commas = opencode;
    let text = match crate::files::read_regular(path, crate::files::MAX_READ_BYTES) {
        Ok(t) if opencode && t.starts_with('\u{feff}') => t['\u{feff}'.len_utf8()..].to_string(),
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(io_err("reading", path)(e)),
    };
    let root = match CstRootNode::parse(&text, &options(trailing_commas)) {
        Ok(root) => root,
        Err(e) => {
            return Ok(Read::Unparsable {
                message: e.kind().to_string(),
                line: e.line_display(),
                column: e.column_display(),
            });
        }
    };
    match root.value() {
        Some(value) if value.as_object().is_none() => {
            let kind = value
                .to_serde_value()
                .map_or("not JSON", |v| crate::instance::json_kind(&v));
            Ok(Read::NotObject(kind))
        }
        _ => {
            let object = root.object_value_or_set();
            Ok(Read::Object(root, object))
        }
    }
}

pub fn write(path: &Path, root: &CstRootNode) -> Result<(), DeskError> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io_err("making", dir))?;
    }
    let mut text = root.to_string();
    if !text.ends_with('\n') {
        text.push('\n');
    }
    let text = crate::files::keep_line_ends(path, text);
    Ok(write_private(path, text.as_bytes())?)
}

/// Whether the file holds a comment anywhere: somebody's words, which keep it from being removed.
pub fn has_comments(root: &CstRootNode) -> bool {
    fn any(nodes: Vec<jsonc_parser::cst::CstNode>) -> bool {
        nodes
            .into_iter()
            .any(|n| n.is_comment() || any(n.children()))
    }
    any(root.children())
}

/// The property `name` of `object`: the last, when it is given twice.
fn last(object: &CstObject, name: &str) -> Option<CstObjectProp> {
    object
        .properties()
        .into_iter()
        .rfind(|p| p.decoded_name().as_deref() == Some(name))
}

/// Each property of `object` with what it holds, as JSON.
pub fn entries(object: &CstObject) -> Vec<(String, Value)> {
    object
        .properties()
        .into_iter()
        .filter_map(|p| Some((p.decoded_name()?, p.value()?.to_serde_value()?)))
        .collect()
}

/// What `name` holds in `object`, as JSON.
pub fn value_of(object: &CstObject, name: &str) -> Option<Value> {
    last(object, name)?.value()?.to_serde_value()
}

/// The object `name` holds in `object`, if it holds one.
pub fn object_of(object: &CstObject, name: &str) -> Option<CstObject> {
    last(object, name)?.object_value()
}

/// The kind of what `name` holds in `object`, when it is there and not an object.
pub fn not_object(object: &CstObject, name: &str) -> Option<&'static str> {
    let value = last(object, name)?.value()?;
    if value.as_object().is_some() {
        return None;
    }
    Some(
        value
            .to_serde_value()
            .map_or("not JSON", |v| crate::instance::json_kind(&v)),
    )
}

/// Sets `name` to `value` unless it holds that already (its comments are then untouched).
pub fn set(object: &CstObject, name: &str, value: &Value) {
    match last(object, name) {
        Some(prop) if prop.value().and_then(|v| v.to_serde_value()).as_ref() == Some(value) => {}
        Some(prop) => prop.set_value(input(value)),
        None => {
            object.append(name, input(value));
        }
    }
}

/// Sets `name` to `value` only where nothing is said: a default, which a person may have changed.
pub fn default(object: &CstObject, name: &str, value: &Value) {
    if last(object, name).is_none() {
        object.append(name, input(value));
    }
}

/// Takes `name` out of `object`, every time it is given.
pub fn remove(object: &CstObject, name: &str) {
    while let Some(prop) = last(object, name) {
        prop.remove();
    }
}

/// The object `name` holds in `object`, made (in place of anything else) if it holds none.
pub fn object_in(object: &CstObject, name: &str) -> CstObject {
    match last(object, name) {
        Some(prop) => prop.object_value_or_set(),
        None => object
            .append(name, CstInputValue::Object(Vec::new()))
            .object_value_or_set(),
    }
}

fn input(value: &Value) -> CstInputValue {
    match value {
        Value::Null => CstInputValue::Null,
        Value::Bool(b) => CstInputValue::Bool(*b),
        Value::Number(n) => CstInputValue::Number(n.to_string()),
        Value::String(s) => CstInputValue::String(s.clone()),
        Value::Array(items) => CstInputValue::Array(items.iter().map(input).collect()),
        Value::Object(map) => {
            CstInputValue::Object(map.iter().map(|(k, v)| (k.clone(), input(v))).collect())
        }
    }
}
