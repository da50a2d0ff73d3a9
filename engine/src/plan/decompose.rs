//! The rule-based decomposition of a request into subtasks: sentences, "and then" / "then" /
//! "also", and "and <verb>" where the verb asks for something. The deterministic planner decomposes
//! with it; plan mode (which spends no decision on decomposition) and the LLM planner's fallback too.

/// Split `text` before each "and <verb>" / ", <verb>" whose verb asks for something.
fn split_on_verbs(text: &str) -> Vec<&str> {
    let mut cuts = vec![0];
    let lower = text.to_ascii_lowercase();
    let lex = crate::read::lexicon();
    let seps: Vec<String> = lex.clause_links.iter().map(|w| format!(" {w} ")).chain([", ".to_string()]).collect();
    for sep in &seps {
        let mut from = 0;
        while let Some(i) = lower[from..].find(sep) {
            let at = from + i;
            let rest = &lower[at + sep.len()..];
            let word: String = rest.chars().take_while(|c| c.is_ascii_alphabetic()).collect();
            if lex.asking_verbs.contains(&word) {
                cuts.push(at);
            }
            from = at + sep.len();
        }
    }
    cuts.sort_unstable();
    cuts.dedup();
    let mut out = Vec::new();
    for (k, &c) in cuts.iter().enumerate() {
        let end = cuts.get(k + 1).copied().unwrap_or(text.len());
        let part = text[c..end].trim_start_matches(',').trim();
        let part = lex.clause_links.iter().find_map(|w| part.strip_prefix(&format!("{w} "))).unwrap_or(part);
        out.push(part);
    }
    out
}

/// Split on sentence ends, "and then" / "then" / "also" and "and <verb>": each part that asks
/// for something.
pub(crate) fn split_request(text: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut cur = String::new();
    let mut chars = text.chars().peekable();
    while let Some(ch) = chars.next() {
        cur.push(ch);
        // A sentence ends at . ? ! ; followed by a space or the end (not inside an e-mail
        // address, a URL or a number).
        if matches!(ch, '.' | '?' | '!' | ';') && chars.peek().is_none_or(|c| c.is_whitespace()) {
            parts.push(std::mem::take(&mut cur));
        }
    }
    parts.push(cur);
    let mut out = Vec::new();
    for p in parts {
        for q in p
            .split(" and then ")
            .flat_map(|x| x.split(" Then "))
            .flat_map(|x| x.split(" Also, "))
            .flat_map(split_on_verbs)
        {
            let q = q.trim();
            if crate::read::reading::word_count(q) >= 3 && !q.to_ascii_lowercase().starts_with("today is") {
                out.push(q.to_string());
            }
        }
    }
    if out.is_empty() {
        out.push(text.trim().to_string());
    }
    out
}

/// The deterministic decomposition: [`split_request`]'s parts as subtasks (no category: retrieval
/// decides where each belongs).
pub fn subtasks_of(text: &str) -> Vec<super::planner::Subtask> {
    split_request(text).iter().enumerate().map(|(i, t)| super::planner::Subtask::of_text(i, t)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_split_into_subtasks() {
        assert_eq!(
            split_request("Today is May 1st. Find a hotel in Rome. Then list attractions near it."),
            vec!["Find a hotel in Rome.", "list attractions near it."]
        );
        assert_eq!(split_request("weather"), vec!["weather"]);
        // Dots inside addresses and numbers do not end a sentence.
        assert_eq!(
            split_request("Book a room for anna@example.com at 4.5 stars on 2024-06-01."),
            vec!["Book a room for anna@example.com at 4.5 stars on 2024-06-01."]
        );
        assert_eq!(
            split_request(
                "Could you find the cheapest air tickets for me and provide detailed flight info and a seat map?"
            ),
            vec!["Could you find the cheapest air tickets for me", "provide detailed flight info and a seat map?"]
        );
    }
}
