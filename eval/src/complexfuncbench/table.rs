//! The paper's table with toolgraph's rows among the published ones.

/// The paper's published results (Table 3: Overall Success Rate, Overall Call Acc., in %).
pub const PUBLISHED: &[(&str, f64, f64)] = &[
    ("Claude-3.5-Sonnet", 61.00, 79.27),
    ("GPT-4o", 60.50, 80.55),
    ("GPT-4-Turbo", 49.50, 71.38),
    ("Qwen2.5-72B", 40.10, 58.32),
    ("Mistral Large 2", 20.10, 48.78),
    ("Qwen2.5-7B", 5.00, 18.19),
    ("Llama-3.1-70B", 2.70, 8.17),
];

/// The paper's table with toolgraph's rows among the published ones (best first).
pub fn table(r: &crate::chains::ChainReport) -> String {
    let mut rows: Vec<(String, f64, f64, bool)> =
        PUBLISHED.iter().map(|(m, s, c)| (m.to_string(), *s, *c, false)).collect();
    for m in &r.methods {
        rows.push((
            format!("**toolgraph `{}`**", m.method),
            100.0 * m.overall_success_rate,
            100.0 * m.overall_call_acc,
            true,
        ));
    }
    rows.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.2.total_cmp(&a.2)));
    // What toolgraph learned from, next to models run zero-shot: not like for like.
    let learned = if r.folds > 1 {
        let k = r.folds;
        format!("toolgraph learned from the other {}/{k} of the {} chains (a memory of ~{} worked examples of the same request families) and is scored on the held-out ones", k - 1, r.train_chains, r.train_chains * (k - 1) / k)
    } else {
        format!(
            "toolgraph learned from {} training chains and is scored on {} test chains",
            r.train_chains, r.test_chains
        )
    };
    let mut s = format!(
        "\nComplexFuncBench's metrics ({} held-out chains per method), scored as the benchmark's published evaluation code does, without its LLM judge: a call only the judge would accept counts as wrong, so toolgraph's figures are a lower bound of the official ones (see the `complexfuncbench` module). **Not like for like:** {learned}; the published rows (the paper's Table 3) are models run zero-shot on all 1,000 samples.\n\n| model | Overall Success Rate | Overall Call Acc. |\n|---|---:|---:|\n",
        r.methods.first().map(|m| m.chains).unwrap_or(0)
    );
    for (m, sr, ca, ours) in rows {
        let (sr, ca) = if ours {
            (format!("**{sr:.2}**"), format!("**{ca:.2}**"))
        } else {
            (format!("{sr:.2}"), format!("{ca:.2}"))
        };
        s.push_str(&format!("| {m} | {sr} | {ca} |\n"));
    }
    s
}
