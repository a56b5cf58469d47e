//! Input schemas: checked when a plugin is loaded (an object schema that stands on its own), and used to
//! validate every call's arguments before the plugin runs (JSON Schema 2020-12).

use serde_json::Value;

/// Why no call could pass an inputSchema, as the end of its row: a required input that may not be given
/// (`additionalProperties: false` at its level, and no `patternProperties` that could admit it),
/// or that no value could be, or a root `not` that refuses everything. (What a schema holds deeper, or
/// behind a `$ref`, is left to the checker: the calls it refuses say why.)
fn no_call_could_pass(root: &serde_json::Map<String, Value>) -> Option<String> {
    if root.get("not").is_some_and(fits_everything) {
        return Some(
            "its inputSchema's not holds a schema every value fits, so no call could pass it"
                .into(),
        );
    }
    let closed = root.get("additionalProperties") == Some(&Value::Bool(false))
        && !root.contains_key("patternProperties");
    for (name, property) in required_inputs(root) {
        let shown = Value::String(name.to_string());
        match property {
            None if closed => {
                return Some(format!(
                    "its inputSchema requires {shown}, which is not among its properties, and its \
                     additionalProperties is false, so no call could pass it"
                ));
            }
            None => {}
            Some(property) => {
                if let Some(why) = no_value_fits(property) {
                    return Some(format!(
                        "its inputSchema requires {shown}, which no value could be ({why}), so no call \
                         could pass it"
                    ));
                }
            }
        }
    }
    None
}

/// Each name a schema's root requires, with the schema its properties give that input, if any.
fn required_inputs(
    root: &serde_json::Map<String, Value>,
) -> impl Iterator<Item = (&str, Option<&Value>)> {
    let properties = root.get("properties").and_then(Value::as_object);
    root.get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(move |name| (name, properties.and_then(|p| p.get(name))))
}

/// A schema every value fits: `true`, `{}`, or one holding only annotations.
fn fits_everything(schema: &Value) -> bool {
    match schema {
        Value::Bool(b) => *b,
        Value::Object(o) => o.keys().all(|k| {
            matches!(
                k.as_str(),
                "description" | "title" | "$comment" | "examples"
            )
        }),
        _ => false,
    }
}

/// Why no value could fit a property's own schema, where its keywords say so plainly.
fn no_value_fits(schema: &Value) -> Option<String> {
    let Value::Object(s) = schema else {
        return (*schema == Value::Bool(false)).then(|| "its schema is false".to_string());
    };
    if s.get("enum")
        .and_then(Value::as_array)
        .is_some_and(Vec::is_empty)
    {
        return Some("its enum lists none".into());
    }
    if s.get("not").is_some_and(fits_everything) {
        return Some("its not holds a schema every value fits".into());
    }
    // A bound applies to its own type only: a schema that lets other types through is passed by them.
    let only = |kinds: &[&str]| match s.get("type") {
        Some(Value::String(t)) => kinds.contains(&t.as_str()),
        Some(Value::Array(ts)) => {
            !ts.is_empty()
                && ts
                    .iter()
                    .all(|t| t.as_str().is_some_and(|t| kinds.contains(&t)))
        }
        _ => false,
    };
    for (low, high, kinds) in [
        ("minimum", "maximum", &["number", "integer"][..]),
        ("minLength", "maxLength", &["string"][..]),
        ("minItems", "maxItems", &["array"][..]),
        ("minProperties", "maxProperties", &["object"][..]),
    ] {
        if let (Some(l), Some(h)) = (
            s.get(low).and_then(Value::as_f64),
            s.get(high).and_then(Value::as_f64),
        ) && l > h
            && only(kinds)
        {
            return Some(format!(
                "its {low} {} is above its {high} {}",
                s[low], s[high]
            ));
        }
    }
    None
}

/// JSON Schema's keywords (2020-12, and draft-07's `definitions` and `dependencies`), for telling a slip
/// (`requried`) from a keyword of one's own.
const KEYWORDS: &[&str] = &[
    "$anchor",
    "$comment",
    "$defs",
    "$id",
    "$ref",
    "$schema",
    "additionalItems",
    "additionalProperties",
    "allOf",
    "anyOf",
    "const",
    "contains",
    "contentEncoding",
    "contentMediaType",
    "default",
    "definitions",
    "dependencies",
    "dependentRequired",
    "dependentSchemas",
    "deprecated",
    "description",
    "else",
    "enum",
    "examples",
    "exclusiveMaximum",
    "exclusiveMinimum",
    "format",
    "if",
    "items",
    "maxContains",
    "maximum",
    "maxItems",
    "maxLength",
    "maxProperties",
    "minContains",
    "minimum",
    "minItems",
    "minLength",
    "minProperties",
    "multipleOf",
    "not",
    "oneOf",
    "pattern",
    "patternProperties",
    "prefixItems",
    "properties",
    "propertyNames",
    "readOnly",
    "required",
    "then",
    "title",
    "type",
    "unevaluatedItems",
    "unevaluatedProperties",
    "uniqueItems",
    "writeOnly",
];

/// The keys of an inputSchema's schemas that look like slips for a JSON Schema keyword (`requried`,
/// `additonalProperties`), each as (where, found, meant): a keyword it does not know is ignored, so what
/// the author meant to check is not checked. Only schemas are looked into, never values (`const`,
/// `default`, `enum`, `examples`), and the walk is bounded.
pub fn keyword_slips(
    schema: &serde_json::Map<String, Value>,
) -> Vec<(String, String, &'static str)> {
    keys_noted(schema, &|key, holder| {
        // `min` and `max` mean the bound of the schema's own type.
        let of_type = |number: &'static str, string: &'static str, array: &'static str| match holder
            .get("type")
            .and_then(Value::as_str)
        {
            Some("string") => string,
            Some("array") => array,
            _ => number,
        };
        match key.to_ascii_lowercase().as_str() {
            "min" => return Some(of_type("minimum", "minLength", "minItems")),
            "max" => return Some(of_type("maximum", "maxLength", "maxItems")),
            _ => {}
        }
        // Short names a hurried author writes for a keyword, too far from it to be a slip.
        const SHORT: &[(&str, &str)] = &[
            ("minlen", "minLength"),
            ("maxlen", "maxLength"),
            ("desc", "description"),
            ("regex", "pattern"),
            ("minvalue", "minimum"),
            ("maxvalue", "maximum"),
        ];
        let lower = key.to_ascii_lowercase();
        if let Some((_, meant)) = SHORT.iter().find(|(short, _)| *short == lower) {
            return Some(*meant);
        }
        // OpenAPI's `example` is an annotation of its own, not a slip for `examples`.
        if KEYWORDS.contains(&key) || key.len() < 4 || key == "example" || key == "nullable" {
            return None;
        }
        KEYWORDS.iter().copied().find(|k| {
            let k_lower = k.to_ascii_lowercase();
            lower == k_lower
                || (lower.len().abs_diff(k.len()) <= 2
                    && crate::names::distance(&lower, &k_lower) <= 2)
        })
    })
}

