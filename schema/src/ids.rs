//! Stable identifiers and ToolBench's name rules.

/// Lower-case slug: every run of characters that are not ASCII letters or digits becomes one `_`,
/// with no leading or trailing `_`. `"Data"` → `"data"`, `"Songkick concert"` → `"songkick_concert"`.
pub fn slug(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut pending_sep = false;
    for ch in s.chars() {
        if ch.is_alphanumeric() {
            if pending_sep && !out.is_empty() {
                out.push('_');
            }
            pending_sep = false;
            out.extend(ch.to_lowercase());
        } else {
            pending_sep = true;
        }
    }
    out
}

/// Category name used when no source tells an API's category.
pub const UNKNOWN_CATEGORY: &str = "Unknown";

/// Id of the START node every chain begins at.
pub const START_ID: &str = "START";
/// Id of the END node every chain finishes at.
pub const END_ID: &str = "END";

/// Stable API id: `slug(category)/slug(tool)/slug(api)`.
pub fn api_id(category: &str, tool: &str, api: &str) -> String {
    format!("{}/{}/{}", slug(category), slug(tool), slug(api))
}

/// Stable tool id: `slug(category)/slug(tool)`.
pub fn tool_id(category: &str, tool: &str) -> String {
    format!("{}/{}", slug(category), slug(tool))
}

/// Stable category id: `slug(category)`.
pub fn category_id(category: &str) -> String {
    slug(category)
}

/// ToolBench's `standardize`: characters other than ASCII letters, digits, `_`, `^` and CJK
/// ideographs (U+4E00–U+9FA5) become `_`, runs of `_` collapse, the result is lower-cased and
/// trimmed of `_`, and a leading digit gets a `get_` prefix.
pub fn toolbench_standardize(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        let keep = ch.is_ascii_alphanumeric() || ch == '_' || ch == '^' || ('\u{4e00}'..='\u{9fa5}').contains(&ch);
        let c = if keep { ch } else { '_' };
        if c == '_' && out.ends_with('_') {
            continue;
        }
        out.push(c);
    }
    let lowered = out.to_lowercase();
    let trimmed = lowered.trim_matches('_');
    if trimmed.starts_with(|c: char| c.is_ascii_digit()) {
        format!("get_{trimmed}")
    } else {
        trimmed.to_string()
    }
}

/// ToolBench's `change_name`: API names that are Python keywords (or empty) get an `is_` prefix.
pub fn toolbench_change_name(name: &str) -> String {
    match name {
        "from" | "class" | "return" | "false" | "true" | "id" | "and" | "" => format!("is_{name}"),
        "ID" => "is_id".to_string(),
        _ => name.to_string(),
    }
}

/// Maximum length of a ToolBench function name; longer names keep their last 64 characters.
pub const TOOLBENCH_NAME_MAX: usize = 64;

/// The function name ToolBench gives an API of a tool: `<api>_for_<tool>`, standardized, keeping
/// the last 64 characters.
pub fn toolbench_function_name(tool: &str, api: &str) -> String {
    let full = format!("{}_for_{}", toolbench_change_name(&toolbench_standardize(api)), toolbench_standardize(tool));
    keep_last_chars(&full, TOOLBENCH_NAME_MAX)
}

fn keep_last_chars(s: &str, n: usize) -> String {
    let count = s.chars().count();
    if count <= n {
        s.to_string()
    } else {
        s.chars().skip(count - n).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_are_stable() {
        assert_eq!(slug("Songkick concert"), "songkick_concert");
        assert_eq!(slug("  Data / Finance  "), "data_finance");
        assert_eq!(api_id("Data", "TheClique", "Songkick concert"), "data/theclique/songkick_concert");
    }

    #[test]
    fn toolbench_names_match_recorded_ones() {
        // Names as they appear in ../shared/data/toolbench answer files.
        assert_eq!(toolbench_function_name("seo api", "images"), "images_for_seo_api");
        assert_eq!(toolbench_function_name("Transitaires", "Transitaire"), "transitaire_for_transitaires");
        assert_eq!(toolbench_standardize("__Kick.com API | Kick API__"), "kick_com_api_kick_api");
        assert_eq!(toolbench_standardize("4chan"), "get_4chan");
        assert_eq!(toolbench_change_name("id"), "is_id");
        // Front truncation to 64 characters, as ToolBench does.
        let long = toolbench_function_name(
            "AdCopy AI - Google Ads AI Text Generation",
            "10+ Ad Descriptions Generator (~ 25 Seconds)",
        );
        assert_eq!(long, "generator_25_seconds_for_adcopy_ai_google_ads_ai_text_generation");
        assert_eq!(long.chars().count(), 64);
    }
}
