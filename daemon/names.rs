//! The one naming rule, shared by tools and seats: a letter, then letters, digits and hyphens, up to 32.
//!
//! No underscore: a permission rule for one tool is spelled `mcp__<server>__<tool>`, and a name holding
//! `__` would make a rule that named a different tool than the one meant.

/// The sentence that states the rule, as runtime.log and the CLI say it.
pub const RULE: &str = "a name is a letter, then letters, digits and hyphens, up to 32 of them";

/// The longest name the rule allows.
pub const MAX_LEN: usize = 32;

/// Why a name breaks the rule, most useful reason first; `None` when it is a good name.
pub fn why_not(name: &str) -> Option<String> {
    let first = name.chars().next();
    match first {
        None => return Some("it is empty".into()),
        Some(c) if !c.is_ascii_alphabetic() => {
            return Some(format!("it starts with {}, not a letter", show_char(c)));
        }
        _ => {}
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '-'))
    {
        let what = if c == '_' {
            "an underscore".to_string()
        } else {
            show_char(c)
        };
        return Some(format!(
            "it holds {what}, which is not a letter, digit or hyphen"
        ));
    }
    if name.len() > MAX_LEN {
        return Some(format!(
            "it is {} characters long, more than {MAX_LEN}",
            name.len()
        ));
    }
    None
}

pub fn is_valid(name: &str) -> bool {
    why_not(name).is_none()
}

fn show_char(c: char) -> String {
    if c.is_ascii_digit() {
        format!("the digit {c}")
    } else if c == ' ' {
        "a space".into()
    } else if c.is_control() {
        format!("the control character {}", c.escape_default())
    } else {
        format!("\"{c}\"")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn good_names() {
        for n in ["a", "ci-status", "A1-b2", &"x".repeat(32)] {
            assert!(is_valid(n), "{n} should be valid");
        }
    }

    #[test]
    fn bad_names_say_why() {
        assert_eq!(why_not(""), Some("it is empty".into()));
        assert!(why_not("1abc").unwrap().contains("the digit 1"));
        assert!(why_not("-abc").unwrap().contains("\"-\""));
        assert!(why_not("ci_status").unwrap().contains("an underscore"));
        assert!(why_not("ci status").unwrap().contains("a space"));
        assert!(why_not(&"x".repeat(33)).unwrap().contains("33 characters"));
        assert!(why_not("café").unwrap().contains("\"é\""));
    }
}