/// The keywords of an inputSchema that the draft it is read in does not know, each as (where, found,
/// whose it is): a keyword of a later draft (`prefixItems` under draft-07) or OpenAPI's `nullable` is
/// ignored, so what it was to check is not. With the draft's name, for the row.
pub fn foreign_keywords(
    schema: &serde_json::Map<String, Value>,
) -> (Vec<(String, String, &'static str)>, &'static str) {
    use jsonschema::Draft;
    let draft =
        dialect_of(schema.get("$schema").and_then(Value::as_str)).unwrap_or(Draft::Draft202012);
    let rank = |d: Draft| match d {
        Draft::Draft4 => 4,
        Draft::Draft6 => 6,
        Draft::Draft7 => 7,
        Draft::Draft201909 => 2019,
        _ => 2020,
    };
    let found = keys_noted(schema, &|key, _| {
        let (since, whose) = match key {
            "nullable" => {
                return Some("OpenAPI's, not JSON Schema's: write type [\"string\", \"null\"]");
            }
            // `optional: true`, as some other hosts' schemas write it: here what is not in required is.
            "optional" => {
                return Some(
                    "no draft's: a property is optional unless its object's required lists it",
                );
            }
            "errorMessage" => {
                return Some(
                    "ajv-errors', not JSON Schema's: a refusal says what the schema wanted",
                );
            }
            "const" | "contains" | "propertyNames" => (6, "draft-06's and later"),
            "if" | "then" | "else" => (7, "draft-07's and later"),
            "dependentRequired"
            | "dependentSchemas"
            | "unevaluatedProperties"
            | "unevaluatedItems"
            | "minContains"
            | "maxContains" => (2019, "2019-09's and later"),
            "prefixItems" => (2020, "2020-12's"),
            _ => return None,
        };
        (rank(draft) < since).then_some(whose)
    });
    (found, draft_name(draft))
}

/// A draft as its rows name it.
pub fn draft_name(draft: jsonschema::Draft) -> &'static str {
    match draft {
        jsonschema::Draft::Draft4 => "draft-04",
        jsonschema::Draft::Draft6 => "draft-06",
        jsonschema::Draft::Draft7 => "draft-07",
        jsonschema::Draft::Draft201909 => "2019-09",
        _ => "2020-12",
    }
}

/// What a key of a schema is noted as, given the schema that holds it; none for a key not noted.
type Note<'a> = dyn Fn(&str, &serde_json::Map<String, Value>) -> Option<&'static str> + 'a;

/// The keys of an inputSchema's schemas that `note` has a word for, each as (where, found, the word).
/// Only schemas are looked into, never values (`const`, `default`, `enum`, `examples`), and the walk is
/// bounded.
fn keys_noted(
    schema: &serde_json::Map<String, Value>,
    note: &Note<'_>,
) -> Vec<(String, String, &'static str)> {
    fn walk(
        s: &serde_json::Map<String, Value>,
        at: &str,
        note: &Note<'_>,
        out: &mut Vec<(String, String, &'static str)>,
        budget: &mut usize,
    ) {
        for (key, value) in s {
            if *budget == 0 {
                return;
            }
            *budget -= 1;
            if let Some(k) = note(key, s) {
                out.push((at.to_string(), key.clone(), k));
            }
            let into = |name: &str| {
                if at.is_empty() {
                    name.to_string()
                } else {
                    format!("{at}.{name}")
                }
            };
            match (key.as_str(), value) {
                (
                    "properties" | "patternProperties" | "$defs" | "definitions"
                    | "dependentSchemas",
                    Value::Object(each),
                ) => {
                    for (name, sub) in each {
                        if let Value::Object(sub) = sub {
                            walk(sub, &into(name), note, out, budget);
                        }
                    }
                }
                // `items` as an array is draft-07's tuple (2020-12's prefixItems).
                ("anyOf" | "oneOf" | "allOf" | "prefixItems" | "items", Value::Array(each)) => {
                    for (i, sub) in each.iter().enumerate() {
                        if let Value::Object(sub) = sub {
                            walk(sub, &into(&format!("{key}[{i}]")), note, out, budget);
                        }
                    }
                }
                (
                    "items"
                    | "additionalProperties"
                    | "not"
                    | "if"
                    | "then"
                    | "else"
                    | "contains"
                    | "propertyNames"
                    | "unevaluatedProperties"
                    | "unevaluatedItems",
                    Value::Object(sub),
                ) => walk(sub, &into(key), note, out, budget),
                _ => {}
            }
        }
    }
    let mut out = Vec::new();
    walk(schema, "", note, &mut out, &mut 10_000);
    out
}

/// The properties of an inputSchema that carry no description, as a session would fill them in:
/// `branch`, `filter.path`, `files[].name`, `tags.*` (additionalProperties), `pair[0]` (prefixItems),
/// depth first in the schema's own order. A local `$ref` (`#/$defs/x`) is followed, and the branches of
/// `anyOf`, `oneOf` and `allOf` are looked into; a property is described by its own description, that of
/// the schema its `$ref` points to, or one in each of its `anyOf` or `oneOf` branches.
pub fn undescribed(schema: &serde_json::Map<String, Value>) -> Vec<String> {
    struct Walk<'a> {
        root: &'a serde_json::Map<String, Value>,
        out: Vec<String>,
        /// The references being followed now: one met again is a cycle, not followed again.
        following: Vec<&'a str>,
        /// Whether the schema a reference points to is described, once worked out.
        known: std::collections::HashMap<&'a str, bool>,
        /// A reference already read at an input's path: read there again, it would say the same.
        walked: std::collections::HashSet<(&'a str, String)>,
        /// Schemas looked at, and the bytes of the paths made for them: a schema whose references
        /// branch at every level stops being read here, in time and memory.
        budget: usize,
    }
    impl<'a> Walk<'a> {
        /// The schema a local `$ref` points to (`#`, `#/$defs/x`, `#/definitions/x`).
        fn target(&self, reference: &str) -> Option<&'a serde_json::Map<String, Value>> {
            let pointer = reference.strip_prefix('#')?;
            if pointer.is_empty() {
                return Some(self.root);
            }
            let mut at = self.root;
            for token in pointer.strip_prefix('/')?.split('/') {
                let token = token.replace("~1", "/").replace("~0", "~");
                at = at.get(&token)?.as_object()?;
            }
            Some(at)
        }

        fn described(&mut self, schema: &'a Value, depth: usize) -> bool {
            match schema.as_object() {
                Some(s) => self.described_map(s, depth),
                // `false` forbids the property: there is nothing to put there.
                None => *schema == Value::Bool(false),
            }
        }

        fn described_map(&mut self, s: &'a serde_json::Map<String, Value>, depth: usize) -> bool {
            if s.get("description")
                .and_then(Value::as_str)
                .is_some_and(|d| !d.trim().is_empty())
            {
                return true;
            }
            // Past the limits nothing more is held against the plugin; nor is a reference this server
            // cannot follow, or one that leads back to itself.
            if depth > MAX_DEPTH || self.spent(1) {
                return true;
            }
            if let Some(reference) = s.get("$ref").and_then(Value::as_str) {
                let Some(target) = self.target(reference) else {
                    return true;
                };
                if self.following.contains(&reference) {
                    return true;
                }
                if let Some(known) = self.known.get(reference) {
                    return *known;
                }
                self.following.push(reference);
                let described = self.described_map(target, depth + 1);
                self.following.pop();
                self.known.insert(reference, described);
                return described;
            }
            ["anyOf", "oneOf"].iter().any(|k| {
                s.get(*k).and_then(Value::as_array).is_some_and(|b| {
                    !b.is_empty() && b.iter().all(|b| self.described(b, depth + 1))
                })
            })
        }

        /// Counts a schema looked at, at a cost that grows with the length of its input's path (each
        /// look may copy it); true once the budget is spent.
        fn spent(&mut self, cost: usize) -> bool {
            self.budget = self.budget.saturating_sub(cost);
            self.budget == 0
        }

        fn walk(&mut self, object: &'a serde_json::Map<String, Value>, at: &str, depth: usize) {
            // The schema compiled, so it is finite but for cycles through `$ref`; the depth ends those,
            // and keeps a pathological schema cheap.
            if depth > MAX_DEPTH || self.spent(1 + at.len() / 16) {
                return;
            }
            let join = |name: &str| {
                if at.is_empty() {
                    name.to_string()
                } else {
                    format!("{at}.{name}")
                }
            };
            if let Some(reference) = object.get("$ref").and_then(Value::as_str)
                && let Some(target) = self.target(reference)
                && !self.following.contains(&reference)
                && self.walked.insert((reference, at.to_string()))
            {
                self.following.push(reference);
                self.walk(target, at, depth + 1);
                self.following.pop();
            }
            if let Some(properties) = object.get("properties").and_then(Value::as_object) {
                for (name, property) in properties {
                    let path = join(name);
                    if !self.described(property, depth) {
                        self.out.push(path.clone());
                    }
                    if let Some(property) = property.as_object() {
                        self.walk(property, &path, depth + 1);
                    }
                }
            }
            if let Some(extra) = object
                .get("additionalProperties")
                .and_then(Value::as_object)
            {
                self.walk(extra, &join("*"), depth + 1);
            }
            if let Some(patterns) = object.get("patternProperties").and_then(Value::as_object) {
                for schema in patterns.values().filter_map(Value::as_object) {
                    self.walk(schema, &join("*"), depth + 1);
                }
            }
            // What the list's later items are (2020-12's items beside prefixItems, draft-07's
            // additionalItems beside its tuple).
            for key in ["items", "additionalItems"] {
                if let Some(items) = object.get(key).and_then(Value::as_object) {
                    self.walk(items, &format!("{at}[]"), depth + 1);
                }
            }
            // A schema applied when a property is given adds inputs at the same level.
            for key in ["dependentSchemas", "dependencies"] {
                for schema in object
                    .get(key)
                    .and_then(Value::as_object)
                    .into_iter()
                    .flat_map(|m| m.values())
                    .filter_map(Value::as_object)
                {
                    self.walk(schema, at, depth + 1);
                }
            }
            // `items` as an array is draft-07's tuple (2020-12's prefixItems).
            let tuples = ["prefixItems", "items"].map(|k| object.get(k).and_then(Value::as_array));
            for prefix in tuples.into_iter().flatten() {
                for (i, item) in prefix.iter().enumerate() {
                    if let Some(item) = item.as_object() {
                        self.walk(item, &format!("{at}[{i}]"), depth + 1);
                    }
                }
            }
            for key in ["anyOf", "oneOf", "allOf"] {
                for branch in object
                    .get(key)
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    if let Some(branch) = branch.as_object() {
                        self.walk(branch, at, depth + 1);
                    }
                }
            }
        }
    }
    const MAX_DEPTH: usize = 128;
    let mut w = Walk {
        root: schema,
        out: Vec::new(),
        following: Vec::new(),
        known: Default::default(),
        walked: Default::default(),
        budget: 10_000,
    };
    w.walk(schema, "", 0);
    // A required input no property describes is one a session must give, told nothing about it; among
    // properties, it is said by `required_unlisted`.
    if listed_properties(schema).is_empty() {
        w.out.extend(required_unlisted_by(schema));
    }
    // The same input reached by two branches (or two references) is named once.
    let mut seen = std::collections::HashSet::new();
    w.out.retain(|p| seen.insert(p.clone()));
    w.out
}

/// The names an inputSchema's root requires that its properties, which name others, lack: a slip of one
/// of them, most likely (`required: ["b"]` beside `a`).
pub fn required_unlisted(schema: &serde_json::Map<String, Value>) -> Vec<String> {
    // Patterns may name them: what they admit is not told apart here.
    if listed_properties(schema).is_empty() || schema.contains_key("patternProperties") {
        return Vec::new();
    }
    required_unlisted_by(schema)
}

/// The names of an inputSchema root's properties.
pub fn listed_properties(schema: &serde_json::Map<String, Value>) -> Vec<&str> {
    schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().map(String::as_str).collect())
        .unwrap_or_default()
}

/// The required names no property describes, where the root has no other schema to describe them in.
fn required_unlisted_by(schema: &serde_json::Map<String, Value>) -> Vec<String> {
    let composed = [
        "allOf",
        "anyOf",
        "oneOf",
        "$ref",
        "then",
        "dependentSchemas",
    ]
    .iter()
    .any(|k| schema.contains_key(*k));
    if composed {
        return Vec::new();
    }
    required_inputs(schema)
        .filter(|(_, property)| property.is_none())
        .take(64)
        .map(|(name, _)| name.to_string())
        .collect()
}

/// The inputs of an inputSchema's root that it requires and gives a `default`: defaults are not filled
/// in, so every call must give them (zod 4's `z.toJSONSchema` writes a `.default()` field required
/// unless asked for the input side).
pub fn required_with_default(schema: &serde_json::Map<String, Value>) -> Vec<String> {
    required_inputs(schema)
        .filter(|(_, property)| {
            property
                .and_then(Value::as_object)
                .is_some_and(|p| p.contains_key("default"))
        })
        .take(8)
        .map(|(name, _)| name.to_string())
        .collect()
}

/// A tool's schema, compiled with a keyword of ours in every subschema that charges each visit to a
/// budget: jsonschema has none of its own, and a schema whose `$ref`s branch and rejoin, or whose
/// `oneOf` recurses, can make one small value be checked millions of times (naming what it breaks walks
/// every branch at every level of the arguments).
pub struct Checker {
    validator: Box<jsonschema::Validator>,
    /// The schema as written, to show the part a refusal names (what `contains` asks for).
    schema: Value,
}

impl std::fmt::Debug for Checker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Checker")
    }
}

impl Checker {
    /// A built-in's schema, a constant of this crate (a test says each compiles).
    pub fn builtin(schema: &Value) -> Self {
        let latest = jsonschema::Draft::Draft202012;
        let validator = options(latest)
            .build(&stepped(schema))
            .or_else(|_| options(latest).build(&stepped(&serde_json::json!({"type": "object"}))))
            .expect("the empty object schema compiles");
        Self {
            validator: Box::new(validator),
            schema: schema.clone(),
        }
    }
}

fn options(draft: jsonschema::Draft) -> jsonschema::ValidationOptions<'static> {
    // Patterns run on the daemon's thread for every call: a linear-time engine, so no argument can stall
    // it (a pattern that needs backtracking, such as a backreference, is refused here instead).
    // `format` is a note in every draft, as 2019-09 on have it (drafts 4 to 7 let a validator check
    // it, and jsonschema does): one rule, the one docs/plugins.md says.
    jsonschema::options()
        .with_draft(draft)
        .should_validate_formats(false)
        .with_pattern_options(jsonschema::PatternOptions::regex())
        .with_keyword(STEP, |_, _, _| Ok(Box::new(Step)))
}

/// The keyword `stepped` adds to every subschema; unknown to any schema a plugin could give.
const STEP: &str = "x-ovai-step";

/// The steps a check (or the naming after it) may take: this many, and four for each byte of the
/// arguments, so large flat arguments are named as ever while a walk that multiplies stops within
/// milliseconds.
const BASE_STEPS: u64 = 50_000;

thread_local! {
    /// The steps a walk has left on this thread, while it runs.
    static STEPS_LEFT: std::cell::Cell<Option<u64>> = const { std::cell::Cell::new(None) };
}

/// What unwinds out of a walk that spent its steps: the only way to stop a jsonschema walk midway.
pub struct Spent;

/// Keeps a spent walk's unwinding out of the panic hook's words (it is caught where it starts).
pub fn quiet_when_spent() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if info.payload().downcast_ref::<Spent>().is_none() {
            previous(info);
        }
    }));
}

struct Step;

impl Step {
    /// A visit costs more the larger the value its keywords read (a pattern reads a whole string).
    fn step(instance: &Value) {
        charge(
            1 + match instance {
                Value::String(s) => s.len() as u64 / 256,
                Value::Array(items) => items.len() as u64 / 64,
                Value::Object(members) => members.len() as u64 / 64,
                _ => 0,
            },
        );
    }
}

/// Takes `cost` from the steps the walk on this thread has left (a check, or the naming after it):
/// past them it unwinds with `Spent`, which `within` catches.
fn charge(cost: u64) {
    STEPS_LEFT.with(|left| {
        if let Some(n) = left.get() {
            match n.checked_sub(cost) {
                Some(rest) => left.set(Some(rest)),
                None => std::panic::panic_any(Spent),
            }
        }
    });
}

impl<'i> jsonschema::Keyword<'i> for Step {
    fn validate(&self, instance: &'i Value) -> Result<(), jsonschema::ValidationError<'i>> {
        Self::step(instance);
        Ok(())
    }
    fn is_valid(&self, instance: &'i Value) -> bool {
        Self::step(instance);
        true
    }
}

/// `schema` with `STEP` in every object that may be a subschema: all but the values of `const`, `enum`,
/// `default` and `examples`, the names lists and maps that hold no schemas, and (rather than the maps of
/// `properties` and the like, where it would name a property) the schemas in those maps.
fn stepped(schema: &Value) -> Value {
    match schema {
        Value::Object(map) => {
            let mut out = serde_json::Map::with_capacity(map.len() + 1);
            out.insert(STEP.into(), Value::Bool(true));
            for (key, value) in map {
                let value = match key.as_str() {
                    "const" | "enum" | "default" | "examples" | "required"
                    | "dependentRequired" | "discriminator" | "$vocabulary" => value.clone(),
                    "properties" | "patternProperties" | "$defs" | "definitions"
                    | "dependentSchemas" | "dependencies" => match value {
                        Value::Object(schemas) => Value::Object(
                            schemas
                                .iter()
                                .map(|(k, v)| (k.clone(), stepped(v)))
                                .collect(),
                        ),
                        other => other.clone(),
                    },
                    _ => stepped(value),
                };
                out.insert(key.clone(), value);
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(stepped).collect()),
        other => other.clone(),
    }
}

/// Why a plugin's inputSchema cannot be served, as the end of its runtime.log row.
pub fn compile(schema: &Value) -> Result<Checker, String> {
    let Value::Object(root) = schema else {
        return Err("its inputSchema is not an object schema: it is not an object".into());
    };
    match root.get("type") {
        Some(Value::String(t)) if t == "object" => {}
        Some(other) => {
            return Err(format!(
                "its inputSchema is not an object schema: its type is {other}, not \"object\""
            ));
        }
        None => {
            return Err("its inputSchema is not an object schema: it has no \"type\": \"object\" at its root".into());
        }
    }
    // Said after what breaks the draft's rules, if anything does: fixed for one, it would be refused
    // for the other.
    let no_call = no_call_could_pass(root);
    let and_no_call = |said: String| match &no_call {
        Some(why) => format!("{said}; and {why}"),
        None => said,
    };
    let mut ids = std::collections::HashSet::new();
    ids_in(schema, &mut ids);
    if let Some(r) = external_ref(schema, &ids) {
        return Err(and_no_call(format!(
            "its inputSchema refers to {r} outside itself; a tool's schema must stand on its own (a $ref starts \
             with #, or names an $id of the schema)"
        )));
    }
    let named = dialect(schema);
    let draft = named.unwrap_or(jsonschema::Draft::Draft202012);
    // Which draft judged it: a schema valid in the draft its author meant may not be in another.
    let read_as = match root.get("$schema").and_then(Value::as_str) {
        None => format!("read as {}: it names no $schema", draft_name(draft)),
        Some(uri) if named.is_none() => format!(
            "read as 2020-12: its $schema {} names no draft this server reads",
            crate::names::clipped(&Value::String(uri.into()).to_string(), 120)
        ),
        Some(_) => format!("read as {}, as its $schema says", draft_name(draft)),
    };
    let checks = options(draft).build(schema).map_err(|e| {
        let first = breaks(schema, &e, &read_as);
        // Every place the draft's rules are broken, so one check names what to fix at once.
        let at = e.instance_path().to_string();
        // A second type slip is named with the type meant, as the first is (helper-104).
        let others: Vec<String> = broken_places(draft, schema, &at)
            .into_iter()
            .map(|place| match type_slip(schema, &place) {
                Some((named, meant)) => {
                    format!("{place} (the type {named}, which is no JSON Schema type{meant})")
                }
                None => place,
            })
            .collect();
        and_no_call(if others.is_empty() {
            first
        } else {
            format!(
                "{first}; its draft's rules are broken at {} too",
                crate::names::listed(&others, "and")
            )
        })
    })?;
    if let Some(why) = no_call {
        return Err(why);
    }
    // Errors were said from the schema as written; what serves is the one with the budget's keyword.
    let validator = options(draft)
        .build(&stepped(schema))
        .map(Box::new)
        .unwrap_or_else(|_| Box::new(checks));
    Ok(Checker {
        validator,
        schema: schema.clone(),
    })
}

/// The places other than `first` where a schema breaks its draft's meta-schema, at most five.
fn broken_places(draft: jsonschema::Draft, schema: &Value, first: &str) -> Vec<String> {
    use jsonschema::Draft;
    let meta = match draft {
        Draft::Draft4 => jsonschema::draft4::meta::validator(),
        Draft::Draft6 => jsonschema::draft6::meta::validator(),
        Draft::Draft7 => jsonschema::draft7::meta::validator(),
        Draft::Draft201909 => jsonschema::draft201909::meta::validator(),
        _ => jsonschema::draft202012::meta::validator(),
    };
    let mut places: Vec<String> = Vec::new();
    for e in meta.iter_errors(schema).take(64) {
        let at = e.instance_path().to_string();
        if !at.is_empty() && at != first && !places.contains(&at) && places.len() < 5 {
            places.push(at);
        }
    }
    places
}

/// The type named at `at` when it is no JSON Schema type, as (the name quoted, the way out: ": meant
/// \"string\"?", or nothing).
fn type_slip(schema: &Value, at: &str) -> Option<(String, String)> {
    if !at.ends_with("/type") || names_a_map(at) {
        return None;
    }
    let value = schema.pointer(at)?;
    let Value::String(named) = value else {
        return None;
    };
    if is_type(value) {
        return None;
    }
    let meant = match named.as_str() {
        "any" => ": leave type out to take any value".to_string(),
        _ => meant_type(named)
            .map(|t| format!(": meant \"{t}\"?"))
            .unwrap_or_default(),
    };
    let shown = crate::names::clipped(&Value::String(named.clone()).to_string(), 64);
    Some((shown.to_string(), meant))
}

/// Why `schema` did not compile, as the end of its row: the first fault, and the way out where one is
/// known.
fn breaks(schema: &Value, e: &jsonschema::ValidationError<'_>, read_as: &str) -> String {
    // Where in the plugin's schema: the instance path when the schema failed the meta-schema,
    // the keyword's own path when it failed to compile.
    let at = match e.instance_path().to_string() {
        p if p.is_empty() => e.schema_path().to_string(),
        p => p,
    };
    if at.ends_with("/pattern") || at.contains("/patternProperties") {
        // The regex crate does not say apart a slip (`([a-`) from what it leaves out on purpose
        // (backreferences): the row says what it reads.
        format!(
            "its inputSchema has a pattern this server cannot read (at {at}: {e}); patterns are read with \
                     the regex crate's syntax, which checks in linear time and has no backreferences or lookaround"
        )
    } else if let Some((named, meant)) = type_slip(schema, &at) {
        // The meta-schema's words ("is not valid under any of the schemas listed in the 'anyOf'
        // keyword") name neither the types there are nor the one meant.
        format!(
            "its inputSchema has the type {named} at {at}, which is no JSON Schema type (array, boolean, \
                     integer, null, number, object, string){meant}"
        )
    } else if at.ends_with("/required") && schema.pointer(&at).is_some_and(Value::is_boolean) {
        // Draft-03's habit: a property marked required in itself.
        format!(
            "its inputSchema has required: {} at {at}: required is a list of names, on the object \
                     schema that holds the properties (\"required\": [\"name\"]), not a mark on one",
            schema.pointer(&at).unwrap_or(&Value::Null)
        )
    } else if at.is_empty() {
        // No place to point at (a $ref to nothing): the error names what is wrong.
        format!("its inputSchema is not a valid JSON schema ({read_as}): {e}")
    } else {
        let tuple = at.ends_with("/items") && schema.pointer(&at).is_some_and(Value::is_array);
        let hint = if tuple {
            "; items as an array is draft-07's tuple: write prefixItems, or name draft-07 in $schema"
        } else {
            ""
        };
        format!("its inputSchema is not a valid JSON schema (at {at}, {read_as}): {e}{hint}")
    }
}

/// Whether `named` is one of JSON Schema's seven types.
fn is_type(named: &Value) -> bool {
    matches!(
        named.as_str(),
        Some("array" | "boolean" | "integer" | "null" | "number" | "object" | "string")
    )
}

/// Whether a pointer's last token is a name in a map of schemas (`/properties/type`: a property called
/// type), not a keyword of a schema.
fn names_a_map(at: &str) -> bool {
    let mut tokens = at.rsplit('/');
    tokens.next();
    matches!(
        tokens.next(),
        Some("properties" | "patternProperties" | "$defs" | "definitions" | "dependentSchemas")
    )
}

/// The JSON Schema type a type that is none most likely meant: another language's name for it (`int`,
/// `float`, `bool`, `dict`), or a slip (`sting`).
fn meant_type(named: &str) -> Option<&'static str> {
    const TYPES: [&str; 7] = [
        "array", "boolean", "integer", "null", "number", "object", "string",
    ];
    let lower = named.to_ascii_lowercase();
    let other = match lower.as_str() {
        "int" | "long" | "int32" | "int64" | "uint" | "i32" | "i64" | "u32" | "u64" | "usize" => {
            Some("integer")
        }
        "float" | "double" | "decimal" | "f32" | "f64" | "real" | "bigint" => Some("number"),
        "bool" => Some("boolean"),
        "str" | "text" | "char" | "date" | "datetime" | "uuid" | "email" | "uri" | "url" => {
            Some("string")
        }
        "dict" | "map" | "record" | "struct" | "hash" => Some("object"),
        "list" | "tuple" | "vec" | "set" => Some("array"),
        "none" | "nil" => Some("null"),
        _ => None,
    };
    other.or_else(|| {
        TYPES
            .into_iter()
            .find(|t| *t == lower || crate::names::distance(&lower, t) <= 2)
    })
}

/// The draft a schema is read in: the one its `$schema` names, 2020-12 when it names none (as MCP
/// says). `None` for a `$schema` naming no draft this server reads, which is then read as 2020-12.
fn dialect(schema: &Value) -> Option<jsonschema::Draft> {
    dialect_of(schema.get("$schema").and_then(Value::as_str))
}

fn dialect_of(uri: Option<&str>) -> Option<jsonschema::Draft> {
    match uri {
        None => Some(jsonschema::Draft::Draft202012),
        Some(uri) => match jsonschema::Draft::from_schema_uri(uri) {
            jsonschema::Draft::Unknown => None,
            draft => Some(draft),
        },
    }
}

/// The `$schema` of an inputSchema that names no draft this server reads, for a row: its schema is read
/// as 2020-12, which may not be what its author meant.
pub fn unknown_dialect(schema: &serde_json::Map<String, Value>) -> Option<&str> {
    let uri = schema.get("$schema")?.as_str()?;
    dialect_of(Some(uri)).is_none().then_some(uri)
}

/// Every `$id` a schema gives itself or its parts (typebox's `Type.Recursive` refers to one by name).
fn ids_in<'v>(v: &'v Value, ids: &mut std::collections::HashSet<&'v str>) {
    match v {
        Value::Object(map) => {
            if let Some(id) = map.get("$id").and_then(Value::as_str) {
                ids.insert(id.trim_end_matches('#'));
            }
            map.values().for_each(|inner| ids_in(inner, ids));
        }
        Value::Array(items) => items.iter().for_each(|inner| ids_in(inner, ids)),
        _ => {}
    }
}

/// The first `$ref` that leaves the document (neither `#…` nor an `$id` of its own): the daemon never
/// fetches a URL or reads a file for a schema.
fn external_ref(v: &Value, ids: &std::collections::HashSet<&str>) -> Option<String> {
    match v {
        Value::Object(map) => {
            for (k, inner) in map {
                if (k == "$ref" || k == "$dynamicRef")
                    && inner.as_str().is_some_and(|r| {
                        !r.starts_with('#') && !ids.contains(r.split('#').next().unwrap_or(r))
                    })
                {
                    return Some(inner.to_string());
                }
                if let Some(r) = external_ref(inner, ids) {
                    return Some(r);
                }
            }
            None
        }
        Value::Array(items) => items.iter().find_map(|inner| external_ref(inner, ids)),
        _ => None,
    }
}

/// At most this many violations are named in one refusal.
const MAX_NAMED: usize = 5;

/// A violation is shown in at most this many characters: its words quote the value that broke it.
const MAX_SHOWN_CHARS: usize = 300;

/// `Err` with a sentence naming what the arguments break, for the caller to fix and call again.
/// `text_len`: the arguments' length as written, which the budget grows with.
pub fn check(checker: &Checker, tool: &str, args: &Value, text_len: usize) -> Result<(), String> {
    let steps = BASE_STEPS.saturating_add(4u64.saturating_mul(text_len as u64));
    let validator = &checker.validator;
    // The common case costs one walk of the arguments; naming the violations is for the rare one.
    match within(steps, || validator.is_valid(args)) {
        Walk::Done(true) => return Ok(()),
        Walk::Done(false) => {}
        Walk::Spent => {
            return Err(format!(
                "The arguments could not be checked against the inputSchema of {tool} in reasonable time, so \
                 it was not run: its schema has each value checked over and over. Send simpler arguments, or \
                 ask for a simpler schema."
            ));
        }
        Walk::Failed => return Err(failed(tool)),
    }
    let (problems, more) = match within(steps, || name(checker, args)) {
        Walk::Done(named) => named,
        Walk::Spent => {
            return Err(format!(
                "The arguments do not fit the inputSchema of {tool}, so it was not run; naming where would take \
                 too long. Call it again with arguments that fit."
            ));
        }
        Walk::Failed => return Err(failed(tool)),
    };
    if problems.is_empty() {
        return Ok(());
    }
    let mut s = format!(
        "The arguments do not fit the inputSchema of {tool}, so it was not run: {}",
        problems.join("; ")
    );
    if more > 0 {
        s.push_str(&format!(" (and {more} more)"));
    }
    s.push_str(". Call it again with arguments that fit.");
    Err(s)
}

fn failed(tool: &str) -> String {
    format!(
        "The arguments could not be checked against the inputSchema of {tool}: the schema checker failed \
         on them, so it was not run. Call it again with other arguments."
    )
}

enum Walk<T> {
    Done(T),
    /// Its steps ran out.
    Spent,
    /// It panicked (a fault in the checker, said in the daemon's log by the panic hook).
    Failed,
}

/// `walk` with `steps` to take on this thread.
fn within<T>(steps: u64, walk: impl FnOnce() -> T) -> Walk<T> {
    STEPS_LEFT.with(|left| left.set(Some(steps)));
    let done = std::panic::catch_unwind(std::panic::AssertUnwindSafe(walk));
    STEPS_LEFT.with(|left| left.set(None));
    match done {
        Ok(v) => Walk::Done(v),
        Err(payload) if payload.downcast_ref::<Spent>().is_some() => Walk::Spent,
        Err(_) => Walk::Failed,
    }
}

/// The first violations, clipped (the budget's keyword taken out of the schemas they quote), and how
/// many more.
fn name(checker: &Checker, args: &Value) -> (Vec<String>, usize) {
    let mut problems: Vec<String> = Vec::new();
    let mut more = 0;
    for e in checker.validator.iter_errors(args) {
        if problems.len() == MAX_NAMED {
            more += 1;
            continue;
        }
        problems.push(said(checker, &e, "", 0));
    }
    (problems, more)
}

/// One violation in words, its place said from `within` (where the choice it is part of was made). A
/// value that fits none of a choice's schemas is told what each one wanted, which the checker's own
/// words ("is not valid under any of the schemas listed") leave out; `depth` choices in, in those words
/// (each level would say four times as much).
fn said(
    checker: &Checker,
    e: &jsonschema::ValidationError<'_>,
    within: &str,
    depth: usize,
) -> String {
    use jsonschema::error::ValidationErrorKind as Kind;
    charge(8);
    let at = e.instance_path().to_string();
    let place = match at.strip_prefix(within) {
        Some("") => String::new(),
        _ => format!("at {at}: "),
    };
    // Inside a choice, a fault at the place the choice was made is of the value named with the choice.
    let value = || {
        if depth > 0 && at == within {
            "it".to_string()
        } else {
            value_of(e)
        }
    };
    let words = match e.kind() {
        Kind::AnyOf { context } | Kind::OneOfNotValid { context } => {
            // One choice whose faults lie deeper in the value than every other's is the one its sender
            // meant (a tree's entry that is a folder): its fault is said as if it stood alone.
            if let Some(closest) = closest(context, reach(e)) {
                return said(checker, closest, within, depth);
            }
            if depth >= 2 {
                e.masked_with(value()).to_string()
            } else {
                // The first few, each in a few words: a schema may offer hundreds.
                let mut each: Vec<String> = context
                    .iter()
                    .take(CHOICES_SHOWN)
                    .enumerate()
                    .map(|(i, errors)| {
                        let wanted: Vec<String> = errors
                            .iter()
                            .take(2)
                            .map(|b| said(checker, b, &at, depth + 1))
                            .collect();
                        format!("the {}: {}", ordinal(i + 1), wanted.join(", "))
                    })
                    .collect();
                if context.len() > CHOICES_SHOWN {
                    each.push(format!("and {} more", context.len() - CHOICES_SHOWN));
                }
                format!(
                    "{} fits none of the {} choices its '{}' gives ({})",
                    value(),
                    context.len(),
                    e.kind().keyword(),
                    each.join("; ")
                )
            }
        }
        Kind::OneOfMultipleValid { context } => {
            let fits: Vec<String> = context
                .iter()
                .enumerate()
                .filter(|(_, errors)| errors.is_empty())
                .take(CHOICES_SHOWN)
                .map(|(i, _)| format!("the {}", ordinal(i + 1)))
                .collect();
            format!(
                "{} fits more than one of the choices its 'oneOf' gives ({}), and must fit exactly one",
                value(),
                fits.join(" and ")
            )
        }
        Kind::Not { schema } => format!(
            "{} is what its 'not' rules out ({})",
            value(),
            crate::names::clipped(&schema.to_string(), 120)
        ),
        Kind::Contains => {
            let wanted = checker
                .schema
                .pointer(&e.schema_path().to_string())
                .map(|s| format!(" ({})", crate::names::clipped(&s.to_string(), 120)))
                .unwrap_or_default();
            format!("none of its items fits its 'contains'{wanted}, and at least one must")
        }
        // The checker's words for these are broken ("is not one of .") or its own ("False schema").
        Kind::Enum { options } if options.as_array().is_some_and(Vec::is_empty) => {
            "no value may be given there (its enum lists none)".to_string()
        }
        Kind::FalseSchema => "nothing may be given there (its schema is false)".to_string(),
        // The checker names two and counts the rest ("or 5 other candidates"): a caller told only two
        // of seven guesses again. Every one is named, up to sixteen.
        Kind::Enum { options } if options.as_array().is_some_and(|o| o.len() <= 16) => {
            let named: Vec<String> = options
                .as_array()
                .into_iter()
                .flatten()
                .map(|o| crate::names::clipped(&o.to_string(), 60))
                .collect();
            let listed = match named.split_last() {
                Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
                _ => named.join(""),
            };
            format!("{} is not one of {listed}", value())
        }
        _ => e.masked_with(value()).to_string(),
    };
    let said = format!("{place}{words}")
        .replace(&format!("\"{STEP}\":true,"), "")
        .replace(&format!("\"{STEP}\":true"), "");
    // A choice's words are clipped whole, each choice's within them.
    let most = match (depth, e.kind()) {
        (0, Kind::AnyOf { .. } | Kind::OneOfNotValid { .. }) => MAX_SHOWN_CHARS * 2,
        (0, _) => MAX_SHOWN_CHARS,
        _ => MAX_SHOWN_CHARS / 3,
    };
    match said.char_indices().nth(most) {
        Some((cut, _)) => format!("{}…", &said[..cut]),
        None => said,
    }
}

/// How many of a choice's schemas a refusal says what they wanted.
const CHOICES_SHOWN: usize = 4;

/// The value at a violation's place as JSON, its first 60 bytes and its size past that; never written
/// out whole (it may be megabytes, and a long one would crowd out what is wrong with it).
fn value_of(e: &jsonschema::ValidationError<'_>) -> String {
    const SHOWN: usize = 60;
    /// Takes bytes up to its bound, then refuses the rest, which ends serde_json's writing.
    struct Cut(Vec<u8>);
    impl std::io::Write for Cut {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            let room = (SHOWN + 1).saturating_sub(self.0.len());
            if room == 0 {
                return Err(std::io::ErrorKind::WriteZero.into());
            }
            let n = b.len().min(room);
            self.0.extend_from_slice(&b[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let value = e.instance();
    let mut cut = Cut(Vec::new());
    let whole = serde_json::to_writer(&mut cut, value.as_ref()).is_ok() && cut.0.len() <= SHOWN;
    let text = String::from_utf8_lossy(&cut.0[..cut.0.len().min(SHOWN)]).into_owned();
    if whole {
        return text;
    }
    // A character cut in two shows as U+FFFD: left out.
    let text = text.trim_end_matches('\u{fffd}');
    let size = match value.as_ref() {
        Value::String(s) => format!(" (a string of {} bytes)", s.len()),
        Value::Array(a) => format!(" (an array of {} items)", a.len()),
        Value::Object(o) => format!(" (an object of {} keys)", o.len()),
        _ => String::new(),
    };
    format!("{text}…{size}")
}

/// How deep in the value an error's place is.
/// Charged to the naming's steps, as every look at an error is: an error tree reread at each level of a
/// deeply nested value held the daemon's thread for half a minute (helper-49).
fn reach(e: &jsonschema::ValidationError<'_>) -> usize {
    let path = e.instance_path().as_str();
    charge(1 + path.len() as u64 / 64);
    path.matches('/').count()
}

/// The fault that reaches deepest into the value, of the one choice that comes closest: the fewest
/// faults at the value's own place (`past`: a key it requires, a type), then the deepest fault inside
/// it. None when no choice stands out.
fn closest<'e>(
    context: &'e [Vec<jsonschema::ValidationError<'static>>],
    past: usize,
) -> Option<&'e jsonschema::ValidationError<'static>> {
    // The deepest place each fault comes to, through the choices inside it.
    fn deepest(e: &jsonschema::ValidationError<'static>) -> usize {
        use jsonschema::error::ValidationErrorKind as Kind;
        match e.kind() {
            Kind::AnyOf { context } | Kind::OneOfNotValid { context } => context
                .iter()
                .flatten()
                .map(deepest)
                .max()
                .unwrap_or(0)
                .max(reach(e)),
            _ => reach(e),
        }
    }
    let mut best: Option<(
        (usize, std::cmp::Reverse<usize>),
        &jsonschema::ValidationError<'static>,
    )> = None;
    let mut tied = false;
    for errors in context {
        let Some(fault) = errors.iter().max_by_key(|f| deepest(f)) else {
            continue;
        };
        let at_its_place = errors.iter().filter(|f| reach(f) <= past).count();
        let key = (at_its_place, std::cmp::Reverse(deepest(fault)));
        match &best {
            Some((b, _)) if key > *b => {}
            Some((b, _)) if key == *b => tied = true,
            _ => {
                best = Some((key, fault));
                tied = false;
            }
        }
    }
    best.filter(|((_, deepest), _)| !tied && deepest.0 > past)
        .map(|(_, f)| f)
}

fn ordinal(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn references_that_branch_at_every_level_are_read_within_a_budget() {
        // Each definition points twice to the next, twenty deep: 2^20 paths if each were followed.
        let mut defs = serde_json::Map::new();
        for i in 0..20 {
            let next = format!("#/$defs/d{}", i + 1);
            defs.insert(
                format!("d{i}"),
                json!({ "type": "object", "anyOf": [{ "$ref": next }, { "$ref": next }], "properties": { "x": { "type": "string" } } }),
            );
        }
        defs.insert("d20".into(), json!({ "type": "string" }));
        let schema = json!({ "type": "object", "$defs": defs, "properties": { "top": { "$ref": "#/$defs/d0" }, "me": { "$ref": "#" } } });
        let found = undescribed(schema.as_object().unwrap());
        assert_eq!(found.first().map(String::as_str), Some("top"));
        assert!(found.contains(&"top.x".to_string()), "{found:?}");
        assert!(found.len() < 100, "{found:?}");
    }

    #[test]
    fn long_names_under_branching_references_cost_no_more_than_the_budget() {
        // Each definition's two properties, of long names, both point to the next: paths grow by the
        // name at each level, and double in number.
        let name = "n".repeat(3000);
        let mut defs = serde_json::Map::new();
        for i in 0..64 {
            let next = json!({ "$ref": format!("#/$defs/d{}", i + 1) });
            defs.insert(
                format!("d{i}"),
                json!({ "type": "object", "properties": { format!("{name}a"): next.clone(), format!("{name}b"): next } }),
            );
        }
        defs.insert("d64".into(), json!({ "type": "string" }));
        let schema = json!({ "type": "object", "$defs": defs, "properties": { "top": { "$ref": "#/$defs/d0" } } });
        let found = undescribed(schema.as_object().unwrap());
        let bytes: usize = found.iter().map(String::len).sum();
        assert!(bytes < 1 << 20, "{} paths, {bytes} bytes", found.len());
    }

    #[test]
    fn only_object_schemas_that_stand_alone() {
        assert!(compile(&json!({"type": "object"})).is_ok());
        assert!(
            compile(&json!({"type": "string"}))
                .unwrap_err()
                .contains("its type is \"string\"")
        );
        assert!(compile(&json!({})).unwrap_err().contains("no \"type\""));
        let e = compile(
            &json!({"type": "object", "properties": {"a": {"$ref": "https://example.com/s.json"}}}),
        )
        .unwrap_err();
        assert!(e.contains("https://example.com/s.json"), "{e}");
        assert!(compile(&json!({"type": "object", "$defs": {"a": {"type": "string"}}, "properties": {"x": {"$ref": "#/$defs/a"}}})).is_ok());
        let e = compile(&json!({"type": "object", "properties": {"a": {"type": 5}}})).unwrap_err();
        assert!(e.contains("not a valid JSON schema"), "{e}");
        let e = compile(&json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "^(a|a)*\\1b$"}}}))
            .unwrap_err();
        assert!(
            e.contains("a pattern this server cannot read") && e.contains("/properties/a/pattern"),
            "{e}"
        );
        // A slip in the pattern is said in the same words, not taken for a backtracking one.
        let e = compile(
            &json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "([a-"}}}),
        )
        .unwrap_err();
        assert!(
            e.contains("cannot read (at /properties/a/pattern") && !e.contains("cannot check in"),
            "{e}"
        );
        assert!(compile(&json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "^[a-z]+$"}}})).is_ok());
    }

    /// As the README says: `format` is a note in 2020-12, and a value it does not describe still passes.
    #[test]
    fn format_is_not_checked() {
        let v = compile(&json!({"type": "object", "properties": {
            "e": {"type": "string", "format": "email"},
            "t": {"type": "string", "format": "date-time"}
        }}))
        .unwrap();
        assert!(
            check(
                &v,
                "x",
                &json!({"e": "not an address", "t": "yesterday"}),
                0
            )
            .is_ok()
        );
    }

    #[test]
    fn a_ref_to_nothing_is_said_without_an_empty_place() {
        let e = compile(&json!({"type": "object", "properties": {"n": {"$ref": "#/$defs/nope"}}}))
            .unwrap_err();
        assert!(
            e.starts_with("its inputSchema is not a valid JSON schema"),
            "{e}"
        );
        assert!(!e.contains("(at )"), "{e}");
        assert!(e.contains("nope"), "{e}");
    }

    /// A schema broken twice over is named for both: fixed for one, it would be refused for the other.
    #[test]
    fn a_broken_schema_no_call_could_pass_is_named_for_both() {
        let e = compile(
            &json!({"type": "object", "properties": {"a": {"type": "int", "description": "x"}},
            "required": ["b"], "additionalProperties": false}),
        )
        .unwrap_err();
        assert!(e.starts_with("its inputSchema has the type \"int\""), "{e}");
        assert!(
            e.ends_with(
                "; and its inputSchema requires \"b\", which is not among its properties, and its \
                         additionalProperties is false, so no call could pass it"
            ),
            "{e}"
        );
    }

    #[test]
    fn a_schema_no_call_could_pass_is_refused() {
        let e =
            compile(&json!({"type": "object", "required": ["a"], "additionalProperties": false}))
                .unwrap_err();
        assert!(
            e.contains("requires \"a\", which is not among its properties"),
            "{e}"
        );
        // A pattern may admit it; without `additionalProperties: false` anything may come.
        assert!(
            compile(
                &json!({"type": "object", "required": ["a"], "additionalProperties": false,
                "patternProperties": {"^a$": {}}})
            )
            .is_ok()
        );
        assert!(compile(&json!({"type": "object", "required": ["a"]})).is_ok());
        assert!(
            compile(
                &json!({"type": "object", "properties": {"a": {}}, "required": ["a"],
                "additionalProperties": false})
            )
            .is_ok()
        );
    }

    #[test]
    fn violations_are_named() {
        let v = compile(&json!({
            "type": "object",
            "properties": {"branch": {"type": "string"}},
            "required": ["branch"],
            "additionalProperties": false
        }))
        .unwrap();
        assert!(check(&v, "ci", &json!({"branch": "main"}), 0).is_ok());
        let e = check(&v, "ci", &json!({}), 0).unwrap_err();
        assert!(e.contains("\"branch\" is a required property"), "{e}");
        let e = check(&v, "ci", &json!({"branch": 5}), 0).unwrap_err();
        assert!(e.contains("at /branch"), "{e}");
        let e = check(&v, "ci", &json!({"branch": "x", "extra": 1}), 0).unwrap_err();
        assert!(e.contains("extra"), "{e}");
    }

    #[test]
    fn an_enum_refusal_names_every_choice() {
        let v = compile(&json!({
            "type": "object",
            "properties": {"mode": {"enum": ["config", "write", "read", "list", "sync", "push", 7]}},
        }))
        .unwrap();
        let e = check(&v, "t", &json!({"mode": "nope"}), 0).unwrap_err();
        assert!(
            e.contains(
                r#""nope" is not one of "config", "write", "read", "list", "sync", "push" or 7"#
            ),
            "{e}"
        );
    }

    #[test]
    fn a_long_value_is_shown_cut_and_what_is_wrong_with_it_whole() {
        let mut choices = Vec::new();
        for _ in 0..60 {
            choices.push(json!({ "type": "integer" }));
        }
        let v = compile(&json!({
            "type": "object",
            "properties": {
                "service": { "type": "string", "maxLength": 40 },
                "wide": { "anyOf": choices },
                "cron": { "type": "object", "oneOf": [ { "required": ["cron"] }, { "required": ["every"] } ] },
                "notify": { "type": "string", "not": { "enum": ["everyone"] } }
            }
        }))
        .unwrap();
        let long = "a".repeat(400);
        let e = check(&v, "t", &json!({ "service": long }), 400).unwrap_err();
        assert!(
            e.contains(&format!(
                "at /service: \"{}… (a string of 400 bytes) is longer than 40 characters.",
                "a".repeat(59)
            )),
            "{e}"
        );
        // Hundreds of choices against a long value: a few said, the rest counted, in bounded words.
        let long = "a".repeat(4400);
        let e = check(&v, "t", &json!({ "wide": long }), 4400).unwrap_err();
        assert!(
            e.contains(&format!("at /wide: \"{}… (a string of 4400 bytes) fits none of the 60 choices its 'anyOf' gives (the 1st: it is not of type \"integer\"; the 2nd: it is not of type \"integer\"; the 3rd: it is not of type \"integer\"; the 4th: it is not of type \"integer\"; and 56 more).", "a".repeat(59))),
            "{e}"
        );
        assert!(e.len() < 1500, "{} bytes: {e}", e.len());
        let e = check(
            &v,
            "t",
            &json!({ "cron": { "cron": "* * * * *", "every": 5 } }),
            0,
        )
        .unwrap_err();
        assert!(
            e.contains("at /cron: {\"cron\":\"* * * * *\",\"every\":5} fits more than one of the choices its 'oneOf' gives (the 1st and the 2nd), and must fit exactly one."),
            "{e}"
        );
        let e = check(&v, "t", &json!({ "notify": "everyone" }), 0).unwrap_err();
        assert!(
            e.contains(
                "at /notify: \"everyone\" is what its 'not' rules out ({\"enum\":[\"everyone\"]})."
            ),
            "{e}"
        );
    }

    #[test]
    fn naming_faults_deep_in_a_value_is_charged_to_the_budget() {
        // Each level of a choice reread the error tree below it: 20,000 faults 120 levels down held
        // the daemon's thread for half a minute (helper-49).
        let v = compile(&json!({
            "type": "object",
            "$defs": { "n": { "anyOf": [ { "type": "array", "items": { "$ref": "#/$defs/n" } }, { "type": "integer" } ] } },
            "properties": { "t": { "$ref": "#/$defs/n" } }
        }))
        .unwrap();
        let mut t = Value::Array(vec![json!(""); 20_000]);
        for _ in 0..119 {
            t = Value::Array(vec![t]);
        }
        let args = json!({ "t": t });
        let len = args.to_string().len();
        let e = check(&v, "cat", &args, len).unwrap_err();
        assert_eq!(
            e,
            "The arguments do not fit the inputSchema of cat, so it was not run; naming where would take too \
             long. Call it again with arguments that fit."
        );
    }

    #[test]
    fn a_place_nothing_may_fill_is_said_in_words() {
        let v = compile(&json!({
            "type": "object",
            "properties": { "k": { "enum": [] }, "f": false }
        }))
        .unwrap();
        let e = check(&v, "t", &json!({ "k": "a" }), 0).unwrap_err();
        assert!(
            e.contains("at /k: no value may be given there (its enum lists none)."),
            "{e}"
        );
        let e = check(&v, "t", &json!({ "f": 1 }), 0).unwrap_err();
        assert!(
            e.contains("at /f: nothing may be given there (its schema is false)."),
            "{e}"
        );
    }

    #[test]
    fn a_value_that_fits_no_choice_is_told_what_each_wanted() {
        // "is not valid under any of the schemas listed in the 'anyOf' keyword" left the model to guess
        // which key or type was wrong.
        let v = compile(&json!({
            "type": "object",
            "properties": {
                "pick": { "anyOf": [
                    { "type": "object", "properties": { "a": { "type": "string" } }, "additionalProperties": false },
                    { "type": "null" }
                ] },
                "mode": { "oneOf": [ { "const": "fast" }, { "type": "integer", "minimum": 1 } ] },
                "tags": { "type": "array", "contains": { "const": "urgent" } }
            }
        }))
        .unwrap();
        let e = check(&v, "t", &json!({ "pick": { "a": "x", "b": 1 } }), 0).unwrap_err();
        assert!(
            e.contains("at /pick: {\"a\":\"x\",\"b\":1} fits none of the 2 choices its 'anyOf' gives (the 1st: Additional properties are not allowed ('b' was unexpected); the 2nd: it is not of type \"null\")"),
            "{e}"
        );
        // The choice that comes closest, by how deep in the value its fault lies, is said alone.
        let e = check(&v, "t", &json!({ "pick": { "a": 5 } }), 0).unwrap_err();
        assert!(
            e.contains("not run: at /pick/a: 5 is not of type \"string\". Call"),
            "{e}"
        );
        let e = check(&v, "t", &json!({ "mode": 0 }), 0).unwrap_err();
        assert!(
            e.contains("at /mode: 0 fits none of the 2 choices its 'oneOf' gives (the 1st: \"fast\" was expected; the 2nd: it is less than the minimum of 1)"),
            "{e}"
        );
        let e = check(&v, "t", &json!({ "tags": ["late"] }), 0).unwrap_err();
        assert!(
            e.contains("at /tags: none of its items fits its 'contains' ({\"const\":\"urgent\"}), and at least one must."),
            "{e}"
        );
        // Through a reference, the part shown is the one referred to.
        let v = compile(&json!({
            "type": "object",
            "$defs": { "labels": { "type": "array", "contains": { "type": "integer" } } },
            "properties": { "l": { "$ref": "#/$defs/labels" } }
        }))
        .unwrap();
        let e = check(&v, "t", &json!({ "l": ["a"] }), 0).unwrap_err();
        assert!(e.contains("its 'contains' ({\"type\":\"integer\"})"), "{e}");
    }
}
